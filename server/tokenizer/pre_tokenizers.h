// tokenizer.json pre-tokenizers: split normalized text into words (and for
// ByteLevel / Metaspace, rewrite them) before the model sees them.
#ifndef ENCODER_SERVER_TOKENIZER_PRE_TOKENIZERS_H_
#define ENCODER_SERVER_TOKENIZER_PRE_TOKENIZERS_H_

#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json_fwd.hpp"
#include "server/tokenizer/normalized_string.h"
#include "server/tokenizer/regex.h"

namespace encoder::tokenizer {

enum class SplitBehavior {
  kRemoved,
  kIsolated,
  kMergedWithPrevious,
  kMergedWithNext,
  kContiguous
};

// Splits `s` at the given matches; empty pieces are dropped.
std::vector<NormalizedString> SplitByMatches(const NormalizedString& s,
                                             std::vector<MatchSpan> spans,
                                             SplitBehavior behavior);

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // Replaces `pieces` by their sub-pieces.
  virtual absl::Status PreTokenize(
      std::vector<NormalizedString>* pieces) const = 0;
};

absl::StatusOr<std::unique_ptr<PreTokenizer>> MakePreTokenizer(
    const nlohmann::json& j);

// The 256 printable characters byte-level BPE uses for bytes (GPT-2).
const std::u32string& ByteToChar();

}  // namespace encoder::tokenizer

#endif  // ENCODER_SERVER_TOKENIZER_PRE_TOKENIZERS_H_
