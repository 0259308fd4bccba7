// The extrapolation probe's result -> ExtrapolationProbe (the request's
// grid is validated in the core, server/core/diagnose_request.h).
#ifndef ENCODER_SERVER_SERVICE_EXTRAPOLATION_CONVERT_H_
#define ENCODER_SERVER_SERVICE_EXTRAPOLATION_CONVERT_H_

#include <cstdint>
#include <vector>

#include "encoder/v1/encoder.pb.h"
#include "server/diagnostics/report.h"
#include "server/runner/served_model.h"

namespace encoder::service {

void FillExtrapolation(const diagnostics::ExtrapolationResult& result,
                       const diagnostics::ExtrapolationOptions& options,
                       int64_t max_tokens, v1::ExtrapolationProbe* out);

}  // namespace encoder::service

#endif  // ENCODER_SERVER_SERVICE_EXTRAPOLATION_CONVERT_H_
