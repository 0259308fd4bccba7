#include "server/http/tei_fields.h"

#include "absl/strings/str_cat.h"
#include "server/http/tei_embed.h"

namespace encoder::http {

absl::StatusOr<bool> ParseTeiSharedField(const std::string& key,
                                         const nlohmann::json& value,
                                         const TeiSharedFields& into) {
  if (key == "model" && into.model != nullptr) {
    if (value.is_null()) return true;
    if (!value.is_string()) return TeiBodyError("model must be a string");
    *into.model = value.get<std::string>();
    return true;
  }
  if (key == "prompt_name" && into.prompt_name != nullptr) {
    if (value.is_null()) return true;
    if (!value.is_string()) {
      return TeiBodyError("prompt_name must be a string");
    }
    *into.prompt_name = value.get<std::string>();
    return true;
  }
  if (key == "truncate" && into.truncate != nullptr) {
    if (value.is_null()) return true;
    if (!value.is_boolean()) {
      return TeiBodyError("truncate must be true or false");
    }
    *into.truncate = value.get<bool>();
    return true;
  }
  if (key == "truncation_direction" && into.truncation_side != nullptr) {
    if (value.is_null()) return true;
    const std::string d = value.is_string() ? value.get<std::string>() : "";
    if (d == "Right" || d == "right") {
      *into.truncation_side = tokenizer::TruncationSide::kRight;
    } else if (d == "Left" || d == "left") {
      *into.truncation_side = tokenizer::TruncationSide::kLeft;
    } else {
      return TeiBodyError(
          "truncation_direction must be \"Right\" or \"Left\" (the side "
          "inputs are cut on when truncated)");
    }
    return true;
  }
  return false;
}

}  // namespace encoder::http
