#include "server/service/model_info.h"

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "server/model/cpu_features.h"
#include "server/runner/precision_choice.h"

namespace encoder::service {
namespace {

// The last component of a path: ListModels never reveals host paths.
std::string BaseName(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace

v1::DType ToProtoDType(at::ScalarType dtype) {
  switch (dtype) {
    case at::kFloat:
      return v1::DTYPE_FLOAT32;
    case at::kHalf:
      return v1::DTYPE_FLOAT16;
    case at::kBFloat16:
      return v1::DTYPE_BFLOAT16;
    case at::kDouble:
      return v1::DTYPE_FLOAT64;
    default:
      return v1::DTYPE_UNSPECIFIED;
  }
}

void FillModelInfo(const runner::HostedModel& model, bool is_default,
                   v1::ModelInfo* info) {
  const model::ModelConfig& c = model.spec.config;
  info->set_name(model.spec.name);
  info->set_is_default(is_default);
  const model::SchemeDescription d = model.encoder->scheme().Describe();
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
  info->set_num_layers(c.num_layers);
  info->set_d_ff(c.d_ff);
  info->set_vocab_size(c.vocab_size);
  info->set_activation(model::ActivationName(c.activation));
  info->set_norm_first(c.norm_first);
  info->set_pooling(model::PoolingName(c.pooling));
  info->set_normalize(c.normalize);
  info->set_max_input_tokens(c.max_length());
  info->set_device(model.encoder->device().str());
  info->set_dtype(ToProtoDType(model.encoder->dtype()));
  info->set_parameter_count(model.encoder->parameter_count());
  info->set_precision(runner::PrecisionName(*model.encoder));
  const model::CpuFeatures& cpu = model::DetectCpuFeatures();
  info->set_cpu_model(cpu.model);
  for (const std::string& f : cpu.Names()) info->add_cpu_features(f);
  for (const auto& [name, text] : model.spec.prompts) {
    (*info->mutable_prompts())[name] = text;
  }
  info->set_default_prompt_name(model.spec.default_prompt_name);
  v1::BatchingInfo* b = info->mutable_batching();
  b->set_max_batch_sequences(model.batch_options.max_batch_sequences);
  b->set_max_batch_tokens(model.batch_options.max_batch_tokens);
  b->set_max_queue_delay_ms(
      absl::ToDoubleMilliseconds(model.batch_options.max_queue_delay));
  b->set_max_queued_sequences(model.batch_options.max_queued_sequences);
  b->set_max_batch_memory_bytes(model.batch_options.max_batch_cost_bytes);
  for (const batching::ProfilePoint& p : model.batch_profile.points) {
    v1::BatchProfilePoint* point = b->add_profile();
    point->set_length(static_cast<int32_t>(p.length));
    point->set_batch_size(static_cast<int32_t>(p.batch));
    point->set_sequences_per_s(p.sequences_per_s);
  }
  for (const batching::LengthCap& c : model.batch_options.length_caps) {
    v1::BatchLengthCap* cap = b->add_length_caps();
    cap->set_length(static_cast<int32_t>(c.length));
    cap->set_max_sequences(static_cast<int32_t>(c.max_sequences));
  }
  if (!model.spec.model_dir.empty()) {
    // The directory's base name only: never a host path.
    info->set_weights(BaseName(model.spec.model_dir));
  } else {
    info->set_weights(model.spec.weights_path.empty()
                          ? absl::StrCat("seed:", model.spec.seed)
                          : BaseName(model.spec.weights_path));
  }
  info->set_family(model.spec.family);
  info->set_pooled_dim(model.encoder->output_dim());
  info->set_accepts_text(model.tokenizer != nullptr);
  if (model.tokenizer != nullptr) {
    info->set_tokenizer(model.tokenizer->kind());
    info->set_tokenizer_path(BaseName(model.spec.tokenizer_path));
  }
}

}  // namespace encoder::service
