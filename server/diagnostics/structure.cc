// Structure probes per scheme kind: dispatch, rotary and bias schemes.
#include "server/diagnostics/structure.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cstdint>
#include <limits>

#include "server/diagnostics/matrix_stats.h"
#include "server/model/positional/pe_math.h"
#include "server/model/positional/traits.h"

namespace encoder::diagnostics {
namespace {

// Fixed seed of the probe vectors, so reports are reproducible.
constexpr uint64_t kRotarySeed = 20240601;

// RoPE: with seeded random q, k [head_dim], relativity[m][n] =
// <R_m q, R_n k> should depend only on n - m, and |R_p q| = |q|.
api::StructureResult AnalyzeRotary(const model::Encoder& model, int64_t n) {
  const model::ModelConfig& config = model.config();
  const int64_t d = config.head_dim();
  api::StructureResult result;
  result.kind = "rotary";
  result.positions = n;

  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(kRotarySeed);
  const auto f64 = at::TensorOptions().dtype(at::kDouble);
  at::Tensor q = at::randn({d}, gen, f64);
  at::Tensor k = at::randn({d}, gen, f64);
  at::Tensor positions =
      at::arange(n, at::TensorOptions().dtype(at::kLong)).unsqueeze(0);
  // [1, 1, N, d/2] each; plain names, since C++17 lambdas cannot capture
  // structured bindings.
  const auto cos_sin =
      model::RopeCosSin(positions, d, config.positional.base, at::kDouble,
                        config.positional.rope_scaling);
  const at::Tensor& cos = cos_sin.first;
  const at::Tensor& sin = cos_sin.second;
  auto rotate = [&](const at::Tensor& x) {
    return model::RopeRotate(x.expand({1, 1, n, d}), cos, sin,
                             config.positional.rope_layout)
        .reshape({n, d});
  };
  at::Tensor rq = rotate(q);  // [N, d], row p = R_p q
  at::Tensor rk = rotate(k);
  const at::Tensor relativity = at::matmul(rq, rk.t());  // [N, N]
  result.relativity = ToDense<double>(relativity);
  result.relativity_deviation = ToeplitzDeviation(relativity);
  result.norm_ratio_deviation =
      (rq.norm(2, {1}) / q.norm() - 1).abs().max().item<double>();
  return result;
}

// Machine epsilon of a model's floating type (the gap above 1.0).
double RoundingEpsilon(at::ScalarType type) {
  switch (type) {
    case at::kDouble:
      return std::numeric_limits<double>::epsilon();
    case at::kFloat:
      return std::numeric_limits<float>::epsilon();
    case at::kHalf:
      return static_cast<double>(std::numeric_limits<c10::Half>::epsilon());
    default:
      return static_cast<double>(std::numeric_limits<c10::BFloat16>::epsilon());
  }
}

// A per-head bias [H, N, N] (float64, CPU) over positions 0..N-1: its
// values, symmetry and Toeplitz deviation, judged within `tolerance`.
api::StructureResult BiasStructure(const at::Tensor& bias, int64_t n,
                                   double tolerance) {
  api::StructureResult result;
  result.kind = "bias";
  result.positions = n;
  result.bias = ToDense<double>(bias);
  result.symmetry_deviation = SymmetryDeviation(bias);
  result.symmetric = result.symmetry_deviation < tolerance;
  result.toeplitz_deviation = ToeplitzDeviation(bias);
  result.toeplitz = result.toeplitz_deviation <= tolerance;
  return result;
}

// ALiBi and relative bias: the per-head bias over positions 0..N-1.
api::StructureResult AnalyzeBias(const model::Encoder& model, int64_t n) {
  at::Tensor positions =
      at::arange(n, at::TensorOptions(model.device()).dtype(at::kLong))
          .unsqueeze(0);  // [1, N]
  const at::Tensor bias = model.scheme()
                              .AttentionBias(positions, positions, at::kDouble)
                              .select(0, 0)
                              .to(at::kCPU, at::kDouble);  // [H, N, N]
  api::StructureResult result = BiasStructure(bias, n, kExactTolerance);
  result.slopes = model.scheme().Describe().alibi_slopes;
  return result;
}

// Disentangled attention: the position terms of layer 0 for one seeded
// random query and key content [head_dim] per head, at every pair of
// positions 0..N-1: bias[h][i][j] = (q_h . P_k[idx(i, j)] +
// k_h . P_q[idx(i, j)]) / scale, which depends on i - j alone.
api::StructureResult AnalyzeDisentangled(const model::Encoder& model,
                                         int64_t n) {
  const model::ModelConfig& config = model.config();
  const int64_t h = config.num_heads, d = config.head_dim();
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(kRotarySeed);
  const auto options =
      at::TensorOptions().dtype(model.dtype()).device(model.device());
  auto content = [&]() {
    return at::randn({1, h, 1, d}, gen, at::TensorOptions().dtype(at::kFloat))
        .to(options)
        .expand({1, h, n, d});
  };
  const at::Tensor q = content(), k = content();
  const at::Tensor positions =
      at::arange(n, options.dtype(at::kLong)).unsqueeze(0);
  const at::Tensor bias = model.scheme()
                              .ContentBias(q, k, positions, /*layer=*/0)
                              .select(0, 0)
                              .to(at::kCPU, at::kDouble);  // [H, N, N]
  // Computed in the model's type: its rounding, not float64's, bounds
  // how far equal distances may differ.
  const double eps = RoundingEpsilon(model.dtype());
  const double scale = std::max(1.0, bias.abs().max().item<double>());
  return BiasStructure(bias, n,
                       std::max(kExactTolerance, kRoundingUlps * eps * scale));
}

}  // namespace

api::StructureResult AnalyzeStructure(const model::Encoder& model,
                                      int64_t positions) {
  switch (model::Traits(model.config().positional.type).structure) {
    case model::ExpectedStructure::kAdditive:
      return AnalyzeAdditive(model, positions);
    case model::ExpectedStructure::kRotary:
      return AnalyzeRotary(model, positions);
    case model::ExpectedStructure::kBias:
      return AnalyzeBias(model, positions);
    case model::ExpectedStructure::kAdditiveAndBias: {
      // The table's structure, with the bias the buckets add beside it.
      api::StructureResult result = AnalyzeAdditive(model, positions);
      api::StructureResult bias = AnalyzeBias(model, positions);
      result.bias = std::move(bias.bias);
      result.symmetric = bias.symmetric;
      result.symmetry_deviation = bias.symmetry_deviation;
      return result;
    }
    case model::ExpectedStructure::kDisentangled:
      return AnalyzeDisentangled(model, positions);
    case model::ExpectedStructure::kNone:
      break;
  }
  api::StructureResult result;
  result.kind = "none";
  result.positions = positions;
  return result;
}

}  // namespace encoder::diagnostics
