#include "server/tokenizer/precompiled.h"

#include <unicode/brkiter.h>
#include <unicode/utext.h>

#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "server/common/status_macros.h"
#include "server/tokenizer/unicode.h"

namespace encoder::tokenizer {
namespace {

// Fields of a double-array unit (the Darts-clone layout SentencePiece uses).
bool HasLeaf(uint32_t u) { return ((u >> 8) & 1) != 0; }
uint32_t Value(uint32_t u) { return u & 0x7fffffffu; }
uint32_t Label(uint32_t u) { return u & 0x800000ffu; }
uint32_t Offset(uint32_t u) { return (u >> 10) << ((u & (1u << 9)) >> 6); }

uint32_t ReadLe32(const unsigned char* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
         (static_cast<uint32_t>(p[2]) << 16) |
         (static_cast<uint32_t>(p[3]) << 24);
}

absl::Status Malformed(const std::string& what) {
  return absl::InvalidArgumentError(
      absl::StrCat("Precompiled normalizer: precompiled_charsmap ", what));
}

}  // namespace

absl::StatusOr<CharsMap> CharsMap::Parse(std::string_view blob) {
  if (blob.size() < 4) return Malformed("is shorter than its 4-byte header");
  const auto* bytes = reinterpret_cast<const unsigned char*>(blob.data());
  const uint32_t trie_bytes = ReadLe32(bytes);
  if (trie_bytes % 4 != 0 || trie_bytes == 0) {
    return Malformed(absl::StrCat("trie size ", trie_bytes,
                                  " is not a positive multiple of 4"));
  }
  if (trie_bytes > blob.size() - 4) {
    return Malformed(absl::StrCat("is truncated: trie of ", trie_bytes,
                                  " bytes, ", blob.size() - 4, " present"));
  }
  CharsMap map;
  map.units_.resize(trie_bytes / 4);
  for (size_t i = 0; i < map.units_.size(); ++i) {
    map.units_[i] = ReadLe32(bytes + 4 + 4 * i);
  }
  map.pool_ = std::string(blob.substr(4 + trie_bytes));
  if (absl::Status s = ValidateUtf8(map.pool_); !s.ok()) {
    return Malformed(absl::StrCat("string pool: ", s.message()));
  }
  RETURN_IF_ERROR(map.Validate());
  return map;
}

// Walks every node reachable from the root (each once, so a cyclic trie
// ends) and checks that each leaf lies in the trie and points at the start
// of a character of the pool.
absl::Status CharsMap::Validate() const {
  const size_t n = units_.size();
  std::vector<bool> seen(n, false);
  std::vector<size_t> stack = {0};
  seen[0] = true;
  while (!stack.empty()) {
    const size_t node = stack.back();
    stack.pop_back();
    const size_t base = node ^ Offset(units_[node]);
    for (uint32_t c = 1; c < 256; ++c) {
      const size_t child = base ^ c;
      if (child >= n || Label(units_[child]) != c) continue;
      if (HasLeaf(units_[child])) {
        const size_t leaf = child ^ Offset(units_[child]);
        if (leaf >= n) {
          return Malformed(absl::StrCat("has a leaf at unit ", leaf,
                                        " past the trie's ", n, " units"));
        }
        const uint32_t value = Value(units_[leaf]);
        if (value > pool_.size()) {
          return Malformed(absl::StrCat("has an offset ", value,
                                        " past the string pool of ",
                                        pool_.size(), " bytes"));
        }
        if (value < pool_.size() &&
            (static_cast<unsigned char>(pool_[value]) & 0xc0) == 0x80) {
          return Malformed(absl::StrCat("has an offset ", value,
                                        " inside a UTF-8 character"));
        }
      }
      if (!seen[child]) {
        seen[child] = true;
        stack.push_back(child);
      }
    }
  }
  return absl::OkStatus();
}

std::optional<std::string_view> CharsMap::Lookup(std::string_view chunk) const {
  size_t pos = Offset(units_[0]);
  for (const char ch : chunk) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == 0) break;
    pos ^= c;
    if (pos >= units_.size() || Label(units_[pos]) != c) break;
    const uint32_t unit = units_[pos];
    pos ^= Offset(unit);
    if (HasLeaf(unit) && pos < units_.size()) {
      const size_t start = Value(units_[pos]);
      if (start > pool_.size()) return std::nullopt;  // rejected by Parse
      const size_t end = pool_.find('\0', start);
      return std::string_view(pool_).substr(
          start, (end == std::string::npos ? pool_.size() : end) - start);
    }
  }
  return std::nullopt;
}

