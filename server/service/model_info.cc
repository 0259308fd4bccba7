#include "server/service/model_info.h"

namespace encoder::service {

v1::DType ToProtoDType(model::Dtype dtype) {
  switch (dtype) {
    case model::Dtype::kFloat16:
      return v1::DTYPE_FLOAT16;
    case model::Dtype::kBfloat16:
      return v1::DTYPE_BFLOAT16;
    case model::Dtype::kFloat32:
      break;
  }
  return v1::DTYPE_FLOAT32;
}

void FillModelInfo(const core::ModelReport& report, v1::ModelInfo* info) {
  const api::ModelDescription& model = *report.description;
  const model::ModelConfig& c = model.config;
  info->set_name(model.name);
  info->set_is_default(report.is_default);
  const model::SchemeDescription& d = model.scheme;
  v1::PositionalInfo* pos = info->mutable_positional();
  pos->set_scheme(d.name);
  for (const auto& [key, value] : d.params)
    (*pos->mutable_params())[key] = value;
  for (double s : d.alibi_slopes) pos->add_alibi_slopes(s);
  for (const std::string& h : d.hooks) pos->add_hooks(h);
  pos->set_extrapolates(d.extrapolates);
  pos->set_max_positions(c.max_positions);
  info->set_d_model(c.d_model);
  info->set_num_heads(c.num_heads);
  info->set_num_kv_heads(c.kv_heads());
  info->set_causal(c.arch.causal);
  info->set_qk_norm(c.arch.qk_norm);
  info->set_num_layers(c.num_layers);
  info->set_d_ff(c.d_ff);
  info->set_vocab_size(c.vocab_size);
  info->set_activation(model::ActivationName(c.activation));
  info->set_norm_first(c.norm_first);
  info->set_pooling(model::PoolingName(c.pooling));
  info->set_normalize(c.normalize);
  info->set_max_input_tokens(report.max_input_tokens);
  info->set_max_extrapolation_tokens(
      static_cast<int32_t>(report.max_extrapolation_tokens));
  info->set_long_input_policy(
      std::string(LongInputPolicyName(report.long_input.policy)));
  info->set_long_input_reason(report.long_input.reason);
  if (const auto& m = model.measured_reach; m.has_value()) {
    v1::MeasuredReach* out = info->mutable_measured_reach();
    out->set_max_drift(m->max_drift);
    out->set_reference_length(static_cast<int32_t>(m->reference_length));
    out->set_limit(static_cast<int32_t>(m->limit));
    for (int64_t id : m->source) out->add_source_ids(static_cast<int32_t>(id));
    for (int64_t l : m->lengths) out->add_lengths(static_cast<int32_t>(l));
    for (double d : m->drifts) out->add_drifts(d);
    out->set_holds_up_to(static_cast<int32_t>(m->holds_up_to));
    out->set_breaks_at(static_cast<int32_t>(m->breaks_at));
    out->set_seconds(m->seconds);
  }
  info->set_device(model.device);
  info->set_dtype(ToProtoDType(model.dtype));
  info->set_parameter_count(model.parameter_count);
  info->set_precision(model::PrecisionName(model.precision));
  info->set_cpu_model(report.cpu_model);
  for (const std::string& f : report.cpu_features) info->add_cpu_features(f);
  for (const auto& [name, text] : model.prompts) {
    (*info->mutable_prompts())[name] = text;
  }
  info->set_default_prompt_name(model.default_prompt_name);
  info->set_include_prompt(model.include_prompt);
  info->set_strip_text(model.strip_text);
  info->set_onednn_isa(model.kernels.onednn_isa);
  info->set_mkl_isa(model.kernels.mkl_isa);
  for (const model::KernelUse& k : model.kernels.kernels) {
    info->add_kernels(k.ToString());
  }
  info->set_attention_kernel(api::AttentionKernelName(model.attention_kernel));
  info->set_linear_kernel(api::LinearKernelName(model.linear_kernel));
  info->set_packed_max_rows(model.packed_max_rows);
  info->set_packed_min_elements(model.packed_min_elements);
  info->set_skip_padding_min_share(model.skip_padding_min_share);
  const batching::BatchOptions& o = model.batching;
  v1::BatchingInfo* b = info->mutable_batching();
  b->set_max_batch_sequences(o.max_batch_sequences);
  b->set_max_batch_tokens(o.max_batch_tokens);
  b->set_max_queue_delay_ms(absl::ToDoubleMilliseconds(o.max_queue_delay));
  b->set_max_queued_sequences(o.max_queued_sequences);
  b->set_max_batch_memory_bytes(o.max_batch_cost_bytes);
  b->set_executions(o.executions);
  b->set_max_batch_ms(absl::ToDoubleMilliseconds(o.max_batch_time));
  for (const batching::ProfilePoint& p : model.batch_profile.points) {
    v1::BatchProfilePoint* point = b->add_profile();
    point->set_length(static_cast<int32_t>(p.length));
    point->set_batch_size(static_cast<int32_t>(p.batch));
    point->set_sequences_per_s(p.sequences_per_s);
  }
  for (const batching::LengthCap& cap : o.length_caps) {
    v1::BatchLengthCap* out = b->add_length_caps();
    out->set_length(static_cast<int32_t>(cap.length));
    out->set_max_sequences(static_cast<int32_t>(cap.max_sequences));
  }
  info->set_weights(model.weights);
  info->set_family(model.family);
  info->set_pooled_dim(model.output_dim);
  info->set_accepts_text(report.accepts_text);
  for (const std::string& task : report.tasks) info->add_tasks(task);
  if (!model.head.labels.empty()) {
    for (const std::string& label : model.head.labels) info->add_labels(label);
    info->set_head_pooling(model::PoolingName(model.head.pooling));
    info->set_score_activation(
        model::ScoreActivationName(model.head.activation));
  }
  if (model.token_dim > 0) {
    info->set_token_embedding_dim(static_cast<int32_t>(model.token_dim));
    info->set_normalize_token_embeddings(model.normalize_tokens);
    info->set_token_embeddings_skip_first(model.token_skips_first);
    info->set_late_interaction(model.late_interaction);
  }
  if (model.colbert.has_value()) {
    const model::ColbertFraming& f = *model.colbert;
    v1::ColbertFraming* c = info->mutable_colbert();
    c->set_query_prefix(f.query_prefix);
    c->set_document_prefix(f.document_prefix);
    c->set_query_length(static_cast<int32_t>(f.query_length));
    c->set_document_length(static_cast<int32_t>(f.document_length));
    c->set_query_expansion(f.query_expansion);
    c->set_attend_to_expansion(f.attend_to_expansion);
    for (const std::string& w : f.skiplist_words) c->add_skiplist_words(w);
  }
  if (model.rerank_template.has_value()) {
    info->set_rerank_template(model.rerank_template->name);
    info->set_rerank_instruction(model.rerank_template->instruction);
  }
  if (model.sparse.vocab > 0) {
    info->set_sparse_pooling(model.sparse.pooling);
    info->set_sparse_activation(model.sparse.activation);
    info->set_sparse_kind(model.sparse.kind);
  }
  if (!model.tokenizer_kind.empty()) {
    info->set_tokenizer(model.tokenizer_kind);
    info->set_tokenizer_path(model.tokenizer_file);
  }
}

}  // namespace encoder::service
