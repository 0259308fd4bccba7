// A served model's report (core/model_report.h) as the JSON of GET /info's
// "models": the fields of gRPC's ModelInfo under the same names (the
// report is the one both fronts render), plus /info's own spellings kept
// for its readers ("scheme", "dimensions", "kernels" as an object). No
// HTTP here.
#ifndef ENCODER_SERVER_HTTP_MODEL_JSON_H_
#define ENCODER_SERVER_HTTP_MODEL_JSON_H_

#include <nlohmann/json.hpp>

#include "server/core/model_report.h"

namespace encoder::http {

nlohmann::json ModelReportJson(const core::ModelReport& report);

}  // namespace encoder::http

#endif  // ENCODER_SERVER_HTTP_MODEL_JSON_H_
