// Diagonal statistics of square matrices, shared by the structure probes.
// Internal to the diagnostics library.
#ifndef ENCODER_SERVER_DIAGNOSTICS_MATRIX_STATS_H_
#define ENCODER_SERVER_DIAGNOSTICS_MATRIX_STATS_H_

#include <ATen/ATen.h>

namespace encoder::diagnostics {

// Per-diagonal reductions of a [..., N, N] matrix (N >= 1). Diagonal k is
// the set of entries (i, j) with j - i = k; index k + N - 1 of each result
// holds diagonal k, for k = -(N-1)..N-1. Results are [..., 2N-1] float64.
struct DiagonalStats {
  at::Tensor max;
  at::Tensor min;
  at::Tensor mean;
};
DiagonalStats ComputeDiagonalStats(const at::Tensor& matrix);

// Max over every leading index and diagonal of (max - min) on the diagonal:
// 0 exactly when each matrix is Toeplitz.
double ToeplitzDeviation(const at::Tensor& matrix);

// Max |A - A^T| over a [..., N, N] matrix.
double SymmetryDeviation(const at::Tensor& matrix);

}  // namespace encoder::diagnostics

#endif  // ENCODER_SERVER_DIAGNOSTICS_MATRIX_STATS_H_
