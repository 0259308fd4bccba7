// Added tokens (tokenizer.json "added_tokens"): found in the text before the
// model runs, leftmost-longest, and never split further.
#ifndef ENCODER_SERVER_TOKENIZER_ADDED_VOCABULARY_H_
#define ENCODER_SERVER_TOKENIZER_ADDED_VOCABULARY_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "server/tokenizer/normalized_string.h"

namespace encoder::tokenizer {

struct AddedToken {
  int64_t id = 0;
  std::string content;
  bool single_word = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = false;
  bool special = false;
};

// A piece of input: either an added token (id set) or text for the model.
struct Piece {
  NormalizedString text;
  std::optional<int64_t> id;
};

class AddedVocabulary {
 public:
  // `normalized_contents` is each token's content after the normalizer
  // (used to match normalized tokens), in the same order as `tokens`.
  AddedVocabulary(std::vector<AddedToken> tokens,
                  std::vector<std::string> normalized_contents);
  AddedVocabulary() = default;

  // Splits every piece without an id on the tokens with normalized ==
  // `normalized`.
  void Split(bool normalized, std::vector<Piece>* pieces) const;

  const AddedToken* Find(int64_t id) const;
  bool IsSpecial(int64_t id) const;
  int64_t max_id() const { return max_id_; }

 private:
  struct Pattern {
    std::string text;
    size_t token;  // index in tokens_
  };
  std::vector<std::pair<size_t, size_t>> FindMatches(
      std::string_view s, bool normalized, std::vector<size_t>* ids) const;

  std::vector<AddedToken> tokens_;
  // Patterns by first byte, per matching mode (0 original, 1 normalized).
  std::vector<Pattern> by_byte_[2][256];
  absl::flat_hash_map<int64_t, size_t> by_id_;
  int64_t max_id_ = -1;
};

}  // namespace encoder::tokenizer

#endif  // ENCODER_SERVER_TOKENIZER_ADDED_VOCABULARY_H_
