// Turns an EmbedRequest into validated batcher work, and batcher results
// into an EmbedResponse. Every check that can fail a request happens here,
// before any compute.
#ifndef ENCODER_SERVER_SERVICE_EMBED_REQUEST_H_
#define ENCODER_SERVER_SERVICE_EMBED_REQUEST_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "encoder/v1/encoder.pb.h"
#include "server/runner/embed_types.h"
#include "server/runner/served_model.h"
#include "server/service/unread_responses.h"

namespace encoder::service {

// The defaults of --max-inputs-per-request and --max-send-message-bytes.
inline constexpr int64_t kDefaultMaxInputsPerRequest = 256;
inline constexpr int64_t kDefaultMaxSendMessageBytes = int64_t{64} << 20;

struct ServiceLimits {
  int64_t max_inputs_per_request = kDefaultMaxInputsPerRequest;
  // The server's send limit; responses estimated above it are refused.
  int64_t max_send_message_bytes = kDefaultMaxSendMessageBytes;
  // Responses produced and not yet read, per connection and in total.
  UnreadLimits unread;
};

struct PreparedEmbed {
  const runner::ServedModel* model = nullptr;
  std::vector<runner::EmbedSpec> sequences;
  std::vector<bool> truncated;
  int64_t total_tokens = 0;
  // Pooled values kept per input (EmbedRequest.dimensions); 0: all.
  int64_t dimensions = 0;
};

// NOT_FOUND for an unknown model; INVALID_ARGUMENT for no inputs, an empty
// input, ids outside the vocabulary, bad layer or head indices, an unknown
// pooling value, or an input over the model's length limit without
// truncate, or dimensions outside 1 .. the pooled width; RESOURCE_EXHAUSTED
// (marked too large, see status_util.h) when the response would exceed the
// send limit or an input would not fit the batch memory budget. Messages name
// the input index and the limit. Every sequence comes back priced.
absl::StatusOr<PreparedEmbed> PrepareEmbed(const v1::EmbedRequest& request,
                                           const runner::ModelCatalog& host,
                                           const ServiceLimits& limits);

// RESOURCE_EXHAUSTED when `spec` (priced, see SequenceCost) cannot run
// within the model's batch memory budget, naming the cost and the limit;
// `what` names the input in the message ("inputs[3]").
absl::Status CheckCost(const runner::EmbedSpec& spec,
                       const runner::ServedModel& model,
                       const std::string& what);

// NOT_FOUND's message for a model name no model has: a short quote of the
// name and the names that exist.
std::string UnknownModelMessage(const std::string& requested,
                                const runner::ModelCatalog& host);

// Upper estimate of the serialized response size in bytes.
int64_t EstimateResponseBytes(const PreparedEmbed& prepared);

// Keeps the first `dimensions` values of `pooled` and, when `normalize`,
// scales them to unit L2 norm (left as they are when all zero).
void CutPooled(int64_t dimensions, bool normalize, std::vector<float>* pooled);

// Fills `response` from results in input order.
void FillEmbedResponse(const v1::EmbedRequest& request,
                       const PreparedEmbed& prepared,
                       const std::vector<runner::EmbedResult>& results,
                       double total_ms, v1::EmbedResponse* response);

}  // namespace encoder::service

#endif  // ENCODER_SERVER_SERVICE_EMBED_REQUEST_H_
