// The gRPC front's one conversion for Embed: an EmbedRequest into the
// core's EmbedQuery, and the core's EmbedAnswer into an EmbedResponse.
#ifndef ENCODER_SERVER_SERVICE_EMBED_PROTO_H_
#define ENCODER_SERVER_SERVICE_EMBED_PROTO_H_

#include "absl/status/statusor.h"
#include "encoder/v1/encoder.pb.h"
#include "server/core/embed_request.h"
#include "server/core/text_input.h"

namespace encoder::service {

// Moves the inputs' texts and ids out of `request` (its other fields stay).
// INVALID_ARGUMENT for a pooling value the enum lacks.
absl::StatusOr<core::EmbedQuery> ToEmbedQuery(v1::EmbedRequest* request);

core::TextOptions ToTextOptions(const v1::TextOptions& options);

// The inputs' texts and ids, moved out.
std::vector<core::EmbedInput> MoveInputs(
    google::protobuf::RepeatedPtrField<v1::Input>* inputs);

// An EmbedSparseRequest as the core's EmbedQuery (with `sparse` set),
// moving its inputs out.
core::EmbedQuery ToSparseQuery(v1::EmbedSparseRequest* request);

// Fills `response` with each input's sparse vector.
void FillSparseResponse(const core::EmbedAnswer& answer,
                        v1::EmbedSparseResponse* response);

// Fills `response`, moving the answer's values into it.
void FillEmbedResponse(const core::EmbedAnswer& answer,
                       v1::EmbedResponse* response);

}  // namespace encoder::service

#endif  // ENCODER_SERVER_SERVICE_EMBED_PROTO_H_
