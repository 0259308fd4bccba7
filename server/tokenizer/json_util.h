// Shared helpers for reading tokenizer.json component objects.
#ifndef ENCODER_SERVER_TOKENIZER_JSON_UTIL_H_
#define ENCODER_SERVER_TOKENIZER_JSON_UTIL_H_

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json_fwd.hpp"
#include "server/tokenizer/regex.h"

namespace encoder::tokenizer {

// InvalidArgument "unsupported <what> type '<type>'".
absl::Status UnknownType(const std::string& what, const std::string& type);

// Thrown for a value of the wrong kind where nlohmann::json would convert
// silently (a float where an id belongs); the loader reports it like a
// json::exception.
struct InvalidJsonValue : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// An integer field (an id, a length): its value. Throws InvalidJsonValue
// for anything that is not an integer number, since converting a float
// out of int64's range is undefined.
int64_t IntegerOf(const nlohmann::json& value);
// The largest token id a tokenizer file may use. Ids index dense tables
// (id -> token), so one huge id in a hostile file would allocate without
// bound; the largest real vocabularies have about 2^18 entries.
inline constexpr int64_t kMaxTokenId = (int64_t{1} << 22) - 1;
// A token id: IntegerOf, and InvalidJsonValue outside [0, kMaxTokenId].
int64_t TokenIdOf(const nlohmann::json& value);
// IntegerOf, and InvalidJsonValue naming `what` outside [lo, hi].
int64_t IntegerIn(const nlohmann::json& value, int64_t lo, int64_t hi,
                  const char* what);
// object[key] as IntegerOf, or `fallback` when the key is absent.
int64_t IntegerOr(const nlohmann::json& object, const char* key,
                  int64_t fallback);

// A tokenizer.json pattern: {"String": "..."} (literal) or {"Regex": "..."}.
absl::StatusOr<std::unique_ptr<Regex>> MakePattern(const nlohmann::json& j);

}  // namespace encoder::tokenizer

#endif  // ENCODER_SERVER_TOKENIZER_JSON_UTIL_H_
