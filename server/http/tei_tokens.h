// text-embeddings-inference's POST /tokenize and POST /decode: the model's
// tokenizer without running the model. No HTTP here.
//
// /tokenize: {"inputs": a string or a list of strings, "add_special_tokens":
// bool (true), "prompt_name": string or null, "model" (extension)} ->
// [[{"id", "text", "special", "start", "stop"}, ...], ...]: one list per
// input; start and stop are UTF-8 byte offsets into the (prompted) input
// and text its bytes there, null for the special tokens the template
// added (text is then the token itself).
// /decode: {"ids": [id, ...] or [[id, ...], ...], "skip_special_tokens":
// bool (true), "model"} -> ["text", ...].
// Errors as tei_embed.h.
#ifndef ENCODER_SERVER_HTTP_TEI_TOKENS_H_
#define ENCODER_SERVER_HTTP_TEI_TOKENS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/runner/served_model.h"

namespace encoder::http {

struct TeiTokenize {
  std::string model;
  std::vector<std::string> texts;
  bool add_special_tokens = true;
  std::string prompt_name;
};
absl::Status ParseTeiTokenizeBody(const std::string& body, TeiTokenize* out);
// INVALID_ARGUMENT for more than `max_texts` texts, invalid UTF-8, or a
// prompt name the model lacks.
absl::StatusOr<std::string> TeiTokenizeJson(const runner::ServedModel& model,
                                            const TeiTokenize& request,
                                            int64_t max_texts);

struct TeiDecode {
  std::string model;
  std::vector<std::vector<int64_t>> ids;
  bool skip_special_tokens = true;
};
absl::Status ParseTeiDecodeBody(const std::string& body, TeiDecode* out);
// INVALID_ARGUMENT for more than `max_texts` lists or an id outside the
// vocabulary.
absl::StatusOr<std::string> TeiDecodeJson(const runner::ServedModel& model,
                                          const TeiDecode& request,
                                          int64_t max_texts);

}  // namespace encoder::http

#endif  // ENCODER_SERVER_HTTP_TEI_TOKENS_H_
