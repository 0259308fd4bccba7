#include "server/tokenizer/normalized_string.h"

#include "server/tokenizer/unicode.h"

namespace encoder::tokenizer {

NormalizedString::NormalizedString(std::string_view original, uint32_t shift)
    : normalized_(original) {
  alignments_.reserve(original.size());
  size_t pos = 0;
  while (pos < original.size()) {
    const size_t len = Utf8Length(static_cast<unsigned char>(original[pos]));
    const Span span{shift + static_cast<uint32_t>(pos),
                    shift + static_cast<uint32_t>(pos + len)};
    for (size_t k = 0; k < len; ++k) alignments_.push_back(span);
    pos += len;
  }
}

// Mirrors the alignment bookkeeping of the Hugging Face tokenizers library:
// an output character takes the span of the input character it replaces,
// an inserted one the span of the byte before it.
void NormalizedString::TransformRange(size_t start, size_t end,
                                      const std::vector<CharChange>& chars,
                                      size_t initial_removed) {
  std::string out = normalized_.substr(0, start);
  std::vector<Span> aligns(alignments_.begin(), alignments_.begin() + start);
  out.reserve(normalized_.size());
  aligns.reserve(alignments_.size());
  size_t offset = start;  // byte position in the old normalized text
  for (size_t k = 0; k < initial_removed && offset < end; ++k) {
    offset += Utf8Length(static_cast<unsigned char>(normalized_[offset]));
  }
  for (const CharChange& cc : chars) {
    Span align{0, 0};
    if (cc.change > 0) {
      if (offset >= 1) align = alignments_[offset - 1];
    } else if (offset < alignments_.size()) {
      align = alignments_[offset];
    }
    if (cc.change <= 0 && offset < end) {
      offset += Utf8Length(static_cast<unsigned char>(normalized_[offset]));
    }
    for (int r = 0; r < -cc.change && offset < end; ++r) {
      offset += Utf8Length(static_cast<unsigned char>(normalized_[offset]));
    }
    const size_t len = Utf8Size(cc.c);
    AppendUtf8(cc.c, &out);
    for (size_t k = 0; k < len; ++k) aligns.push_back(align);
  }
  out.append(normalized_, end, std::string::npos);
  aligns.insert(aligns.end(), alignments_.begin() + end, alignments_.end());
  normalized_ = std::move(out);
  alignments_ = std::move(aligns);
}

void NormalizedString::Prepend(std::string_view prefix) {
  if (normalized_.empty() || prefix.empty()) return;
  size_t pos = 0;
  const char32_t first = NextCodePoint(normalized_, &pos);
  std::vector<CharChange> out;
  int change = 0;
  for (char32_t c : DecodeUtf8(prefix)) {
    out.push_back({c, change});
    change = 1;
  }
  out.push_back({first, 1});
  TransformRange(0, pos, out, 0);
}

NormalizedString NormalizedString::Slice(size_t start, size_t end) const {
  NormalizedString s;
  s.normalized_ = normalized_.substr(start, end - start);
  s.alignments_.assign(alignments_.begin() + start, alignments_.begin() + end);
  return s;
}

NormalizedString::Span NormalizedString::OriginalSpan(size_t start,
                                                      size_t end) const {
  if (start >= end || start >= alignments_.size()) {
    if (start < alignments_.size())
      return {alignments_[start].first, alignments_[start].first};
    if (!alignments_.empty())
      return {alignments_.back().second, alignments_.back().second};
    return {0, 0};
  }
  if (end > alignments_.size()) end = alignments_.size();
  return {alignments_[start].first, alignments_[end - 1].second};
}

}  // namespace encoder::tokenizer
