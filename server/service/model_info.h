// Renders a served model's report (core/model_report.h) as an
// encoder.v1.ModelInfo.
#ifndef ENCODER_SERVER_SERVICE_MODEL_INFO_H_
#define ENCODER_SERVER_SERVICE_MODEL_INFO_H_

#include <string>

#include "encoder/v1/encoder.pb.h"
#include "server/core/model_report.h"

namespace encoder::service {

void FillModelInfo(const core::ModelReport& report, v1::ModelInfo* info);

// A model's dtype as the proto's enum.
v1::DType ToProtoDType(model::Dtype dtype);

}  // namespace encoder::service

#endif  // ENCODER_SERVER_SERVICE_MODEL_INFO_H_
