// DiagnoseRequest -> diagnostics options, and the report -> response.
#ifndef ENCODER_SERVER_SERVICE_DIAGNOSE_CONVERT_H_
#define ENCODER_SERVER_SERVICE_DIAGNOSE_CONVERT_H_

#include "absl/status/statusor.h"
#include "encoder/v1/encoder.pb.h"
#include "server/diagnostics/report.h"
#include "server/runner/served_model.h"

namespace encoder::core {
struct DiagnoseLimits;
}  // namespace encoder::core

namespace encoder::service {

// The largest |shift_offset| Diagnose accepts. Positions stay far from
// int64 overflow, and float32 codes keep their precision well past it.
inline constexpr int64_t kMaxShiftOffset = int64_t{1} << 20;

// INVALID_ARGUMENT for no input or empty text, ids outside the vocabulary,
// inputs longer than limits.max_tokens or the model's limit, a bad
// permutation length, a shift_offset beyond kMaxShiftOffset, a tolerance
// that is negative or not finite, or structure_positions over
// limits.max_structure_positions (messages name the limit).
absl::StatusOr<diagnostics::DiagnoseOptions> BuildDiagnoseOptions(
    const v1::DiagnoseRequest& request, const runner::ServedModel& model,
    const core::DiagnoseLimits& limits);

void FillDiagnoseResponse(const diagnostics::DiagnoseReport& report,
                          const runner::ServedModel& model,
                          const diagnostics::DiagnoseOptions& options,
                          v1::DiagnoseResponse* response);

}  // namespace encoder::service

#endif  // ENCODER_SERVER_SERVICE_DIAGNOSE_CONVERT_H_
