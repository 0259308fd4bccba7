// The JSON of the scoring routes to and from the core's ScoreQuery and
// ScoreAnswer; no HTTP here.
//
// text-embeddings-inference's POST /rerank: {"query": string, "texts":
// [string, ...], "truncate": bool, "truncation_direction": "Right" |
// "Left", "raw_scores": bool, "return_text": bool, "model" (extension)}
// -> [{"index": i, "score": s, "text": t (return_text)}, ...], best first.
//
// Its POST /predict: {"inputs": a text, a [text, text] pair, or a list of
// texts and pairs, "truncate", "truncation_direction", "raw_scores",
// "model"} -> [{"score": s, "label": l}, ...] (best first) for one input,
// a list of those for a list. As TEI reads it, a list of exactly two
// strings is one pair; a list of any other length is a batch.
//
// The Cohere/Jina-style POST /v1/rerank: {"model", "query", "documents":
// [string or {"text": string}, ...], "top_n", "return_documents"} ->
// {"object": "rerank", "id", "model", "results": [{"index",
// "relevance_score", "document": {"text"} (return_documents)}],
// "usage": {"prompt_tokens", "total_tokens"}}.
//
// TEI's routes answer errors in TEI's shape (tei_embed.h); /v1/rerank in
// OpenAI's, as /v1/embeddings does.
#ifndef ENCODER_SERVER_HTTP_TEI_SCORE_H_
#define ENCODER_SERVER_HTTP_TEI_SCORE_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "server/core/score_request.h"

namespace encoder::http {

// What the response needs beyond the answer.
struct ScoreRendering {
  bool raw_scores = false;
  bool return_text = false;        // /rerank's return_text, return_documents
  int64_t top_n = 0;               // /v1/rerank; 0: all
  bool batch = false;              // /predict: a list of inputs
  std::vector<std::string> texts;  // the documents, when returned
};

absl::Status ParseTeiRerankBody(const std::string& body,
                                core::ScoreQuery* query,
                                ScoreRendering* rendering);
std::string TeiRerankJson(const core::ScoreAnswer& answer,
                          const ScoreRendering& rendering);

absl::Status ParseTeiPredictBody(const std::string& body,
                                 core::ScoreQuery* query,
                                 ScoreRendering* rendering);
std::string TeiPredictJson(const core::ScoreAnswer& answer,
                           const ScoreRendering& rendering);

// On error `*param` names the offending field.
absl::Status ParseRerankV1Body(const std::string& body, core::ScoreQuery* query,
                               ScoreRendering* rendering, std::string* param);
std::string RerankV1Json(const core::ScoreAnswer& answer,
                         const ScoreRendering& rendering);

}  // namespace encoder::http

#endif  // ENCODER_SERVER_HTTP_TEI_SCORE_H_
