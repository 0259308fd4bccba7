// tokenizer.json post-processors: add special tokens around an encoded
// sequence or pair of sequences (and for byte-level ones, trim spaces from
// offsets).
#ifndef ENCODER_SERVER_TOKENIZER_POST_PROCESSORS_H_
#define ENCODER_SERVER_TOKENIZER_POST_PROCESSORS_H_

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json_fwd.hpp"
#include "server/tokenizer/tokenizer.h"

namespace encoder::tokenizer {

class PostProcessor {
 public:
  virtual ~PostProcessor() = default;
  // Tokens Process adds to one sequence (`pair`: to two) when add_special
  // is true.
  virtual size_t AddedTokens(bool pair) const = 0;
  // `parts` holds one encoding per sequence (ids, tokens, byte offsets,
  // type ids, mask and sequence ids filled; type and sequence id i for the
  // i-th), or the parts an earlier processor of a Sequence left. Process
  // rewrites them in place; the caller joins them in order.
  virtual void Process(bool add_special,
                       std::vector<Encoding>* parts) const = 0;
};

absl::StatusOr<std::unique_ptr<PostProcessor>> MakePostProcessor(
    const nlohmann::json& j);

}  // namespace encoder::tokenizer

#endif  // ENCODER_SERVER_TOKENIZER_POST_PROCESSORS_H_
