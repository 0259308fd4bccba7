// DiagnoseRequest.extrapolation_options -> the probe's options (the grid
// and its limit), and the probe's result -> ExtrapolationProbe.
#ifndef ENCODER_SERVER_SERVICE_EXTRAPOLATION_CONVERT_H_
#define ENCODER_SERVER_SERVICE_EXTRAPOLATION_CONVERT_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "encoder/v1/encoder.pb.h"
#include "server/diagnostics/report.h"
#include "server/runner/served_model.h"

namespace encoder::core {
struct DiagnoseLimits;
}  // namespace encoder::core

namespace encoder::service {

// Defaults of an empty grid.
inline constexpr int32_t kDefaultExtrapolationPoints = 6;
inline constexpr double kDefaultExtrapolationMultiple = 2.0;
inline constexpr double kMaxExtrapolationMultiple = 64.0;
inline constexpr int64_t kDefaultExtrapolationPrefix = 8;

// The lengths of an empty grid: `points` lengths spaced geometrically from
// trained/8 to multiple * trained, rounded, those over `limit` replaced by
// `limit`, duplicates dropped.
std::vector<int64_t> DefaultGrid(int64_t trained, double multiple,
                                 int32_t points, int64_t limit);

// Sets options->extrapolation from `request` (which asks for the probe).
// The source is options->token_ids, or for a random input a draw of the
// longest length with the request's seed (its first ids are the base
// input's). INVALID_ARGUMENT for a grid that is not strictly increasing,
// a length over the limit (the message names it), too many points, a bad
// max_multiple or prefix_length.
absl::Status BuildExtrapolation(const v1::DiagnoseRequest& request,
                                const runner::ServedModel& model,
                                const core::DiagnoseLimits& limits,
                                diagnostics::DiagnoseOptions* options);

void FillExtrapolation(const diagnostics::ExtrapolationResult& result,
                       const diagnostics::ExtrapolationOptions& options,
                       int64_t max_tokens, v1::ExtrapolationProbe* out);

// `n` ids in [0, vocab) drawn with mt19937_64 seeded with `seed`; the
// first k of a longer draw are the k of a shorter one.
std::vector<int64_t> SeededRandomIds(int64_t n, uint64_t seed, int64_t vocab);

}  // namespace encoder::service

#endif  // ENCODER_SERVER_SERVICE_EXTRAPOLATION_CONVERT_H_
