// The SentencePiece character map ("Precompiled" normalizer of
// tokenizer.json): a double-array trie over input bytes whose values are
// offsets into a pool of NUL-terminated replacement strings.
#ifndef ENCODER_SERVER_TOKENIZER_PRECOMPILED_H_
#define ENCODER_SERVER_TOKENIZER_PRECOMPILED_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "server/tokenizer/normalizers.h"

namespace encoder::tokenizer {

class CharsMap {
 public:
  // Parses the binary map: a little-endian uint32 trie size in bytes, the
  // trie (little-endian uint32 units), then the string pool. Every entry the
  // trie can reach is checked here, so lookups never leave the buffers; a
  // malformed map is InvalidArgument naming the problem.
  static absl::StatusOr<CharsMap> Parse(std::string_view blob);

  // The replacement for the shortest key that is a prefix of `chunk` (the
  // reference library's rule), or nullopt when no key matches.
  std::optional<std::string_view> Lookup(std::string_view chunk) const;

  size_t trie_units() const { return units_.size(); }
  size_t pool_bytes() const { return pool_.size(); }

 private:
  absl::Status Validate() const;

  std::vector<uint32_t> units_;
  std::string pool_;
};

// The Precompiled normalizer: the map applied to each extended grapheme
// cluster as a whole when it is shorter than 6 bytes and a key matches it,
// otherwise to each of its characters, with the reference library's
// alignment rules.
absl::StatusOr<std::unique_ptr<Normalizer>> MakePrecompiledNormalizer(
    std::string_view base64_charsmap);

}  // namespace encoder::tokenizer

#endif  // ENCODER_SERVER_TOKENIZER_PRECOMPILED_H_
