// The request fields that text-embeddings-inference's routes share
// (model, truncate, truncation_direction, prompt_name), parsed one way for
// every route: the same types, the same meaning, the same 422 when a value
// is of the wrong kind. No HTTP here.
#ifndef ENCODER_SERVER_HTTP_TEI_FIELDS_H_
#define ENCODER_SERVER_HTTP_TEI_FIELDS_H_

#include <nlohmann/json.hpp>

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "server/tokenizer/tokenizer.h"

namespace encoder::http {

// Where a route keeps each shared field; null: the route has no such field
// (the key is then not taken, and ignored as TEI's request types ignore
// fields they do not declare).
struct TeiSharedFields {
  std::string* model = nullptr;  // an extension: TEI serves one model
  std::optional<bool>* truncate = nullptr;
  // "Right" or "Left" (TEI's TruncationDirection; lower case accepted).
  tokenizer::TruncationSide* truncation_side = nullptr;
  std::string* prompt_name = nullptr;
};

// true: `key` is a shared field the route takes and `value` is stored;
// false: it is not one. TeiBodyError (422) for a value of the wrong type.
// A null `value` is not stored (the field's default stays) and counts as
// taken.
absl::StatusOr<bool> ParseTeiSharedField(const std::string& key,
                                         const nlohmann::json& value,
                                         const TeiSharedFields& into);

}  // namespace encoder::http

#endif  // ENCODER_SERVER_HTTP_TEI_FIELDS_H_
