#include "server/runner/precision_choice.h"

#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "server/common/status_macros.h"
#include "server/model/dtype.h"
#include "server/model/kernels/cpu_features.h"
#include "server/model/kernels/int8_linear.h"

namespace encoder::runner {
namespace {

// `count` sequences of `length` ids (a seeded draw) with lengths spread
// from 2 to `length`.
model::EncoderInput GateInputs(const model::ModelConfig& c, int64_t count,
                               int64_t length) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(7);
  model::EncoderInput in;
  in.ids = at::randint(1, c.vocab_size, {count, length}, gen, at::kLong);
  in.mask = at::zeros({count, length}, at::kBool);
  for (int64_t i = 0; i < count; ++i) {
    const int64_t n = 2 + (length - 2) * i / std::max<int64_t>(1, count - 1);
    in.mask[i].narrow(0, 0, n).fill_(true);
  }
  return in;
}

absl::StatusOr<at::Tensor> Pooled(const model::Encoder& enc,
                                  const model::EncoderInput& in) {
  ASSIGN_OR_RETURN(auto out, enc.Forward(in, {}));
  return model::Pool(out.tokens, in.mask, enc.config().pooling, false)
      .to(at::kDouble);
}

// Best of three timed forwards after one untimed.
absl::StatusOr<double> TimeForward(const model::Encoder& enc,
                                   const model::EncoderInput& in) {
  double best = std::numeric_limits<double>::infinity();
  for (int i = 0; i < 4; ++i) {
    const auto start = std::chrono::steady_clock::now();
    ASSIGN_OR_RETURN(auto out, enc.Forward(in, {}));
    const std::chrono::duration<double> took =
        std::chrono::steady_clock::now() - start;
    if (i > 0) best = std::min(best, took.count());
  }
  return best;
}

absl::StatusOr<std::unique_ptr<model::Encoder>> Build(
    const model::ModelSpec& spec, model::Precision precision,
    int64_t int8_float_channels, int64_t int8_row_outliers,
    const std::string& int8_attention,
    std::optional<model::PackedLimits> pack_bfloat16,
    const std::string& bf16_attention) {
  if (precision == model::Precision::kBfloat16) {
    ASSIGN_OR_RETURN(auto enc, model::LoadModel(spec, at::kCPU, at::kBFloat16));
    RETURN_IF_ERROR(enc->SetBf16Attention(bf16_attention));
    if (pack_bfloat16.has_value()) {
      RETURN_IF_ERROR(enc->PrepackWeights(*pack_bfloat16));
    }
    return enc;
  }
  ASSIGN_OR_RETURN(auto enc, model::LoadModel(spec, at::kCPU, at::kFloat));
  RETURN_IF_ERROR(enc->QuantizeInt8(int8_float_channels, int8_row_outliers));
  RETURN_IF_ERROR(enc->SetInt8Attention(int8_attention));
  return enc;
}

}  // namespace

std::string DescribeTrial(const PrecisionTrial& t) {
  return absl::StrFormat(
      "%s %.4f s (%d x %d), cosine to float32 mean %.5f worst %.5f, %s",
      model::PrecisionName(t.precision), t.seconds, t.batch, t.length,
      t.mean_cosine, t.worst_cosine, t.passed ? "passed" : "failed");
}

model::Precision EncoderPrecision(const model::Encoder& encoder) {
  return model::PrecisionOf(model::DtypeOf(encoder.dtype()),
                            encoder.quantization() == "int8");
}

absl::StatusOr<PrecisionChoice> ChoosePrecision(
    const model::ModelSpec& spec, std::unique_ptr<model::Encoder> float32,
    int64_t int8_float_channels, int64_t int8_row_outliers,
    const std::string& int8_attention,
    std::optional<model::PackedLimits> pack_bfloat16,
    const std::string& bf16_attention) {
  c10::InferenceMode guard;
  const model::ModelConfig& c = float32->config();
  const int64_t length = std::min<int64_t>(128, c.max_length());
  const model::EncoderInput gate =
      GateInputs(c, 8, std::min<int64_t>(64, length));
  const model::EncoderInput timed = GateInputs(c, 8, length);
  ASSIGN_OR_RETURN(auto reference, Pooled(*float32, gate));
  PrecisionChoice choice;
  PrecisionTrial base{model::Precision::kFloat32, 0, 8, length};
  ASSIGN_OR_RETURN(auto t, TimeForward(*float32, timed));
  base.seconds = t;
  choice.trials.push_back(base);
  choice.encoder = std::move(float32);
  double best = base.seconds;
  std::vector<std::pair<model::Precision, double>> candidates;
  if (model::Int8Supported()) {
    candidates.push_back({model::Precision::kInt8, kInt8MinCosine});
  }
  if (model::DetectCpuFeatures().native_bf16()) {
    candidates.push_back({model::Precision::kBfloat16, kBfloat16MinCosine});
  }
  for (const auto& [precision, min_cosine] : candidates) {
    ASSIGN_OR_RETURN(
        auto enc, Build(spec, precision, int8_float_channels, int8_row_outliers,
                        int8_attention, pack_bfloat16, bf16_attention));
    ASSIGN_OR_RETURN(auto pooled, Pooled(*enc, gate));
    const at::Tensor cos = at::cosine_similarity(pooled, reference, 1);
    PrecisionTrial trial{precision, 0, 8, length};
    trial.mean_cosine = cos.mean().item<double>();
    trial.worst_cosine = cos.min().item<double>();
    trial.passed = trial.mean_cosine >= min_cosine;
    ASSIGN_OR_RETURN(auto seconds, TimeForward(*enc, timed));
    trial.seconds = seconds;
    choice.trials.push_back(trial);
    if (trial.passed && trial.seconds < best) {
      best = trial.seconds;
      choice.encoder = std::move(enc);
    }
  }
  return choice;
}

}  // namespace encoder::runner
