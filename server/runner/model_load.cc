#include "server/runner/model_load.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "server/common/status_macros.h"
#include "server/model/kernels/packed_linear.h"
#include "server/runner/precision_choice.h"
#include "server/tokenizer/byte_tokenizer.h"

namespace encoder::runner {

absl::StatusOr<std::unique_ptr<tokenizer::Tokenizer>> LoadModelTokenizer(
    const model::ModelSpec& spec, std::string* why_none) {
  const bool from_checkpoint =
      spec.tokenizer_path.empty() && !spec.model_dir.empty();
  if (spec.tokenizer_path.empty() && !from_checkpoint) {
    return std::unique_ptr<tokenizer::Tokenizer>(
        std::make_unique<tokenizer::ByteTokenizer>(spec.config.vocab_size));
  }
  const std::string& path =
      from_checkpoint ? spec.model_dir : spec.tokenizer_path;
  tokenizer::LoadOptions load;
  load.lowercase = spec.lowercase;  // sentence-transformers' do_lower_case
  auto tok = tokenizer::LoadTokenizer(path, load);
  if (tok.ok() && (*tok)->vocab_size() > spec.config.vocab_size) {
    tok = absl::InvalidArgumentError(absl::StrCat(
        "it has ", (*tok)->vocab_size(),
        " ids, more than the model's vocab_size ", spec.config.vocab_size));
  }
  if (tok.ok()) return tok;
  const std::string reason = absl::StrCat("tokenizer of model \"", spec.name,
                                          "\": ", tok.status().message());
  if (!from_checkpoint) return absl::Status(tok.status().code(), reason);
  // A checkpoint still serves token ids when its tokenizer files are
  // missing or use a component this server does not implement.
  *why_none = absl::StrCat(
      "model \"", spec.name,
      "\" accepts token ids only; send token_ids instead of text (", reason,
      ")");
  return std::unique_ptr<tokenizer::Tokenizer>();
}

std::optional<model::PackedLimits> PackedLimitsFor(const HostOptions& options,
                                                   at::ScalarType dtype) {
  if (!options.device.is_cpu() || !model::PackedLinearSupported()) {
    return std::nullopt;
  }
  if (dtype == at::kFloat && options.pack_weights) {
    return options.packed_limits;
  }
  if (dtype == at::kBFloat16 && options.pack_bfloat16) {
    return options.packed_limits_bfloat16;
  }
  return std::nullopt;
}

absl::StatusOr<std::unique_ptr<model::Encoder>> LoadPrecision(
    const model::ModelSpec& spec, const HostOptions& options,
    HostedModel* hosted) {
  const bool cpu = options.device.is_cpu();
  const at::ScalarType dtype =
      options.auto_precision && cpu ? at::kFloat : options.dtype;
  ASSIGN_OR_RETURN(auto encoder, model::LoadModel(spec, options.device, dtype,
                                                  &hosted->spec));
  auto named = [&spec](const absl::Status& s) {
    return absl::Status(
        s.code(), absl::StrCat("model \"", spec.name, "\": ", s.message()));
  };
  // Packed after int8 (which reads the plain weights), and before the
  // automatic choice times float32 against its candidates (built afresh).
  auto pack = [&]() -> absl::Status {
    const std::optional<model::PackedLimits> limits =
        PackedLimitsFor(options, dtype);
    return limits.has_value() ? encoder->PrepackWeights(*limits)
                              : absl::OkStatus();
  };
  if (options.auto_precision && cpu) {
    if (absl::Status s = pack(); !s.ok()) return named(s);
    auto choice = ChoosePrecision(
        hosted->spec, std::move(encoder), options.int8_float_channels,
        options.int8_row_outliers, options.int8_attention,
        PackedLimitsFor(options, at::kBFloat16), options.bf16_attention);
    if (!choice.ok()) return named(choice.status());
    hosted->precision_trials = std::move(choice->trials);
    return std::move(choice->encoder);
  }
  const std::string quantize =
      spec.quantize.empty() ? options.quantize : spec.quantize;
  if (quantize == "int8") {
    if (absl::Status s = encoder->QuantizeInt8(options.int8_float_channels,
                                               options.int8_row_outliers);
        !s.ok()) {
      return named(s);
    }
    if (absl::Status s = encoder->SetInt8Attention(options.int8_attention);
        !s.ok()) {
      return named(s);
    }
    if (!options.pack_int8_models) return encoder;
  }
  if (cpu && dtype == at::kBFloat16) {
    if (absl::Status s = encoder->SetBf16Attention(options.bf16_attention);
        !s.ok()) {
      return named(s);
    }
  }
  if (absl::Status s = pack(); !s.ok()) return named(s);
  return encoder;
}

}  // namespace encoder::runner
