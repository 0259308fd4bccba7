// Shared helpers for reading tokenizer.json component objects.
#ifndef ENCODER_SERVER_TOKENIZER_JSON_UTIL_H_
#define ENCODER_SERVER_TOKENIZER_JSON_UTIL_H_

#include <memory>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json_fwd.hpp"
#include "server/tokenizer/regex.h"

namespace encoder::tokenizer {

// InvalidArgument "unsupported <what> type '<type>'".
absl::Status UnknownType(const std::string& what, const std::string& type);

// A tokenizer.json pattern: {"String": "..."} (literal) or {"Regex": "..."}.
absl::StatusOr<std::unique_ptr<Regex>> MakePattern(const nlohmann::json& j);

}  // namespace encoder::tokenizer

#endif  // ENCODER_SERVER_TOKENIZER_JSON_UTIL_H_
