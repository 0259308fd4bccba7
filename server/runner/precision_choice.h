// --dtype auto on the CPU: build each candidate precision of a model that
// this CPU runs natively (float32; int8 where the int8 kernels exist;
// bfloat16 where the CPU has native bfloat16), check each against float32
// on a fixed input set (the quality gate), time each on the model's shapes,
// and keep the fastest that passes.
#ifndef ENCODER_SERVER_RUNNER_PRECISION_CHOICE_H_
#define ENCODER_SERVER_RUNNER_PRECISION_CHOICE_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/model/encoder.h"
#include "server/model/weights/model_repository.h"

namespace encoder::runner {

// Quality gate: mean cosine similarity of pooled embeddings to float32.
inline constexpr double kInt8MinCosine = 0.99;
inline constexpr double kBfloat16MinCosine = 0.999;

struct PrecisionTrial {
  model::Precision precision = model::Precision::kFloat32;
  double seconds = 0;             // best of the timed forwards
  int64_t batch = 0, length = 0;  // the timed shape
  double mean_cosine = 1, worst_cosine = 1;
  bool passed = true;
};

// "precision 0.0123 s (8 x 128), cosine mean 0.9997 worst 0.9991, passed".
std::string DescribeTrial(const PrecisionTrial& trial);

struct PrecisionChoice {
  std::unique_ptr<model::Encoder> encoder;
  std::vector<PrecisionTrial> trials;  // in the order tried
};

// Chooses among the candidates for `spec` (already resolved, so a
// checkpoint is not read twice for float32: `float32` is its encoder).
// int8 keeps `int8_float_channels` per projection and each token's
// `int8_row_outliers` largest |x| in float32
// (model::Encoder::QuantizeInt8), and runs its attention as
// `int8_attention` says (model::Encoder::SetInt8Attention). The bfloat16
// candidate packs its weights (model::Encoder::PrepackWeights) with
// `pack_bfloat16` where given, and runs its attention as
// `bf16_attention` says (model::Encoder::SetBf16Attention).
absl::StatusOr<PrecisionChoice> ChoosePrecision(
    const model::ModelSpec& spec, std::unique_ptr<model::Encoder> float32,
    int64_t int8_float_channels = model::kDefaultInt8FloatChannels,
    int64_t int8_row_outliers = 0, const std::string& int8_attention = "auto",
    std::optional<model::PackedLimits> pack_bfloat16 = std::nullopt,
    const std::string& bf16_attention = "auto");

// The precision an encoder runs in: int8 when quantized, else its dtype.
model::Precision EncoderPrecision(const model::Encoder& encoder);

}  // namespace encoder::runner

#endif  // ENCODER_SERVER_RUNNER_PRECISION_CHOICE_H_
