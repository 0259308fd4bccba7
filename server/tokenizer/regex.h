// A compiled PCRE2 pattern (UTF + UCP) that splits text into matches and the
// gaps between them, the way tokenizer.json "Regex" patterns are applied.
#ifndef ENCODER_SERVER_TOKENIZER_REGEX_H_
#define ENCODER_SERVER_TOKENIZER_REGEX_H_

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace encoder::tokenizer {

struct MatchSpan {
  size_t start;
  size_t end;
  bool is_match;
};

class Regex {
 public:
  static absl::StatusOr<std::unique_ptr<Regex>> Compile(
      const std::string& pattern);
  // A regex matching `literal` exactly.
  static absl::StatusOr<std::unique_ptr<Regex>> Literal(
      const std::string& literal);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Every byte of `text` in order, as matches and non-matching gaps; an
  // empty text gives one empty gap. Safe to call from many threads.
  absl::StatusOr<std::vector<MatchSpan>> FindMatches(
      std::string_view text) const;

 private:
  Regex() = default;
  void* code_ = nullptr;  // pcre2_code_8
};

}  // namespace encoder::tokenizer

#endif  // ENCODER_SERVER_TOKENIZER_REGEX_H_
