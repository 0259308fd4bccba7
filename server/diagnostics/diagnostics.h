// Positional diagnostics: probes that run a model and measure how it uses
// position (docs/positional-encodings.md#diagnostics). LibTorch only; no
// RPC types.
#ifndef ENCODER_SERVER_DIAGNOSTICS_DIAGNOSTICS_H_
#define ENCODER_SERVER_DIAGNOSTICS_DIAGNOSTICS_H_

#include <ATen/ATen.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/common/attention_stats.h"
#include "server/diagnostics/extrapolation.h"
#include "server/model/encoder.h"

namespace encoder::diagnostics {

// probs: [heads, S, S] probabilities of one sequence, real tokens only (no
// padding rows or columns), any floating dtype and device. Returns one entry
// per head, computed in float64. Throws c10::Error for any other shape.
std::vector<AttentionHeadStats> ComputeHeadStats(const at::Tensor& probs,
                                                 int64_t layer);

struct DiagnoseOptions {
  std::vector<int64_t> token_ids;  // the input (already validated)
  bool permutation = true;
  bool shift = true;
  bool structure = true;
  bool attention_stats = true;
  bool return_attention_maps = false;
  std::vector<int64_t> permutation_order;  // empty: seeded random
  uint64_t permutation_seed = 0;
  int64_t shift_offset = 7;
  int64_t structure_positions = 64;
  // Tolerances for the verdicts; <= 0: defaults (1e-5; rope shift 1e-4).
  double tolerance = 0;
  // Runs the extrapolation probe when set (its own source and grid).
  std::optional<ExtrapolationOptions> extrapolation;
};

struct PermutationResult {
  std::vector<int64_t> order;
  double max_token_error = 0;   // max |f(Px) - P f(x)|
  double max_pooled_error = 0;  // mean pooling
  double tolerance = 0;
  bool equivariant = false;
  std::string verdict;
};

struct ShiftResult {
  int64_t offset = 0;
  double max_token_error = 0;
  double max_pooled_error = 0;
  double tolerance = 0;
  bool relative_only = false;
  std::string verdict;
};

struct StructureResult {
  std::string kind;  // additive | rotary | bias | none
  int64_t positions = 0;
  at::Tensor gram;  // [N, N] float64 (additive)
  double toeplitz_deviation = 0;
  std::vector<double> similarity_by_distance;  // k = 0..N-1
  double min_code_distance = 0;
  std::vector<int64_t> shift_ks;
  std::vector<double> shift_residuals;
  at::Tensor relativity;  // [N, N] float64 (rotary)
  double relativity_deviation = 0;
  double norm_ratio_deviation = 0;
  at::Tensor bias;  // [H, N, N] float64 (bias)
  std::vector<double> slopes;
  bool symmetric = false;
  double symmetry_deviation = 0;
  bool toeplitz = false;
};

struct DiagnoseReport {
  std::optional<PermutationResult> permutation;
  std::optional<ShiftResult> shift;
  std::optional<StructureResult> structure;
  std::vector<AttentionHeadStats> attention_stats;  // layer-major
  double uniform_entropy = 0;                       // ln S
  at::Tensor attention_maps;  // [L, H, S, S] float32, if asked
  std::optional<ExtrapolationResult> extrapolation;
};

// Runs the requested probes on `model` (a const, thread-safe encoder).
// InvalidArgument for a bad permutation (not a permutation of 0..S-1) or
// bad sizes; Internal for library failures.
absl::StatusOr<DiagnoseReport> Diagnose(const model::Encoder& model,
                                        const DiagnoseOptions& options);

}  // namespace encoder::diagnostics

#endif  // ENCODER_SERVER_DIAGNOSTICS_DIAGNOSTICS_H_
