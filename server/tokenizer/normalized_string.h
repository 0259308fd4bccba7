// A piece of text under normalization that remembers, for every byte of its
// normalized form, which byte range of the original input it came from, so
// that token offsets point into the text the caller sent.
#ifndef ENCODER_SERVER_TOKENIZER_NORMALIZED_STRING_H_
#define ENCODER_SERVER_TOKENIZER_NORMALIZED_STRING_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "server/tokenizer/unicode.h"

namespace encoder::tokenizer {

// One character of a transformation's output and how it relates to the
// input: 0 replaces the next input character, +1 is inserted, -n replaces the
// next input character and removes the n after it.
struct CharChange {
  char32_t c;
  int change;
};

class NormalizedString {
 public:
  using Span = std::pair<uint32_t, uint32_t>;  // [start, end) bytes

  NormalizedString() = default;
  // `original` starts at byte `shift` of the caller's text.
  NormalizedString(std::string_view original, uint32_t shift);

  const std::string& get() const { return normalized_; }
  bool empty() const { return normalized_.empty(); }

  // Replaces the whole normalized text by `chars`; `initial_removed` leading
  // input characters are dropped first.
  void Transform(const std::vector<CharChange>& chars, size_t initial_removed) {
    TransformRange(0, normalized_.size(), chars, initial_removed);
  }
  // The same on the normalized byte range [start, end) only.
  void TransformRange(size_t start, size_t end,
                      const std::vector<CharChange>& chars,
                      size_t initial_removed);
  // Applies f(char) -> chars to every character (first output replaces the
  // input character, the others are inserted, none removes it).
  // Every output character must be non-empty.
  template <typename F>
  void MapChars(F f);
  // Keeps the characters for which keep(c) is true.
  template <typename F>
  void Filter(F keep);

  // Inserts `prefix` before the first character (nothing when empty); the
  // new characters share the first character's original span.
  void Prepend(std::string_view prefix);

  // The normalized byte range [start, end) as its own string.
  NormalizedString Slice(size_t start, size_t end) const;
  // Original byte range of the normalized byte range [start, end).
  Span OriginalSpan(size_t start, size_t end) const;

  // Per normalized byte: the original span.
  const std::vector<Span>& alignments() const { return alignments_; }

 private:
  std::string normalized_;
  std::vector<Span> alignments_;
};

template <typename F>
void NormalizedString::MapChars(F f) {
  std::vector<CharChange> out;
  out.reserve(normalized_.size());
  std::u32string mapped;
  size_t pos = 0;
  while (pos < normalized_.size()) {
    mapped.clear();
    f(NextCodePoint(normalized_, &pos), &mapped);
    for (size_t k = 0; k < mapped.size(); ++k) {
      out.push_back({mapped[k], k > 0 ? 1 : 0});
    }
  }
  Transform(out, 0);
}

template <typename F>
void NormalizedString::Filter(F keep) {
  std::vector<CharChange> out;
  out.reserve(normalized_.size());
  int removed = 0;
  size_t removed_start = 0;
  bool have_last = false;
  char32_t last = 0;
  size_t pos = 0;
  while (pos < normalized_.size()) {
    const char32_t c = NextCodePoint(normalized_, &pos);
    if (!keep(c)) {
      ++removed;
      continue;
    }
    if (have_last) {
      out.push_back({last, -removed});
    } else {
      removed_start = removed;
    }
    last = c;
    have_last = true;
    removed = 0;
  }
  if (have_last) out.push_back({last, -removed});
  Transform(out, have_last ? removed_start : removed);
}

}  // namespace encoder::tokenizer

#endif  // ENCODER_SERVER_TOKENIZER_NORMALIZED_STRING_H_
