// Encoder's weight transforms after loading: int8 quantization of the
// layers' projections (QuantizeInt8, SetInt8Attention) and their packing
// for oneDNN (PrepackWeights).
#include <array>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "server/common/status_macros.h"
#include "server/model/encoder.h"
#include "server/model/kernels/bf16_attention.h"
#include "server/model/kernels/cpu_features.h"

namespace encoder::model {

namespace {

// One of a layer's four projections: its plain weight and bias and the
// slots of its int8 and packed forms.
struct Projection {
  at::Tensor* weight;
  at::Tensor* bias;
  std::optional<Int8Linear>* int8;
  std::optional<PackedLinear>* packed;
};

std::array<Projection, 4> Projections(LayerWeights& w) {
  return {{{&w.in_proj_weight, &w.in_proj_bias, &w.in_proj_q, &w.in_proj_p},
           {&w.out_proj_weight, &w.out_proj_bias, &w.out_proj_q, &w.out_proj_p},
           {&w.linear1_weight, &w.linear1_bias, &w.linear1_q, &w.linear1_p},
           {&w.linear2_weight, &w.linear2_bias, &w.linear2_q, &w.linear2_p}}};
}

}  // namespace

namespace {

// Why `what` cannot run Bf16Attention for heads of `head_dim` here.
absl::Status Bf16AttentionRefused(const char* what, int64_t head_dim) {
  return absl::FailedPreconditionError(absl::StrCat(
      what,
      " needs AVX-512 BF16 and a head size of 32, 64, 96 or 128; this CPU ",
      DetectCpuFeatures().avx512_bf16 ? "has" : "lacks",
      " AVX-512 BF16 and the model's heads have ", head_dim, " channels"));
}

}  // namespace

absl::Status Encoder::SetInt8Attention(const std::string& mode) {
  if (mode != "auto" && mode != "float32" && mode != "bfloat16") {
    return absl::InvalidArgumentError(
        absl::StrCat("int8 attention must be auto, float32 or bfloat16, not \"",
                     mode, "\""));
  }
  if (!quantized_) {
    return absl::FailedPreconditionError(
        "int8 attention is set on an int8 model (after QuantizeInt8)");
  }
  const bool runs = Bf16AttentionSupported(config_.head_dim());
  if (mode == "bfloat16" && !runs) {
    return Bf16AttentionRefused("bfloat16 int8 attention", config_.head_dim());
  }
  bf16_attention_ = mode == "bfloat16" || (mode == "auto" && runs);
  return absl::OkStatus();
}

absl::Status Encoder::SetBf16Attention(const std::string& mode) {
  if (mode != "auto" && mode != "bfloat16" && mode != "fused") {
    return absl::InvalidArgumentError(
        absl::StrCat("bfloat16 attention must be auto, bfloat16 or fused, not "
                     "\"",
                     mode, "\""));
  }
  if (!device_.is_cpu() || dtype_ != at::kBFloat16) {
    return absl::FailedPreconditionError(absl::StrCat(
        "bfloat16 attention is set on a bfloat16 model on the CPU, not in ",
        c10::toString(dtype_), " on ", device_.str()));
  }
  if (mode == "bfloat16" && !Bf16AttentionSupported(config_.head_dim())) {
    return Bf16AttentionRefused("bfloat16 attention", config_.head_dim());
  }
  bf16_attention_ =
      mode == "bfloat16" ||
      (mode == "auto" && Bf16AttentionByDefault(config_.head_dim()));
  return absl::OkStatus();
}

absl::Status Encoder::QuantizeInt8(int64_t float_channels,
                                   int64_t row_outliers) {
  if (!device_.is_cpu() || dtype_ != at::kFloat) {
    return absl::FailedPreconditionError(
        absl::StrCat("int8 runs on the CPU in float32, not on ", device_.str(),
                     " in ", c10::toString(dtype_)));
  }
  if (float_channels < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "int8 float channels must be 0 or more, not ", float_channels));
  }
  if (row_outliers < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "int8 row outliers must be 0 or more, not ", row_outliers));
  }
  if (quantized_) return absl::OkStatus();
  if (plain_released_) {
    return absl::FailedPreconditionError(
        "int8 reads the float32 projection weights, which packing every "
        "product released: quantize before packing");
  }
  std::map<const void*, at::Tensor> input_max;
  if (float_channels > 0) {
    // Seeded random ids over the whole vocabulary, no padding.
    auto gen = at::make_generator<at::CPUGeneratorImpl>(20261129);
    EncoderInput in;
    in.ids =
        at::randint(0, config_.vocab_size,
                    {kInt8CalibrationSequences,
                     std::min(kInt8CalibrationTokens, config_.max_length())},
                    gen, at::TensorOptions().dtype(at::kLong));
    in.mask = at::ones_like(in.ids, at::kBool);
    calibrating_ = &input_max;
    absl::StatusOr<EncoderOutput> out = Forward(in, {});
    calibrating_ = nullptr;
    if (!out.ok()) {
      return absl::Status(
          out.status().code(),
          absl::StrCat("int8 calibration pass: ", out.status().message()));
    }
  }
  std::vector<LayerWeights> layers = layers_;
  for (LayerWeights& w : layers) {
    const std::array<Projection, 4> projections = Projections(w);
    for (const Projection& p : projections) {
      at::Tensor keep;
      auto it = input_max.find(p.weight->data_ptr());
      if (it != input_max.end()) {
        keep = std::get<1>(
            it->second.topk(std::min(float_channels, it->second.numel())));
      }
      // Row outliers only where the feed-forward's activation feeds the
      // second product: on all-mpnet-base-v2, that projection alone in
      // float32 brings int8's mean cosine from 0.9985 to 0.9995, the
      // others 0.9985-0.9987 (docs/benchmarks-history.md, "Row outliers"
      // under "int8 quality").
      const int64_t outliers = &p == &projections.back()
                                   ? std::min(row_outliers, p.weight->size(1))
                                   : 0;
      ASSIGN_OR_RETURN(auto q,
                       Int8Linear::Create(*p.weight, *p.bias, keep, outliers));
      p.int8->emplace(std::move(q));
    }
  }
  layers_ = std::move(layers);
  quantized_ = true;
  return absl::OkStatus();
}

