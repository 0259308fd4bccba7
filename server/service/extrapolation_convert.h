// The extrapolation probe's result -> ExtrapolationProbe (the request's
// grid is validated in the core, server/core/diagnose_request.h).
#ifndef ENCODER_SERVER_SERVICE_EXTRAPOLATION_CONVERT_H_
#define ENCODER_SERVER_SERVICE_EXTRAPOLATION_CONVERT_H_

#include <cstdint>
#include <vector>

#include "encoder/v1/encoder.pb.h"
#include "server/api/diagnose_report.h"
#include "server/api/served_model.h"

namespace encoder::service {

void FillExtrapolation(const api::ExtrapolationResult& result,
                       const api::ExtrapolationOptions& options,
                       int64_t max_tokens, v1::ExtrapolationProbe* out);

}  // namespace encoder::service

#endif  // ENCODER_SERVER_SERVICE_EXTRAPOLATION_CONVERT_H_
