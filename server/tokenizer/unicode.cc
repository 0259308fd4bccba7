#include "server/tokenizer/unicode.h"

#include <unicode/uchar.h>
#include <unicode/ustring.h>
#include <unicode/utf16.h>

#include "absl/strings/str_cat.h"

namespace encoder::tokenizer {

absl::Status ValidateUtf8(std::string_view text) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    const unsigned char c = s[i];
    size_t len = 0;
    char32_t min = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xe0) == 0xc0) {
      len = 2;
      min = 0x80;
    } else if ((c & 0xf0) == 0xe0) {
      len = 3;
      min = 0x800;
    } else if ((c & 0xf8) == 0xf0) {
      len = 4;
      min = 0x10000;
    }
    bool ok = len > 0 && i + len <= n;
    char32_t cp = ok ? (c & (0x7f >> len)) : 0;
    for (size_t k = 1; ok && k < len; ++k) {
      ok = (s[i + k] & 0xc0) == 0x80;
      cp = (cp << 6) | (s[i + k] & 0x3f);
    }
    ok = ok && cp >= min && cp <= 0x10ffff && (cp < 0xd800 || cp > 0xdfff);
    if (!ok) {
      return absl::InvalidArgumentError(
          absl::StrCat("text is not valid UTF-8: invalid byte 0x",
                       absl::Hex(c, absl::kZeroPad2), " at byte offset ", i));
    }
    i += len;
  }
  return absl::OkStatus();
}

size_t Utf8Length(unsigned char lead) {
  if (lead < 0x80) return 1;
  if ((lead & 0xe0) == 0xc0) return 2;
  if ((lead & 0xf0) == 0xe0) return 3;
  return 4;
}

char32_t NextCodePoint(std::string_view text, size_t* pos) {
  const auto lead = static_cast<unsigned char>(text[*pos]);
  const size_t len = Utf8Length(lead);
  char32_t cp = len == 1 ? lead : (lead & (0x7f >> len));
  for (size_t k = 1; k < len; ++k) {
    cp = (cp << 6) | (static_cast<unsigned char>(text[*pos + k]) & 0x3f);
  }
  *pos += len;
  return cp;
}

size_t Utf8Size(char32_t c) {
  if (c < 0x80) return 1;
  if (c < 0x800) return 2;
  if (c < 0x10000) return 3;
  return 4;
}

void AppendUtf8(char32_t c, std::string* out) {
  if (c < 0x80) {
    out->push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out->push_back(static_cast<char>(0xc0 | (c >> 6)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3f)));
  } else if (c < 0x10000) {
    out->push_back(static_cast<char>(0xe0 | (c >> 12)));
    out->push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3f)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3f)));
  } else {
    out->push_back(static_cast<char>(0xf0 | (c >> 18)));
    out->push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3f)));
    out->push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3f)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3f)));
  }
}

std::u32string DecodeUtf8(std::string_view text) {
  std::u32string out;
  out.reserve(text.size());
  size_t pos = 0;
  while (pos < text.size()) out.push_back(NextCodePoint(text, &pos));
  return out;
}

bool IsWhitespace(char32_t c) {
  return u_hasBinaryProperty(static_cast<UChar32>(c), UCHAR_WHITE_SPACE);
}

bool IsOther(char32_t c) {
  const uint32_t mask = U_MASK(u_charType(static_cast<UChar32>(c)));
  return (mask & (U_GC_CC_MASK | U_GC_CF_MASK | U_GC_CO_MASK | U_GC_CS_MASK)) !=
         0;
}

bool IsPunctuation(char32_t c) {
  return (U_MASK(u_charType(static_cast<UChar32>(c))) & U_GC_P_MASK) != 0;
}

bool IsMarkNonspacing(char32_t c) {
  return u_charType(static_cast<UChar32>(c)) == U_NON_SPACING_MARK;
}

bool IsMark(char32_t c) {
  return (U_MASK(u_charType(static_cast<UChar32>(c))) & U_GC_M_MASK) != 0;
}

bool IsAlphabetic(char32_t c) {
  return u_hasBinaryProperty(static_cast<UChar32>(c), UCHAR_ALPHABETIC);
}

bool IsNumeric(char32_t c) {
  return (U_MASK(u_charType(static_cast<UChar32>(c))) & U_GC_N_MASK) != 0;
}

bool IsDigit(char32_t c) {
  return u_charType(static_cast<UChar32>(c)) == U_DECIMAL_DIGIT_NUMBER;
}

std::u32string ToLowerFull(char32_t c) {
  if (c < 0x80) {
    return std::u32string(1, (c >= 'A' && c <= 'Z') ? c + 32 : c);
  }
  UChar src[2];
  int32_t src_len = 0;
  U16_APPEND_UNSAFE(src, src_len, static_cast<UChar32>(c));
  UChar dst[16];
  UErrorCode status = U_ZERO_ERROR;
  const int32_t n = u_strToLower(dst, 16, src, src_len, "", &status);
  if (U_FAILURE(status)) return std::u32string(1, c);
  std::u32string out;
  for (int32_t i = 0; i < n;) {
    UChar32 cp;
    U16_NEXT(dst, i, n, cp);
    out.push_back(static_cast<char32_t>(cp));
  }
  return out;
}

int CombiningClass(char32_t c) {
  return u_getCombiningClass(static_cast<UChar32>(c));
}

}  // namespace encoder::tokenizer
