// The behavioural probes: permutation equivariance and shift invariance.
// Internal to the diagnostics library; Diagnose validates inputs first.
#ifndef ENCODER_SERVER_DIAGNOSTICS_PROBES_H_
#define ENCODER_SERVER_DIAGNOSTICS_PROBES_H_

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "server/diagnostics/diagnostics.h"
#include "server/model/encoder.h"

namespace encoder::diagnostics {

// Default verdict tolerances when the caller gives none.
inline constexpr double kDefaultTolerance = 1e-5;
inline constexpr double kDefaultRopeShiftTolerance = 1e-4;

// One sequence and the model's output on it at positions 0..S-1.
struct BaseRun {
  at::Tensor ids;     // [1, S] int64 on the model's device
  at::Tensor mask;    // [1, S] bool, all true
  at::Tensor tokens;  // [1, S, D] f(x)
};

// A seeded permutation of 0..n-1 (the same on every machine). For n >= 2 it
// is never the identity, which would make the probe vacuous.
std::vector<int64_t> SeededPermutation(int64_t n, uint64_t seed);

// Runs f(Px) at positions 0..S-1 and compares it with P f(x) over tokens and
// over the mean-pooled output. `order` must be a permutation of 0..S-1:
// (Px)_i = x_order[i].
absl::StatusOr<api::PermutationResult> RunPermutationProbe(
    const model::Encoder& model, const BaseRun& base,
    const std::vector<int64_t>& order, double tolerance);

// Runs the input at positions offset..offset+S-1 and compares it with the
// base run. For a scheme that cannot extrapolate, shifted positions outside
// its table give a "not relative" verdict instead of an error.
absl::StatusOr<api::ShiftResult> RunShiftProbe(const model::Encoder& model,
                                               const BaseRun& base,
                                               int64_t offset,
                                               double tolerance);

}  // namespace encoder::diagnostics

#endif  // ENCODER_SERVER_DIAGNOSTICS_PROBES_H_
