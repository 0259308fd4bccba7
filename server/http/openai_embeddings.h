// The JSON of POST /v1/embeddings (OpenAI's embeddings API) to and from
// the core's EmbedQuery and EmbedAnswer: the HTTP front's one conversion.
// No HTTP here: the front (http_front.h) owns the transport,
// authentication and error envelope.
//
// Request: input (a string, a list of strings, a list of token ids or a
// list of token-id lists), model, encoding_format ("float" or "base64"),
// dimensions (also turns normalization on, as OpenAI's shortened
// embeddings are unit vectors) and user (accepted, not used); extensions
// with the names of the gRPC EmbedRequest's fields: normalize, truncate,
// prompt_name, prompt, long_input ({"policy": "chunk", "overlap_tokens":
// 32, "aggregation": "mean"}) and hidden_states ({"layers": [...],
// "pooled": bool}).
#ifndef ENCODER_SERVER_HTTP_OPENAI_EMBEDDINGS_H_
#define ENCODER_SERVER_HTTP_OPENAI_EMBEDDINGS_H_

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "server/core/embed_request.h"

namespace encoder::http {

// One JSON value of inputs, as OpenAI's "input" and TEI's "inputs" give
// them: a string, a list of strings, a list of token ids or a list of
// token-id lists. Errors name `name` and set `*param` to it.
absl::Status ParseInputsJson(const nlohmann::json& input, const char* name,
                             std::vector<core::EmbedInput>* inputs,
                             std::string* param);

// Appends float32 values as a JSON array of numbers, each the shortest
// text that reads back as the same float32.
void AppendJsonFloats(const float* values, size_t count, std::string* out);

// Parses `body` into `request`. On error `*param` names the offending
// field (OpenAI's error "param"). `*base64` reports encoding_format.
absl::Status ParseEmbeddingsBody(const std::string& body,
                                 core::EmbedQuery* query, bool* base64,
                                 std::string* param);

// The response object: {"object": "list", "data": [{"object":
// "embedding", "index": i, "embedding": [...] or "<base64>"}], "model",
// "usage"}. Items whose result carries hidden states also have
// "hidden_states": {"layers": [...], "shape": [...], "data": flat values
// in the same encoding as the embedding}.
std::string EmbeddingsResponseJson(const core::EmbedAnswer& answer,
                                   bool base64);

// The request field a failed embeddings call points at ("" when none) and,
// in `*code`, an OpenAI error code where one applies ("model_not_found").
std::string EmbeddingsErrorParam(const absl::Status& status, std::string* code);

}  // namespace encoder::http

#endif  // ENCODER_SERVER_HTTP_OPENAI_EMBEDDINGS_H_
