#include "server/tokenizer/regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "absl/strings/str_cat.h"

namespace encoder::tokenizer {
namespace {

pcre2_code* Code(void* p) { return static_cast<pcre2_code*>(p); }

std::string Escape(const std::string& literal) {
  std::string out = "\\Q";
  size_t pos = 0;
  while (true) {
    const size_t e = literal.find("\\E", pos);
    if (e == std::string::npos) break;
    out.append(literal, pos, e - pos).append("\\E\\\\E\\Q");
    pos = e + 2;
  }
  out.append(literal, pos, std::string::npos).append("\\E");
  return out;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Regex>> Regex::Compile(
    const std::string& pattern) {
  int error = 0;
  PCRE2_SIZE error_offset = 0;
  pcre2_code* code =
      pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()),
                    pattern.size(), PCRE2_UTF | PCRE2_UCP | PCRE2_NO_UTF_CHECK,
                    &error, &error_offset, nullptr);
  if (code == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof(message));
    return absl::InvalidArgumentError(
        absl::StrCat("bad regex '", pattern, "' at offset ", error_offset, ": ",
                     reinterpret_cast<const char*>(message)));
  }
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // optional speed-up
  std::unique_ptr<Regex> regex(new Regex());
  regex->code_ = code;
  return regex;
}

absl::StatusOr<std::unique_ptr<Regex>> Regex::Literal(
    const std::string& literal) {
  return Compile(Escape(literal));
}

Regex::~Regex() { pcre2_code_free(Code(code_)); }

absl::StatusOr<std::vector<MatchSpan>> Regex::FindMatches(
    std::string_view text) const {
  std::vector<MatchSpan> spans;
  if (text.empty()) {
    spans.push_back({0, 0, false});
    return spans;
  }
  pcre2_match_data* md =
      pcre2_match_data_create_from_pattern(Code(code_), nullptr);
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t prev = 0;
  size_t pos = 0;
  absl::Status status;
  while (pos <= text.size()) {
    int rc = pcre2_match(Code(code_), subject, text.size(), pos,
                         PCRE2_NO_UTF_CHECK, md, nullptr);
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT) {
      // A very long match (e.g. a huge whitespace run) outgrows the JIT
      // stack; the interpreter keeps its backtracking on the heap.
      rc = pcre2_match(Code(code_), subject, text.size(), pos,
                       PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, md, nullptr);
    }
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(rc, message, sizeof(message));
      status = absl::InvalidArgumentError(absl::StrCat(
          "the tokenizer's pattern cannot split this text at byte ", pos, ": ",
          reinterpret_cast<const char*>(message)));
      break;
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    const size_t start = ov[0];
    const size_t end = ov[1];
    if (start == end) {  // skip empty matches, advance one character
      if (start >= text.size()) break;
      pos = start + 1;
      while (pos < text.size() && (text[pos] & 0xc0) == 0x80) ++pos;
      continue;
    }
    if (start != prev) spans.push_back({prev, start, false});
    spans.push_back({start, end, true});
    prev = pos = end;
  }
  pcre2_match_data_free(md);
  if (!status.ok()) return status;
  if (prev != text.size()) spans.push_back({prev, text.size(), false});
  return spans;
}

}  // namespace encoder::tokenizer
