#include "server/tokenizer/json_util.h"

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"

namespace encoder::tokenizer {

absl::Status UnknownType(const std::string& what, const std::string& type) {
  return absl::InvalidArgumentError(
      absl::StrCat("tokenizer.json: unsupported ", what, " type '", type, "'"));
}

absl::StatusOr<std::unique_ptr<Regex>> MakePattern(const nlohmann::json& j) {
  if (j.is_object() && j.contains("String")) {
    return Regex::Literal(j["String"].get<std::string>());
  }
  if (j.is_object() && j.contains("Regex")) {
    return Regex::Compile(j["Regex"].get<std::string>());
  }
  if (j.is_string()) return Regex::Literal(j.get<std::string>());
  return absl::InvalidArgumentError(
      absl::StrCat("tokenizer.json: bad pattern ", j.dump()));
}

int64_t IntegerOf(const nlohmann::json& value) {
  if (!value.is_number_integer()) {
    throw InvalidJsonValue(absl::StrCat("expected an integer, got ",
                                        value.type_name(), " ",
                                        value.dump().substr(0, 40)));
  }
  return value.get<int64_t>();
}

int64_t IntegerIn(const nlohmann::json& value, int64_t lo, int64_t hi,
                  const char* what) {
  const int64_t v = IntegerOf(value);
  if (v < lo || v > hi) {
    throw InvalidJsonValue(
        absl::StrCat(what, " ", v, " is outside [", lo, ", ", hi, "]"));
  }
  return v;
}

int64_t TokenIdOf(const nlohmann::json& value) {
  return IntegerIn(value, 0, kMaxTokenId, "token id");
}

int64_t IntegerOr(const nlohmann::json& object, const char* key,
                  int64_t fallback) {
  return object.contains(key) ? IntegerOf(object[key]) : fallback;
}

}  // namespace encoder::tokenizer