namespace {

// Appends `replacement` for `old_chars` input characters. Extra output
// characters count as insertions; missing ones are removals charged to the
// last output character so far (as the reference library does, even when
// that character belongs to an earlier grapheme).
void Replace(size_t old_chars, std::string_view replacement,
             std::vector<CharChange>* out) {
  const std::u32string chars = DecodeUtf8(replacement);
  for (char32_t c : chars) out->push_back({c, 0});
  const int diff = static_cast<int>(chars.size()) - static_cast<int>(old_chars);
  if (diff > 0) {
    for (int k = 0; k < diff; ++k) (*out)[out->size() - 1 - k].change = 1;
  } else if (diff < 0 && !out->empty()) {
    out->back().change += diff;
  }
}

size_t CountChars(std::string_view s) {
  size_t n = 0;
  for (const char ch : s) n += (static_cast<unsigned char>(ch) & 0xc0) != 0x80;
  return n;
}

// Calls f(start, end) for each extended grapheme cluster of valid UTF-8.
template <typename F>
absl::Status ForEachGrapheme(const std::string& text, F f) {
  thread_local std::unique_ptr<icu::BreakIterator> iter;
  UErrorCode status = U_ZERO_ERROR;
  if (iter == nullptr) {
    iter.reset(icu::BreakIterator::createCharacterInstance(
        icu::Locale::getRoot(), status));
    if (U_FAILURE(status)) {
      iter.reset();
      return absl::InternalError(
          absl::StrCat("ICU grapheme break iterator: ", u_errorName(status)));
    }
  }
  UText* ut = utext_openUTF8(nullptr, text.data(),
                             static_cast<int64_t>(text.size()), &status);
  iter->setText(ut, status);
  if (U_FAILURE(status)) {
    utext_close(ut);
    return absl::InternalError(
        absl::StrCat("ICU grapheme break iterator: ", u_errorName(status)));
  }
  int32_t start = iter->first();
  for (int32_t end = iter->next(); end != icu::BreakIterator::DONE;
       start = end, end = iter->next()) {
    f(static_cast<size_t>(start), static_cast<size_t>(end));
  }
  // Detach the iterator from the text before the UText goes away.
  utext_close(ut);
  iter->setText(icu::UnicodeString());
  return absl::OkStatus();
}

class PrecompiledNormalizer : public Normalizer {
 public:
  explicit PrecompiledNormalizer(CharsMap map) : map_(std::move(map)) {}

  absl::Status Normalize(NormalizedString* s) const override {
    const std::string& text = s->get();
    if (text.empty()) return absl::OkStatus();
    std::vector<CharChange> out;
    out.reserve(text.size());
    bool modified = false;
    absl::Status st = ForEachGrapheme(text, [&](size_t start, size_t end) {
      const std::string_view grapheme(text.data() + start, end - start);
      if (grapheme.size() < 6) {
        if (auto norm = map_.Lookup(grapheme)) {
          modified = true;
          Replace(CountChars(grapheme), *norm, &out);
          return;
        }
      }
      size_t pos = 0;
      while (pos < grapheme.size()) {
        const size_t begin = pos;
        const char32_t c = NextCodePoint(grapheme, &pos);
        if (auto norm = map_.Lookup(grapheme.substr(begin, pos - begin))) {
          modified = true;
          Replace(1, *norm, &out);
        } else {
          out.push_back({c, 0});
        }
      }
    });
    if (!st.ok()) return st;
    if (modified) s->Transform(out, 0);
    return absl::OkStatus();
  }

 private:
  CharsMap map_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Normalizer>> MakePrecompiledNormalizer(
    std::string_view base64_charsmap) {
  std::string blob;
  if (!absl::Base64Unescape(
          absl::string_view(base64_charsmap.data(), base64_charsmap.size()),
          &blob)) {
    return absl::InvalidArgumentError(
        "Precompiled normalizer: precompiled_charsmap is not valid base64");
  }
  ASSIGN_OR_RETURN(auto map, CharsMap::Parse(blob));
  return std::unique_ptr<Normalizer>(
      std::make_unique<PrecompiledNormalizer>(std::move(map)));
}

}  // namespace encoder::tokenizer
