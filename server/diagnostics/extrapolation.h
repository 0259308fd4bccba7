// The extrapolation probe (docs/positional-encodings.md#extrapolation): runs
// one token source at a grid of lengths, from short to past the model's
// trained length, and measures how attention and outputs change with
// length. LibTorch only; no RPC types.
#ifndef ENCODER_SERVER_DIAGNOSTICS_EXTRAPOLATION_H_
#define ENCODER_SERVER_DIAGNOSTICS_EXTRAPOLATION_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/diagnostics/scheme_reach.h"
#include "server/model/encoder.h"

namespace encoder::diagnostics {

// The most lengths one probe runs.
inline constexpr int64_t kMaxExtrapolationLengths = 32;

struct ExtrapolationOptions {
  // The input at length L is source[i mod n] for i = 0..L-1, so a shorter
  // input is a prefix of every longer one.
  std::vector<int64_t> source;
  std::vector<int64_t> lengths;  // strictly increasing, >= 1
  // Tokens 0..prefix_length-1 are compared across lengths; must not exceed
  // lengths[0].
  int64_t prefix_length = 1;
  // Checked before each length; true stops the probe with Cancelled.
  std::function<bool()> is_cancelled;
};

// The measurements at one length. Per-layer values are means over heads of
// the per-head statistics (docs/positional-encodings.md#attention-statistics).
struct LengthPoint {
  int64_t length = 0;
  bool ran = false;
  std::string skipped_reason;            // why not, when !ran
  std::vector<double> entropy;           // per layer, nats
  std::vector<double> relative_entropy;  // entropy / ln L (0 for L = 1)
  std::vector<double> mean_distance;     // per layer
  std::vector<double> first_mass;        // per layer: mass on token 0
  // |mean_pool(L) - mean_pool(L0)| / |mean_pool(L0)|, L0 the shortest
  // length that ran.
  double pooled_drift = 0;
  // Mean over the prefix tokens t of |h_L(t) - h_L0(t)| / |h_L0(t)|.
  double prefix_drift = 0;
  // Rotary and sinusoidal: how many frequency pairs have a wavelength
  // shorter than L (their angle turns at least once within the input).
  int64_t wrapped_pairs = 0;
};

struct ExtrapolationResult {
  SchemeReach reach;
  int64_t prefix_length = 0;
  int64_t reference_length = 0;  // L0 (0 when no length ran)
  std::vector<LengthPoint> points;
};

// InvalidArgument for an empty source, a bad grid or prefix length. Lengths
// the scheme cannot represent (past a learned table) are reported with
// ran = false instead of running. Runs the longest length with every
// layer's attention kept: the caller prices and admits that.
absl::StatusOr<ExtrapolationResult> RunExtrapolation(
    const model::Encoder& model, const ExtrapolationOptions& options);

}  // namespace encoder::diagnostics

#endif  // ENCODER_SERVER_DIAGNOSTICS_EXTRAPOLATION_H_
