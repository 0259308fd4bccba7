// The long-input policy auto's measured reach (api::MeasuredReach): how far
// past its length a model's pooled vector holds, run as served.
#ifndef ENCODER_SERVER_RUNNER_LONG_INPUT_REACH_H_
#define ENCODER_SERVER_RUNNER_LONG_INPUT_REACH_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "server/api/served_model.h"
#include "server/runner/encoder_runner.h"

namespace encoder::runner {

// The seed of the measurement's random period (fixed: a model's reach does
// not change from one start to the next).
inline constexpr uint64_t kReachSourceSeed = 0x5eed;

// The lengths the measurement runs for a model of `max_length` tokens up to
// `limit`: multiples of the period n = max(1, max_length / 4), from 4n
// through 1.25, 1.5, 2, 3, 4, 6, 8 ... 64 times it, and the limit rounded
// down to a multiple of n. Empty when no multiple of n past 4n fits.
std::vector<int64_t> ReachLengths(int64_t max_length, int64_t limit);

// Whether a model described by `d` is measured: its policy (the entry's,
// else `server_policy`) is auto, `max_drift` > 0, no learned table bounds
// its positions, and its extrapolation limit (the entry's, else
// `server_limit`) has room past max_length. The limit when it is, else
// nullopt.
std::optional<int64_t> ReachLimit(const api::ModelDescription& d,
                                  LongInputPolicy server_policy,
                                  int64_t server_limit, double max_drift);

// Runs the period at each of ReachLengths(d.max_length, limit) through
// `runner` one input at a time (the model's pooling and dense layers, not
// normalized) and stops after the first length whose drift from the
// reference exceeds `max_drift`.
absl::StatusOr<api::MeasuredReach> MeasureLongInputReach(
    EncoderRunner& runner, const api::ModelDescription& d, int64_t limit,
    double max_drift);

}  // namespace encoder::runner

#endif  // ENCODER_SERVER_RUNNER_LONG_INPUT_REACH_H_
