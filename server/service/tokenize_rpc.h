// The Tokenize and Decode RPCs: the model's tokenizer, no forward pass.
#ifndef ENCODER_SERVER_SERVICE_TOKENIZE_RPC_H_
#define ENCODER_SERVER_SERVICE_TOKENIZE_RPC_H_

#include "absl/status/status.h"
#include "encoder/v1/encoder.pb.h"
#include "server/runner/served_model.h"

namespace encoder::service {

struct TokenizeLimits {
  int64_t max_texts_per_request = 1024;
};

// NOT_FOUND for an unknown model; INVALID_ARGUMENT for no texts, too many,
// invalid UTF-8 (naming the text and the byte offset), or a negative
// max_length.
absl::Status RunTokenize(const v1::TokenizeRequest& request,
                         const runner::ModelCatalog& host,
                         const TokenizeLimits& limits,
                         v1::TokenizeResponse* response);

// NOT_FOUND for an unknown model; INVALID_ARGUMENT for no inputs or an id
// outside the tokenizer's vocabulary (naming the input).
absl::Status RunDecode(const v1::DecodeRequest& request,
                       const runner::ModelCatalog& host,
                       const TokenizeLimits& limits,
                       v1::DecodeResponse* response);

}  // namespace encoder::service

#endif  // ENCODER_SERVER_SERVICE_TOKENIZE_RPC_H_
