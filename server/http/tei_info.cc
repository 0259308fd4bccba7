#include "server/http/tei_info.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace encoder::http {

using nlohmann::json;

namespace {

// TEI's pooling names where they exist, ours otherwise.
std::string TeiPooling(model::Pooling pooling) {
  switch (pooling) {
    case model::Pooling::kFirst:
      return "cls";
    case model::Pooling::kLastToken:
      return "last_token";
    default:
      return model::PoolingName(pooling);
  }
}

}  // namespace

json TeiInfoFields(const core::ModelReport& report,
                   const core::ServiceLimits& limits, int io_threads) {
  const api::ModelDescription& d = *report.description;
  json model_type;
  if (!d.head.labels.empty()) {
    json id2label = json::object(), label2id = json::object();
    for (size_t i = 0; i < d.head.labels.size(); ++i) {
      id2label[absl::StrCat(i)] = d.head.labels[i];
      label2id[d.head.labels[i]] = i;
    }
    model_type[d.head.labels.size() == 1 ? "reranker" : "classifier"] = {
        {"id2label", id2label}, {"label2id", label2id}};
  } else {
    model_type["embedding"] = {{"pooling", TeiPooling(d.config.pooling)}};
  }
  return {
      {"model_id", d.name},
      {"served_model_name", d.name},
      {"model_dtype", model::DtypeName(d.dtype)},
      {"model_type", model_type},
      {"max_concurrent_requests", d.batching.max_queued_sequences},
      {"max_input_length", report.max_input_tokens},
      {"max_batch_tokens", d.batching.max_batch_tokens},
      {"max_batch_requests", d.batching.max_batch_sequences},
      {"max_client_batch_size", limits.max_inputs_per_request},
      {"auto_truncate", report.auto_truncate},
      {"tokenization_workers", io_threads},
  };
}

}  // namespace encoder::http
