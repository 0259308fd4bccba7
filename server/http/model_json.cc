#include "server/http/model_json.h"

#include <string>

#include "absl/time/time.h"

namespace encoder::http {
namespace {

using json = nlohmann::json;

json KernelsJson(const model::KernelTrace& trace) {
  json ran = json::array();
  for (const model::KernelUse& k : trace.kernels) {
    json use = {
        {"library", k.library}, {"primitive", k.primitive}, {"calls", k.calls}};
    if (!k.impl.empty()) use["implementation"] = k.impl;
    if (!k.types.empty()) use["types"] = k.types;
    if (k.min_rows > 0) use["rows"] = {k.min_rows, k.max_rows};
    ran.push_back(std::move(use));
  }
  return {{"onednn_isa", trace.onednn_isa},
          {"mkl_isa", trace.mkl_isa},
          {"ran", std::move(ran)}};
}

json PositionalJson(const model::SchemeDescription& s,
                    const model::ModelConfig& c) {
  return {{"scheme", s.name},
          {"params", s.params},
          {"alibi_slopes", s.alibi_slopes},
          {"hooks", s.hooks},
          {"extrapolates", s.extrapolates},
          {"max_positions", c.max_positions}};
}

json BatchingJson(const api::ModelDescription& d) {
  const batching::BatchOptions& o = d.batching;
  json profile = json::array();
  for (const batching::ProfilePoint& p : d.batch_profile.points) {
    profile.push_back({{"length", p.length},
                       {"batch_size", p.batch},
                       {"sequences_per_s", p.sequences_per_s}});
  }
  json caps = json::array();
  for (const batching::LengthCap& cap : o.length_caps) {
    caps.push_back(
        {{"length", cap.length}, {"max_sequences", cap.max_sequences}});
  }
  return {{"max_batch_sequences", o.max_batch_sequences},
          {"max_batch_tokens", o.max_batch_tokens},
          {"max_queue_delay_ms", absl::ToDoubleMilliseconds(o.max_queue_delay)},
          {"max_queued_sequences", o.max_queued_sequences},
          {"max_batch_memory_bytes", o.max_batch_cost_bytes},
          {"executions", o.executions},
          {"max_batch_ms", absl::ToDoubleMilliseconds(o.max_batch_time)},
          {"profile", std::move(profile)},
          {"length_caps", std::move(caps)}};
}

// The task-specific fields: the head's, the sparse head's, the token
// projection's (empty or zero without them, as in ModelInfo).
void AddHeads(const api::ModelDescription& d, json* out) {
  const bool head = !d.head.labels.empty();
  (*out)["labels"] = d.head.labels;
  (*out)["head_pooling"] = head ? model::PoolingName(d.head.pooling) : "";
  (*out)["score_activation"] =
      head ? model::ScoreActivationName(d.head.activation) : "";
  (*out)["sparse_pooling"] = d.sparse.vocab > 0 ? d.sparse.pooling : "";
  (*out)["sparse_activation"] = d.sparse.vocab > 0 ? d.sparse.activation : "";
  (*out)["token_embedding_dim"] = d.token_dim;
  (*out)["normalize_token_embeddings"] = d.token_dim > 0 && d.normalize_tokens;
  (*out)["token_embeddings_skip_first"] =
      d.token_dim > 0 && d.token_skips_first;
  (*out)["sparse_kind"] = d.sparse.vocab > 0 ? d.sparse.kind : "";
  (*out)["late_interaction"] = d.late_interaction;
  (*out)["rerank_template"] =
      d.rerank_template.has_value() ? d.rerank_template->name : "";
  (*out)["rerank_instruction"] =
      d.rerank_template.has_value() ? d.rerank_template->instruction : "";
  json colbert = nullptr;
  if (d.colbert.has_value()) {
    const model::ColbertFraming& f = *d.colbert;
    colbert = {{"query_prefix", f.query_prefix},
               {"document_prefix", f.document_prefix},
               {"query_length", f.query_length},
               {"document_length", f.document_length},
               {"query_expansion", f.query_expansion},
               {"attend_to_expansion", f.attend_to_expansion},
               {"skiplist_words", f.skiplist_words}};
  }
  (*out)["colbert"] = colbert;
}

// auto's measured reach (ModelInfo.measured_reach); null when not taken.
json MeasuredReachJson(const api::ModelDescription& d) {
  if (!d.measured_reach) return nullptr;
  const api::MeasuredReach& m = *d.measured_reach;
  return {{"max_drift", m.max_drift},
          {"reference_length", m.reference_length},
          {"limit", m.limit},
          {"source_ids", m.source},
          {"lengths", m.lengths},
          {"drifts", m.drifts},
          {"holds_up_to", m.holds_up_to},
          {"breaks_at", m.breaks_at},
          {"seconds", m.seconds}};
}

}  // namespace

json ModelReportJson(const core::ModelReport& r) {
  const api::ModelDescription& d = *r.description;
  const model::ModelConfig& c = d.config;
  json out = {
      {"name", d.name},
      {"is_default", r.is_default},
      {"family", d.family},
      {"scheme", d.scheme.name},
      {"positional", PositionalJson(d.scheme, c)},
      {"dimensions", d.output_dim},
      {"d_model", c.d_model},
      {"num_layers", c.num_layers},
      {"num_heads", c.num_heads},
      {"num_kv_heads", c.kv_heads()},
      {"d_ff", c.d_ff},
      {"vocab_size", c.vocab_size},
      {"activation", model::ActivationName(c.activation)},
      {"norm_first", c.norm_first},
      {"causal", c.arch.causal},
      {"qk_norm", c.arch.qk_norm},
      {"max_input_tokens", r.max_input_tokens},
      {"max_extrapolation_tokens", r.max_extrapolation_tokens},
      {"long_input_policy", LongInputPolicyName(r.long_input.policy)},
      {"long_input_reason", r.long_input.reason},
      {"measured_reach", MeasuredReachJson(d)},
      {"pooling", model::PoolingName(c.pooling)},
      {"normalize", c.normalize},
      {"accepts_text", r.accepts_text},
      {"tokenizer", d.tokenizer_kind},
      {"tokenizer_path", d.tokenizer_file},
      {"tasks", r.tasks},
      {"prompts", d.prompts},
      {"default_prompt_name", d.default_prompt_name},
      {"include_prompt", d.include_prompt},
      {"strip_text", d.strip_text},
      {"weights", d.weights},
      {"parameter_count", d.parameter_count},
      {"device", d.device},
      {"dtype", model::DtypeName(d.dtype)},
      {"precision", model::PrecisionName(d.precision)},
      {"cpu_model", r.cpu_model},
      {"cpu_features", r.cpu_features},
      {"skip_padding_min_share", d.skip_padding_min_share},
      {"attention_kernel", api::AttentionKernelName(d.attention_kernel)},
      {"linear_kernel", api::LinearKernelName(d.linear_kernel)},
      {"packed_max_rows", d.packed_max_rows},
      {"packed_min_elements", d.packed_min_elements},
      {"kernels", KernelsJson(d.kernels)},
      {"batching", BatchingJson(d)}};
  AddHeads(d, &out);
  return out;
}

}  // namespace encoder::http
