#include "server/diagnostics/matrix_stats.h"

#include <cstdint>
#include <vector>

namespace encoder::diagnostics {

DiagonalStats ComputeDiagonalStats(const at::Tensor& matrix) {
  TORCH_CHECK(matrix.dim() >= 2 && matrix.size(-1) == matrix.size(-2),
              "diagonal statistics need a [..., N, N] matrix");
  const int64_t n = matrix.size(-1);
  at::Tensor a = matrix.to(at::kDouble);
  std::vector<at::Tensor> maxs, mins, means;
  maxs.reserve(2 * n - 1);
  mins.reserve(2 * n - 1);
  means.reserve(2 * n - 1);
  for (int64_t k = -(n - 1); k < n; ++k) {
    at::Tensor diagonal = a.diagonal(k, -2, -1);  // [..., N - |k|]
    maxs.push_back(diagonal.amax(-1));
    mins.push_back(diagonal.amin(-1));
    means.push_back(diagonal.mean(-1));
  }
  return {at::stack(maxs, -1), at::stack(mins, -1), at::stack(means, -1)};
}

double ToeplitzDeviation(const at::Tensor& matrix) {
  const DiagonalStats stats = ComputeDiagonalStats(matrix);
  return (stats.max - stats.min).max().item<double>();
}

double SymmetryDeviation(const at::Tensor& matrix) {
  at::Tensor a = matrix.to(at::kDouble);
  return (a - a.transpose(-1, -2)).abs().max().item<double>();
}

}  // namespace encoder::diagnostics
