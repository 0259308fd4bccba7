#include "server/tokenizer/added_vocabulary.h"

#include <algorithm>

#include "server/tokenizer/unicode.h"

namespace encoder::tokenizer {
namespace {

bool IsWordChar(char32_t c) {
  return c == '_' || IsAlphabetic(c) || IsNumeric(c);
}

bool EndsWithWord(std::string_view s) {
  if (s.empty()) return false;
  size_t pos = s.size() - 1;
  while (pos > 0 && (s[pos] & 0xc0) == 0x80) --pos;
  return IsWordChar(NextCodePoint(s, &pos));
}

bool StartsWithWord(std::string_view s) {
  if (s.empty()) return false;
  size_t pos = 0;
  return IsWordChar(NextCodePoint(s, &pos));
}

}  // namespace

AddedVocabulary::AddedVocabulary(std::vector<AddedToken> tokens,
                                 std::vector<std::string> normalized_contents)
    : tokens_(std::move(tokens)) {
  for (size_t i = 0; i < tokens_.size(); ++i) {
    const AddedToken& t = tokens_[i];
    by_id_[t.id] = i;
    max_id_ = std::max(max_id_, t.id);
    const std::string& text = t.normalized ? normalized_contents[i] : t.content;
    if (text.empty()) continue;
    by_byte_[t.normalized][static_cast<unsigned char>(text[0])].push_back(
        {text, i});
  }
  for (auto& mode : by_byte_) {
    for (auto& list : mode) {
      // Longest first, so the first hit at a position is the longest.
      std::stable_sort(list.begin(), list.end(),
                       [](const Pattern& a, const Pattern& b) {
                         return a.text.size() > b.text.size();
                       });
    }
  }
}

std::vector<std::pair<size_t, size_t>> AddedVocabulary::FindMatches(
    std::string_view s, bool normalized, std::vector<size_t>* ids) const {
  std::vector<std::pair<size_t, size_t>> spans;
  size_t start_offset = 0;
  size_t pos = 0;
  while (pos < s.size()) {
    const Pattern* hit = nullptr;
    for (const Pattern& p :
         by_byte_[normalized][static_cast<unsigned char>(s[pos])]) {
      if (s.compare(pos, p.text.size(), p.text) == 0) {
        hit = &p;
        break;
      }
    }
    if (hit == nullptr) {
      ++pos;
      continue;
    }
    size_t start = pos, stop = pos + hit->text.size();
    pos = stop;
    const AddedToken& t = tokens_[hit->token];
    if (t.single_word &&
        (EndsWithWord(s.substr(0, start)) || StartsWithWord(s.substr(stop)))) {
      continue;
    }
    if (t.lstrip) {
      size_t b = start;
      while (b > 0) {
        size_t p = b - 1;
        while (p > 0 && (s[p] & 0xc0) == 0x80) --p;
        size_t q = p;
        if (!IsWhitespace(NextCodePoint(s, &q))) break;
        b = p;
      }
      start = std::max(b, start_offset);
    }
    if (t.rstrip) {
      while (stop < s.size()) {
        size_t q = stop;
        if (!IsWhitespace(NextCodePoint(s, &q))) break;
        stop = q;
      }
    }
    if (start_offset < start) {
      spans.push_back({start_offset, start});
      ids->push_back(SIZE_MAX);
    }
    spans.push_back({start, stop});
    ids->push_back(hit->token);
    start_offset = stop;
  }
  if (start_offset < s.size()) {
    spans.push_back({start_offset, s.size()});
    ids->push_back(SIZE_MAX);
  }
  return spans;
}

void AddedVocabulary::Split(bool normalized, std::vector<Piece>* pieces) const {
  bool any = false;
  for (const auto& list : by_byte_[normalized]) any = any || !list.empty();
  if (!any) return;
  std::vector<Piece> out;
  out.reserve(pieces->size());
  std::vector<size_t> which;
  for (Piece& piece : *pieces) {
    if (piece.id) {
      out.push_back(std::move(piece));
      continue;
    }
    which.clear();
    const auto spans = FindMatches(piece.text.get(), normalized, &which);
    for (size_t k = 0; k < spans.size(); ++k) {
      Piece p{piece.text.Slice(spans[k].first, spans[k].second), std::nullopt};
      if (which[k] != SIZE_MAX) p.id = tokens_[which[k]].id;
      out.push_back(std::move(p));
    }
  }
  *pieces = std::move(out);
}

const AddedToken* AddedVocabulary::Find(int64_t id) const {
  auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : &tokens_[it->second];
}

bool AddedVocabulary::IsSpecial(int64_t id) const {
  const AddedToken* t = Find(id);
  return t != nullptr && t->special;
}

}  // namespace encoder::tokenizer
