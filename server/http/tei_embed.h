// The JSON of text-embeddings-inference's POST /embed and POST /embed_all
// to and from the core's EmbedQuery and EmbedAnswer, so a client written for
// TEI works unchanged. No HTTP here: the front owns the transport and
// authentication.
//
// Request: {"inputs": a string, a list of strings, a list of token ids or a
// list of token-id lists, "truncate": bool (false), "truncation_direction":
// "Right" (or "right"; "Left" is refused), "prompt_name": string or null,
// and for /embed "normalize": bool (true, as TEI) and "dimensions": int or
// null}; the extension "model" names a model (default: the server's).
// Response: /embed [[float, ...], ...], one pooled vector per input;
// /embed_all [[[float, ...], ...], ...], every token's vector (special
// tokens included) per input.
// Other fields are ignored, as TEI ignores them.
// Errors: {"error": message, "error_type": type} with TEI's statuses:
// Validation 413 (an input too long, too many inputs, a response over the
// send limit: TEI's PAYLOAD_TOO_LARGE), a body that does not parse or an
// unknown model 422, Empty 400 (no inputs), Overloaded 429, Unhealthy 503,
// Backend 424 (others as the front maps them).
#ifndef ENCODER_SERVER_HTTP_TEI_EMBED_H_
#define ENCODER_SERVER_HTTP_TEI_EMBED_H_

#include <nlohmann/json_fwd.hpp>
#include <string>

#include "absl/status/status.h"
#include "server/core/embed_request.h"

namespace encoder::http {

// Parses `body` for /embed (`all` false) or /embed_all (`all` true).
absl::Status ParseTeiEmbedBody(const std::string& body, bool all,
                               core::EmbedQuery* query);

// The response body of /embed (`all` false) or /embed_all.
std::string TeiEmbedJson(const core::EmbedAnswer& answer, bool all);

// text-embeddings-inference's POST /embed_sparse: /embed_all's request
// (inputs, truncate, truncation_direction, prompt_name, model) -> every
// input's sparse vector, [[{"index": int, "value": float}, ...], ...], its
// non-zero weights in index order. A model without a sparse head gets
// TEI's 424.
absl::Status ParseTeiSparseBody(const std::string& body,
                                core::EmbedQuery* query);
std::string TeiSparseJson(const core::EmbedAnswer& answer);

// text-embeddings-inference's POST /similarity: {"inputs":
// {"source_sentence": text, "sentences": [text, ...]}, "parameters":
// {"truncate", "truncation_direction", "prompt_name"}, "model"} -> the
// cosine similarity of each sentence to the source, [float, ...]. The
// query embeds the source first, then the sentences, normalized.
absl::Status ParseTeiSimilarityBody(const std::string& body,
                                    core::EmbedQuery* query);
std::string TeiSimilarityJson(const core::EmbedAnswer& answer);

// The model a TEI body names ("model"), or "" for the default; "" too for
// a body that does not parse (the route's own parser reports it).
std::string TeiModelOf(const std::string& body);

// TEI's error: the HTTP status and the {"error", "error_type"} body.
struct TeiError {
  int http_status = 500;
  std::string body;
};
TeiError TeiErrorOf(const absl::Status& status);

// INVALID_ARGUMENT marked with TEI's error type: a body its JSON extractor
// would refuse (422), and an empty list (400, "Empty").
absl::Status TeiBodyError(const std::string& message);
absl::Status TeiEmptyError(const std::string& message);

// Parses `body` into `*j`; TeiBodyError naming `example` unless it is a
// JSON object.
absl::Status ParseTeiObject(const std::string& body, const char* example,
                            nlohmann::json* j);

}  // namespace encoder::http

#endif  // ENCODER_SERVER_HTTP_TEI_EMBED_H_
