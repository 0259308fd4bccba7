// DiagnoseRequest -> diagnostics options, and the report -> response.
#ifndef ENCODER_SERVER_SERVICE_DIAGNOSE_CONVERT_H_
#define ENCODER_SERVER_SERVICE_DIAGNOSE_CONVERT_H_

#include "absl/status/statusor.h"
#include "encoder/v1/encoder.pb.h"
#include "server/diagnostics/diagnostics.h"
#include "server/runner/model_host.h"

namespace encoder::service {

struct DiagnoseLimits;

// INVALID_ARGUMENT for no input, ids outside the vocabulary, inputs longer
// than limits.max_tokens or the model's limit, a bad permutation length, or
// structure_positions over limits.max_structure_positions (messages name
// the limit).
absl::StatusOr<diagnostics::DiagnoseOptions> BuildDiagnoseOptions(
    const v1::DiagnoseRequest& request, const runner::HostedModel& model,
    const DiagnoseLimits& limits);

void FillDiagnoseResponse(const diagnostics::DiagnoseReport& report,
                          const runner::HostedModel& model,
                          const diagnostics::DiagnoseOptions& options,
                          v1::DiagnoseResponse* response);

}  // namespace encoder::service

#endif  // ENCODER_SERVER_SERVICE_DIAGNOSE_CONVERT_H_
