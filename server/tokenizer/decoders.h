// tokenizer.json decoders: token strings back to text.
#ifndef ENCODER_SERVER_TOKENIZER_DECODERS_H_
#define ENCODER_SERVER_TOKENIZER_DECODERS_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json_fwd.hpp"

namespace encoder::tokenizer {

class Decoder {
 public:
  virtual ~Decoder() = default;
  // Rewrites the token strings; the text is their concatenation.
  virtual absl::Status DecodeChain(std::vector<std::string>* tokens) const = 0;
};

absl::StatusOr<std::unique_ptr<Decoder>> MakeDecoder(const nlohmann::json& j);

// Bytes to text, each invalid sequence replaced by U+FFFD (like Rust's
// String::from_utf8_lossy).
std::string Utf8Lossy(std::string_view bytes);

}  // namespace encoder::tokenizer

#endif  // ENCODER_SERVER_TOKENIZER_DECODERS_H_
