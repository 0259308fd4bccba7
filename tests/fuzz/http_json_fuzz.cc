// libFuzzer target: the HTTP front's JSON request parsers (OpenAI
// /v1/embeddings, TEI's /embed, /embed_all, /embed_sparse, /similarity,
// /rerank, /predict, /tokenize, /decode, and /v1/rerank) on arbitrary
// bodies. The first byte picks the parser, the rest is the body. A parser
// must return a status (never crash, throw or leak) and, when it accepts,
// leave a query the core can take: inputs present, each a text or ids.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "server/core/embed_request.h"
#include "server/core/score_request.h"
#include "server/core/tokenize.h"
#include "server/http/openai_embeddings.h"
#include "server/http/tei_embed.h"
#include "server/http/tei_score.h"
#include "server/http/tei_tokens.h"

namespace {

namespace http = encoder::http;
namespace core = encoder::core;

void CheckEmbed(const absl::Status& s, const core::EmbedQuery& q) {
  if (!s.ok()) return;
  if (q.inputs.empty()) std::abort();
  for (const core::EmbedInput& in : q.inputs) {
    if (in.kind == core::EmbedInput::Kind::kNone) std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string body(reinterpret_cast<const char*>(data + 1), size - 1);
  switch (data[0] % 10) {
    case 0: {
      core::EmbedQuery q;
      bool base64 = false;
      std::string param;
      CheckEmbed(http::ParseEmbeddingsBody(body, &q, &base64, &param), q);
      break;
    }
    case 1:
    case 2: {
      core::EmbedQuery q;
      CheckEmbed(http::ParseTeiEmbedBody(body, data[0] % 10 == 2, &q), q);
      break;
    }
    case 3: {
      core::EmbedQuery q;
      CheckEmbed(http::ParseTeiSparseBody(body, &q), q);
      break;
    }
    case 4: {
      core::EmbedQuery q;
      const absl::Status s = http::ParseTeiSimilarityBody(body, &q);
      // The source sentence and at least one sentence.
      if (s.ok() && q.inputs.size() < 2) std::abort();
      break;
    }
    case 5: {
      core::ScoreQuery q;
      http::ScoreRendering r;
      (void)http::ParseTeiRerankBody(body, &q, &r);
      break;
    }
    case 6: {
      core::ScoreQuery q;
      http::ScoreRendering r;
      (void)http::ParseTeiPredictBody(body, &q, &r);
      break;
    }
    case 7: {
      core::TokenizeQuery q;
      const absl::Status s = http::ParseTeiTokenizeBody(body, &q);
      if (s.ok() && q.texts.empty()) std::abort();
      break;
    }
    case 8: {
      core::DecodeQuery q;
      const absl::Status s = http::ParseTeiDecodeBody(body, &q);
      if (s.ok() && q.ids.empty()) std::abort();
      break;
    }
    case 9: {
      core::ScoreQuery q;
      http::ScoreRendering r;
      std::string param;
      (void)http::ParseRerankV1Body(body, &q, &r, &param);
      break;
    }
  }
  return 0;
}
