// The extrapolation probe (docs/positional-encodings.md#extrapolation): runs
// one token source at a grid of lengths, from short to past the model's
// trained length, and measures how attention and outputs change with
// length. LibTorch only; no RPC types.
#ifndef ENCODER_SERVER_DIAGNOSTICS_EXTRAPOLATION_H_
#define ENCODER_SERVER_DIAGNOSTICS_EXTRAPOLATION_H_

#include "absl/status/statusor.h"
#include "server/api/diagnose_report.h"
#include "server/model/encoder.h"
#include "server/model/positional/reach.h"

namespace encoder::diagnostics {

// Runs the probe; its options and result are in report.h.
absl::StatusOr<api::ExtrapolationResult> RunExtrapolation(
    const model::Encoder& model, const api::ExtrapolationOptions& options);

}  // namespace encoder::diagnostics

#endif  // ENCODER_SERVER_DIAGNOSTICS_EXTRAPOLATION_H_
