// What every front says about the served models (gRPC ListModels, HTTP
// /info, /v1/models, TEI's /info fields): each model's description as
// loaded and what the server decides for it under its limits (the
// long-input default and why, the extrapolation limit, the tasks). The
// core computes it once; the fronts only render it, so they cannot
// disagree.
#ifndef ENCODER_SERVER_CORE_MODEL_REPORT_H_
#define ENCODER_SERVER_CORE_MODEL_REPORT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "server/api/served_model.h"
#include "server/core/embed_request.h"
#include "server/core/inference.h"
#include "server/core/long_input.h"

namespace encoder::core {

struct ModelReport {
  const api::ServedModel* model = nullptr;
  // model->description(): the configuration, scheme, weights, kernels and
  // batching as loaded.
  const api::ModelDescription* description = nullptr;
  bool is_default = false;
  int64_t max_input_tokens = 0;  // the model's length limit
  // The longest input run whole: the extrapolation probe's and the
  // extrapolate policy's (MaxExtrapolationTokens).
  int64_t max_extrapolation_tokens = 0;
  // What an input past max_input_tokens gets when its request names no
  // policy (auto resolved), and why.
  LongInputDefault long_input;
  // The configured policy is truncate (TEI's auto_truncate).
  bool auto_truncate = false;
  std::vector<std::string> tasks;
  bool accepts_text = false;  // a tokenizer: text inputs, not ids only
  // The CPU serving it: its model name and the features that decide
  // kernel speed (model::CpuFeatures::Names).
  std::string cpu_model;
  std::vector<std::string> cpu_features;
};

// Every served model, in repository order.
std::vector<ModelReport> DescribeModels(const api::ModelCatalog& host,
                                        const ServiceLimits& limits,
                                        const DiagnoseLimits& diagnose);

}  // namespace encoder::core

#endif  // ENCODER_SERVER_CORE_MODEL_REPORT_H_
