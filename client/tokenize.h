// The tokenize and decode subcommands: the model's tokenizer through the
// Tokenize / Decode RPCs; JSON on stdout, exit codes as in errors.h.
#ifndef ENCODER_CLIENT_TOKENIZE_H_
#define ENCODER_CLIENT_TOKENIZE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "client/connection.h"
#include "encoder/v1/encoder.pb.h"

namespace encoder_client {

struct TokenizeOptions {
  std::string model;
  std::vector<std::string> texts;
  bool no_special_tokens = false;
  bool truncate = false;
  int32_t max_length = 0;                 // 0: the model's limit
  std::string truncation_side = "right";  // "right" or "left"
};

encoder::v1::TokenizeRequest BuildTokenizeRequest(
    const TokenizeOptions& options);

int RunTokenize(const ConnectionOptions& connection,
                const TokenizeOptions& options);

struct DecodeOptions {
  std::string model;
  std::vector<int64_t> ids;
  bool skip_special_tokens = false;
};

int RunDecode(const ConnectionOptions& connection,
              const DecodeOptions& options);

}  // namespace encoder_client

#endif  // ENCODER_CLIENT_TOKENIZE_H_
