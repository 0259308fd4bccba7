// tokenizer.json post-processors: add special tokens around an encoded
// sequence (and for byte-level ones, trim spaces from offsets).
#ifndef ENCODER_SERVER_TOKENIZER_POST_PROCESSORS_H_
#define ENCODER_SERVER_TOKENIZER_POST_PROCESSORS_H_

#include <memory>

#include "absl/status/statusor.h"
#include "nlohmann/json_fwd.hpp"
#include "server/tokenizer/tokenizer.h"

namespace encoder::tokenizer {

class PostProcessor {
 public:
  virtual ~PostProcessor() = default;
  // Tokens Process adds to one sequence when add_special is true.
  virtual size_t AddedTokens() const = 0;
  // `e` has ids, tokens, byte offsets, type ids and mask filled.
  virtual void Process(bool add_special, Encoding* e) const = 0;
};

absl::StatusOr<std::unique_ptr<PostProcessor>> MakePostProcessor(
    const nlohmann::json& j);

}  // namespace encoder::tokenizer

#endif  // ENCODER_SERVER_TOKENIZER_POST_PROCESSORS_H_
