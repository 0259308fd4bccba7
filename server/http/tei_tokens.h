// text-embeddings-inference's POST /tokenize and POST /decode: their
// bodies as core queries (core::Tokenize and core::Decode check and run
// them, with every front's limits) and their answers as TEI's JSON. No
// HTTP here.
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
#include "server/core/tokenize.h"

namespace encoder::http {

// The body as a core::TokenizeQuery: texts named inputs[i], the prompt
// resolved as an Embed call's (prompt_name, else the model's default).
absl::Status ParseTeiTokenizeBody(const std::string& body,
                                  core::TokenizeQuery* out);
std::string TeiTokenizeJson(const core::TokenizeAnswer& answer);

// The body as a core::DecodeQuery (id lists named ids[i]).
absl::Status ParseTeiDecodeBody(const std::string& body,
                                core::DecodeQuery* out);
std::string TeiDecodeJson(const core::DecodeAnswer& answer);

}  // namespace encoder::http

#endif  // ENCODER_SERVER_HTTP_TEI_TOKENS_H_
