// DiagnoseRequest -> the core's query (validated there), and the report ->
// response.
#ifndef ENCODER_SERVER_SERVICE_DIAGNOSE_CONVERT_H_
#define ENCODER_SERVER_SERVICE_DIAGNOSE_CONVERT_H_

#include "absl/status/statusor.h"
#include "encoder/v1/encoder.pb.h"
#include "server/api/diagnose_report.h"
#include "server/api/served_model.h"
#include "server/core/diagnose_request.h"

namespace encoder::service {

// The request's fields, as they are: core::BuildDiagnoseOptions validates
// them.
core::DiagnoseQuery ToDiagnoseQuery(const v1::DiagnoseRequest& request);

void FillDiagnoseResponse(const api::DiagnoseReport& report,
                          const api::ServedModel& model,
                          const api::DiagnoseOptions& options,
                          v1::DiagnoseResponse* response);

}  // namespace encoder::service

#endif  // ENCODER_SERVER_SERVICE_DIAGNOSE_CONVERT_H_
