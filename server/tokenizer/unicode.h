// UTF-8 decoding and the Unicode character classes the tokenizer pipeline
// needs, answered by ICU (no hand-written tables).
#ifndef ENCODER_SERVER_TOKENIZER_UNICODE_H_
#define ENCODER_SERVER_TOKENIZER_UNICODE_H_

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"

namespace encoder::tokenizer {

// OK, or InvalidArgument naming the byte offset of the first invalid byte.
absl::Status ValidateUtf8(std::string_view text);

// Decodes the code point starting at text[*pos] (valid UTF-8 assumed) and
// advances *pos past it.
char32_t NextCodePoint(std::string_view text, size_t* pos);
// Number of bytes of the code point whose first byte is `lead`.
size_t Utf8Length(unsigned char lead);
void AppendUtf8(char32_t c, std::string* out);
size_t Utf8Size(char32_t c);
std::u32string DecodeUtf8(std::string_view text);

// Rust's char::is_whitespace (the White_Space property).
bool IsWhitespace(char32_t c);
// Control, format, private-use (and surrogate) categories: Cc, Cf, Co, Cs.
// Unassigned code points (Cn) are not included, as in the reference
// library's BERT normalizer.
bool IsOther(char32_t c);
// Any P* category.
bool IsPunctuation(char32_t c);
// Mn (nonspacing mark).
bool IsMarkNonspacing(char32_t c);
// Any M* category (nonspacing, spacing and enclosing marks).
bool IsMark(char32_t c);
// L* / N* categories.
bool IsAlphabetic(char32_t c);
bool IsNumeric(char32_t c);
// Unicode decimal digit (Nd), as Rust's char::is_numeric is N*.
bool IsDigit(char32_t c);
// Full, context-free lowercase mapping of one character (may be several).
std::u32string ToLowerFull(char32_t c);
// Canonical combining class.
int CombiningClass(char32_t c);

}  // namespace encoder::tokenizer

#endif  // ENCODER_SERVER_TOKENIZER_UNICODE_H_
