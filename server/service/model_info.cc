#include "server/service/model_info.h"

#include <filesystem>

#include "absl/strings/str_cat.h"

namespace encoder::service {

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
  v1::BatchingInfo* b = info->mutable_batching();
  b->set_max_batch_sequences(model.batch_options.max_batch_sequences);
  b->set_max_batch_tokens(model.batch_options.max_batch_tokens);
  b->set_max_queue_delay_ms(
      absl::ToDoubleMilliseconds(model.batch_options.max_queue_delay));
  b->set_max_queued_sequences(model.batch_options.max_queued_sequences);
  // The file's base name only: clients learn nothing of the host's paths.
  info->set_weights(
      model.spec.weights_path.empty()
          ? absl::StrCat("seed:", model.spec.seed)
          : std::filesystem::path(model.spec.weights_path).filename().string());
}

}  // namespace encoder::service
