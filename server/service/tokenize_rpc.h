// The Tokenize and Decode RPCs: proto <-> core::Tokenize / core::Decode
// (server/core/tokenize.h), which check and run them for every front.
#ifndef ENCODER_SERVER_SERVICE_TOKENIZE_RPC_H_
#define ENCODER_SERVER_SERVICE_TOKENIZE_RPC_H_

#include "absl/status/status.h"
#include "encoder/v1/encoder.pb.h"
#include "server/api/served_model.h"
#include "server/core/embed_request.h"

namespace encoder::service {

// core::Tokenize's refusals; texts are named texts[i] and texts_bytes[i].
absl::Status RunTokenize(const v1::TokenizeRequest& request,
                         const api::ModelCatalog& host,
                         const core::ServiceLimits& limits,
                         v1::TokenizeResponse* response);

// core::Decode's refusals; id lists are named inputs[i].
absl::Status RunDecode(const v1::DecodeRequest& request,
                       const api::ModelCatalog& host,
                       const core::ServiceLimits& limits,
                       v1::DecodeResponse* response);

}  // namespace encoder::service

#endif  // ENCODER_SERVER_SERVICE_TOKENIZE_RPC_H_
