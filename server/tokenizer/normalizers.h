// tokenizer.json normalizers: each rewrites a NormalizedString in place,
// keeping its alignment to the original text.
#ifndef ENCODER_SERVER_TOKENIZER_NORMALIZERS_H_
#define ENCODER_SERVER_TOKENIZER_NORMALIZERS_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json_fwd.hpp"
#include "server/tokenizer/normalized_string.h"

namespace encoder::tokenizer {

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  virtual absl::Status Normalize(NormalizedString* s) const = 0;
};

// Builds a normalizer from its tokenizer.json object; an unknown "type" is
// InvalidArgument naming it.
absl::StatusOr<std::unique_ptr<Normalizer>> MakeNormalizer(
    const nlohmann::json& j);

// Unicode normalization forms as character-level changes.
enum class UnicodeForm { kNfd, kNfkd, kNfc, kNfkc };
void NormalizeUnicode(UnicodeForm form, NormalizedString* s);

}  // namespace encoder::tokenizer

#endif  // ENCODER_SERVER_TOKENIZER_NORMALIZERS_H_
