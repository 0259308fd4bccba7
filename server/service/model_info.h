// Renders a served model's report (core/model_report.h) as an
// encoder.v1.ModelInfo.
#ifndef ENCODER_SERVER_SERVICE_MODEL_INFO_H_
#define ENCODER_SERVER_SERVICE_MODEL_INFO_H_

#include <string>

#include "encoder/v1/encoder.pb.h"
#include "server/core/model_report.h"

namespace encoder::service {

void FillModelInfo(const core::ModelReport& report, v1::ModelInfo* info);

// A dtype name as ModelDescription spells it ("float32", ...).
v1::DType ToProtoDType(const std::string& dtype);

}  // namespace encoder::service

#endif  // ENCODER_SERVER_SERVICE_MODEL_INFO_H_