absl::Status Encoder::PrepackWeights(PackedLimits limits) {
  if (!device_.is_cpu() || (dtype_ != at::kFloat && dtype_ != at::kBFloat16)) {
    return absl::FailedPreconditionError(
        absl::StrCat("packed weights are for the CPU in float32 or bfloat16, "
                     "not ",
                     device_.str(), " in ", c10::toString(dtype_)));
  }
  if (limits.max_rows < 0 || limits.min_elements < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("packed max rows and min elements must be 0 or more, not ",
                     limits.max_rows, " and ", limits.min_elements));
  }
  if (prepacked_) return absl::OkStatus();
  std::vector<LayerWeights> layers = layers_;
  int64_t packed_weights = 0;
  bool released = false;
  for (LayerWeights& w : layers) {
    for (const Projection& p : Projections(w)) {
      if (p.weight->numel() < limits.min_elements) continue;
      ASSIGN_OR_RETURN(auto packed, PackedLinear::Create(*p.weight, *p.bias,
                                                         limits.max_rows));
      p.packed->emplace(std::move(packed));
      ++packed_weights;
      if (limits.max_rows == PackedLinear::kEveryProduct) {
        *p.weight =
            at::empty(p.weight->sizes(), p.weight->options().device(at::kMeta));
        released = true;
      }
    }
  }
  layers_ = std::move(layers);
  prepacked_ = true;
  packed_weights_ = packed_weights;
  plain_released_ = released;
  return absl::OkStatus();
}

}  // namespace encoder::model
