// NFD/NFKD/NFC/NFKC as per-character changes, so offsets survive: each input
// character is decomposed on its own by ICU, combining marks are put in
// canonical order, and composition pairs are merged with ICU's composePair.
#include <unicode/normalizer2.h>

#include <algorithm>

#include "server/tokenizer/normalizers.h"
#include "server/tokenizer/unicode.h"

namespace encoder::tokenizer {
namespace {

const icu::Normalizer2* Instance(bool compat) {
  UErrorCode status = U_ZERO_ERROR;
  return compat ? icu::Normalizer2::getNFKDInstance(status)
                : icu::Normalizer2::getNFDInstance(status);
}

// Decomposition of every character, marks reordered by combining class.
std::vector<CharChange> Decompose(const std::string& text, bool compat) {
  const icu::Normalizer2* nfd = Instance(compat);
  std::vector<CharChange> out;
  out.reserve(text.size());
  size_t segment = 0;  // first index not yet reordered
  auto reorder = [&out, &segment](size_t end) {
    std::stable_sort(out.begin() + segment, out.begin() + end,
                     [](const CharChange& a, const CharChange& b) {
                       return CombiningClass(a.c) < CombiningClass(b.c);
                     });
  };
  size_t pos = 0;
  while (pos < text.size()) {
    const char32_t c = NextCodePoint(text, &pos);
    icu::UnicodeString decomposed;
    UErrorCode status = U_ZERO_ERROR;
    if (c < 0x80) {
      decomposed = static_cast<UChar32>(c);
    } else {
      decomposed =
          nfd->normalize(icu::UnicodeString(static_cast<UChar32>(c)), status);
    }
    bool first = true;
    for (int32_t i = 0; i < decomposed.length();) {
      const UChar32 d = decomposed.char32At(i);
      i += U16_LENGTH(d);
      if (CombiningClass(d) == 0) {
        reorder(out.size());
        segment = out.size();
      }
      out.push_back({static_cast<char32_t>(d), first ? 0 : 1});
      first = false;
    }
  }
  reorder(out.size());
  return out;
}

// Canonical composition of a decomposed sequence: a mark that composes with
// the last starter is folded into it (one fewer output character).
std::vector<CharChange> Compose(const std::vector<CharChange>& in) {
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2* nfc = icu::Normalizer2::getNFCInstance(status);
  std::vector<CharChange> out;
  out.reserve(in.size());
  size_t starter = SIZE_MAX;  // index in out of the last starter
  int last_class = -1;
  for (const CharChange& cc : in) {
    const int cls = CombiningClass(cc.c);
    if (starter != SIZE_MAX &&
        (last_class < cls || (last_class == 0 && out.size() == starter + 1))) {
      const UChar32 composed = nfc->composePair(
          static_cast<UChar32>(out[starter].c), static_cast<UChar32>(cc.c));
      if (composed >= 0) {
        out[starter].c = static_cast<char32_t>(composed);
        out[starter].change += cc.change - 1;
        continue;
      }
    }
    if (cls == 0) {
      starter = out.size();
      last_class = 0;
    } else {
      last_class = cls;
    }
    out.push_back(cc);
  }
  return out;
}

}  // namespace

void NormalizeUnicode(UnicodeForm form, NormalizedString* s) {
  const bool compat = form == UnicodeForm::kNfkd || form == UnicodeForm::kNfkc;
  std::vector<CharChange> chars = Decompose(s->get(), compat);
  if (form == UnicodeForm::kNfc || form == UnicodeForm::kNfkc) {
    chars = Compose(chars);
  }
  s->Transform(chars, 0);
}

}  // namespace encoder::tokenizer
