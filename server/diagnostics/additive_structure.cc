// Structure of additive codes PE(p) (sinusoidal, learned).
#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <tuple>
#include <vector>

#include "server/diagnostics/matrix_stats.h"
#include "server/diagnostics/structure.h"
#include "server/model/positional/pe_math.h"
#include "server/model/positional/traits.h"

namespace encoder::diagnostics {
namespace {

// The exact shift operator of sinusoidal codes: PE(p+k) = M_k PE(p), with
// M_k [D, D] rotating each (sin, cos) pair i by k * w_i. The pair's dims
// follow the layout: (2i, 2i+1) interleaved, (i, i + D/2) concatenated.
at::Tensor SinusoidalShiftOperator(const model::ModelConfig& config,
                                   int64_t k) {
  const model::PositionalConfig& pc = config.positional;
  const int64_t d = config.d_model;
  const std::vector<double> w =
      model::SinusoidalFrequencies(d, pc.base, pc.sinusoidal_denominator);
  at::Tensor m = at::zeros({d, d}, at::kDouble);
  auto acc = m.accessor<double, 2>();
  const bool concat = pc.sinusoidal_layout == model::SinusoidalLayout::kConcat;
  for (int64_t i = 0; i < static_cast<int64_t>(w.size()); ++i) {
    const int64_t s = concat ? i : 2 * i;
    const int64_t c = concat ? i + d / 2 : 2 * i + 1;
    const double angle = static_cast<double>(k) * w[i];
    // sin(a + b) = sin a cos b + cos a sin b; cos(a + b) = cos a cos b -
    // sin a sin b.
    acc[s][s] = std::cos(angle);
    acc[s][c] = std::sin(angle);
    acc[c][s] = -std::sin(angle);
    acc[c][c] = std::cos(angle);
  }
  return m;
}

// Predicts codes[k:] from codes[:-k] ([N-k, D] each) with M_k: exact for
// sinusoidal; for learned the least-squares best linear map. When N - k <= D
// a generic table is fitted exactly, so the learned residual only says
// something when N - k > D.
at::Tensor PredictShifted(const model::ModelConfig& config,
                          const at::Tensor& from, const at::Tensor& to,
                          int64_t k) {
  if (model::Traits(config.positional.type).closed_form_shift) {
    return at::matmul(from, SinusoidalShiftOperator(config, k).t());
  }
  at::Tensor solution = std::get<0>(at::linalg_lstsq(from, to));  // M_k^T
  return at::matmul(from, solution);
}

}  // namespace

api::StructureResult AnalyzeAdditive(const model::Encoder& model,
                                     int64_t positions) {
  const model::ModelConfig& config = model.config();
  int64_t n = positions;
  // A table is read from the first position id the model gives a token
  // (RoBERTa and MPNet number from padding_idx + 1; the rows below are
  // the padding row and one never used).
  int64_t first = 0;
  if (config.rejects_beyond_max_positions()) {
    first = config.first_position();
    n = std::min(n, config.max_positions - first);
  }
  api::StructureResult result;
  result.kind = "additive";
  result.positions = n;

  at::Tensor p = at::arange(first, first + n,
                            at::TensorOptions(model.device()).dtype(at::kLong));
  at::Tensor codes =
      model.scheme().InputCode(p).to(at::kCPU, at::kDouble);  // [N, D]
  const at::Tensor gram = at::matmul(codes, codes.t());       // [N, N]
  result.gram = ToDense<double>(gram);

  const DiagonalStats diagonals = ComputeDiagonalStats(gram);
  result.toeplitz_deviation =
      (diagonals.max - diagonals.min).max().item<double>();
  at::Tensor by_distance =
      diagonals.mean.narrow(0, n - 1, n).contiguous();  // k = 0..N-1
  result.similarity_by_distance.assign(by_distance.data_ptr<double>(),
                                       by_distance.data_ptr<double>() + n);

  // Exact pairwise Euclidean distances (no |a|^2 + |b|^2 - 2ab shortcut).
  at::Tensor dist = at::cdist(codes, codes, 2.0, /*compute_mode=*/2);
  dist.fill_diagonal_(std::numeric_limits<double>::infinity());
  result.min_code_distance = dist.min().item<double>();

  const double scale = codes.abs().max().item<double>();
  for (int64_t k : {1, 2, 5, 10}) {
    if (k >= n) continue;
    at::Tensor from = codes.narrow(0, 0, n - k);
    at::Tensor to = codes.narrow(0, k, n - k);
    const double residual =
        (PredictShifted(config, from, to, k) - to).abs().max().item<double>();
    result.shift_ks.push_back(k);
    result.shift_residuals.push_back(scale > 0 ? residual / scale : residual);
  }
  return result;
}

}  // namespace encoder::diagnostics
