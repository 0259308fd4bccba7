// Describes a hosted model as an encoder.v1.ModelInfo.
#ifndef ENCODER_SERVER_SERVICE_MODEL_INFO_H_
#define ENCODER_SERVER_SERVICE_MODEL_INFO_H_

#include "encoder/v1/encoder.pb.h"
#include "server/runner/model_host.h"

namespace encoder::service {

void FillModelInfo(const runner::HostedModel& model, bool is_default,
                   v1::ModelInfo* info);

v1::DType ToProtoDType(at::ScalarType dtype);

}  // namespace encoder::service

#endif  // ENCODER_SERVER_SERVICE_MODEL_INFO_H_
