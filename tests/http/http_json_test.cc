// The HTTP front's JSON request parsers, without a server: what each route's
// body becomes (the core query) and how bad bodies are refused (TEI's
// statuses: 422 for a body of the wrong shape, 400 for an empty list; the
// OpenAI route's param). The TEI fields the routes share are read alike by
// every route. The parsers' robustness on arbitrary bytes is
// tests/fuzz/http_json_fuzz.cc's.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "server/http/openai_embeddings.h"
#include "server/http/tei_embed.h"
#include "server/http/tei_score.h"
#include "server/http/tei_tokens.h"

namespace encoder::http {
namespace {

using core::EmbedInput;
using tokenizer::TruncationSide;

int TeiStatus(const absl::Status& s) { return TeiErrorOf(s).http_status; }

TEST(OpenAiEmbeddingsBody, ReadsTextsIdsAndOptions) {
  core::EmbedQuery q;
  bool base64 = false;
  std::string param;
  ASSERT_TRUE(ParseEmbeddingsBody(
                  R"({"input": ["a", "b"], "model": "m", "dimensions": 8,
                      "encoding_format": "base64"})",
                  &q, &base64, &param)
                  .ok());
  ASSERT_EQ(q.inputs.size(), 2u);
  EXPECT_EQ(q.inputs[1].kind, EmbedInput::Kind::kText);
  EXPECT_EQ(q.inputs[1].text, "b");
  EXPECT_EQ(q.model, "m");
  EXPECT_EQ(q.dimensions, 8);
  EXPECT_TRUE(base64);

  core::EmbedQuery ids;
  ASSERT_TRUE(ParseEmbeddingsBody(R"({"input": [[1, 2], [3]], "model": "m"})",
                                  &ids, &base64, &param)
                  .ok());
  ASSERT_EQ(ids.inputs.size(), 2u);
  EXPECT_EQ(ids.inputs[0].kind, EmbedInput::Kind::kTokenIds);
  EXPECT_EQ(ids.inputs[0].token_ids, (std::vector<int64_t>{1, 2}));
}

TEST(OpenAiEmbeddingsBody, RefusalsNameTheField) {
  for (const auto& [body, field] :
       std::vector<std::pair<std::string, std::string>>{
           {R"({"model": "m"})", "input"},
           {R"({"input": 5, "model": "m"})", "input"},
           {R"({"input": "a", "encoding_format": "hex"})", "encoding_format"},
           {R"([1, 2])", ""}}) {
    core::EmbedQuery q;
    bool base64 = false;
    std::string param;
    const absl::Status s = ParseEmbeddingsBody(body, &q, &base64, &param);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << body;
    if (!field.empty()) EXPECT_EQ(param, field) << body << ": " << s;
  }
}

TEST(TeiEmbedBody, DefaultsAsTeiAndEveryField) {
  core::EmbedQuery q;
  ASSERT_TRUE(ParseTeiEmbedBody(R"({"inputs": "x"})", false, &q).ok());
  EXPECT_EQ(q.normalize, true);  // TEI normalizes /embed by default
  EXPECT_FALSE(q.long_input.has_value());
  EXPECT_EQ(q.text_options.truncation_side, TruncationSide::kRight);

  core::EmbedQuery all;
  ASSERT_TRUE(ParseTeiEmbedBody(
                  R"({"inputs": ["x", "y"], "truncate": true,
              "truncation_direction": "Left", "prompt_name": "query",
              "model": "m", "normalize": null})",
                  true, &all)
                  .ok());
  EXPECT_TRUE(all.token_embeddings);
  EXPECT_EQ(all.normalize, false);
  EXPECT_EQ(all.long_input, LongInputPolicy::kTruncate);
  EXPECT_EQ(all.text_options.truncation_side, TruncationSide::kLeft);
  EXPECT_EQ(all.prompt_name, "query");
  EXPECT_EQ(all.model, "m");
  EXPECT_EQ(all.inputs.size(), 2u);

  core::EmbedQuery cut;
  ASSERT_TRUE(ParseTeiEmbedBody(R"({"inputs": "x", "dimensions": 4,
                                   "normalize": false})",
                                false, &cut)
                  .ok());
  EXPECT_EQ(cut.dimensions, 4);
  EXPECT_EQ(cut.normalize, false);
}

TEST(TeiEmbedBody, BadBodiesGetTeisStatuses) {
  const std::vector<std::pair<std::string, int>> cases = {
      {R"({"inputs": []})", 400},
      {R"({})", 422},
      {R"({"inputs": {"a": 1}})", 422},
      {R"({"inputs": "x", "truncate": "yes"})", 422},
      {R"({"inputs": "x", "truncation_direction": "Up"})", 422},
      {R"({"inputs": "x", "dimensions": 0})", 422},
      {R"({"inputs": "x", "model": 3})", 422},
      {R"([1, 2)", 422}};
  for (const auto& [body, status] : cases) {
    core::EmbedQuery q;
    const absl::Status s = ParseTeiEmbedBody(body, false, &q);
    ASSERT_FALSE(s.ok()) << body;
    EXPECT_EQ(TeiStatus(s), status) << body << ": " << s;
  }
}

TEST(TeiSimilarityBody, ReadsTheSourceFirstAndItsParameters) {
  core::EmbedQuery q;
  ASSERT_TRUE(ParseTeiSimilarityBody(
                  R"({"inputs": {"source_sentence": "s",
                                 "sentences": ["a", "b"]},
                      "parameters": {"truncate": true,
                                     "truncation_direction": "Left",
                                     "prompt_name": "p"}})",
                  &q)
                  .ok());
  ASSERT_EQ(q.inputs.size(), 3u);
  EXPECT_EQ(q.inputs[0].text, "s");
  EXPECT_EQ(q.long_input, LongInputPolicy::kTruncate);
  EXPECT_EQ(q.text_options.truncation_side, TruncationSide::kLeft);
  EXPECT_EQ(q.prompt_name, "p");
  core::EmbedQuery null_parameters;
  EXPECT_TRUE(ParseTeiSimilarityBody(
                  R"({"inputs": {"source_sentence": "s", "sentences": ["a"]},
                      "parameters": null})",
                  &null_parameters)
                  .ok());
  for (const char* body :
       {R"({"inputs": {"source_sentence": "s", "sentences": ["a"]},
            "parameters": "truncate"})",
        R"({"inputs": {"source_sentence": "s", "sentences": []}})",
        R"({"inputs": {"sentences": ["a"]}})"}) {
    core::EmbedQuery bad;
    const absl::Status s = ParseTeiSimilarityBody(body, &bad);
    EXPECT_FALSE(s.ok()) << body;
  }
}

TEST(TeiScoreBodies, RerankAndPredictReadTheirFields) {
  core::ScoreQuery rerank;
  ScoreRendering r;
  ASSERT_TRUE(ParseTeiRerankBody(
                  R"({"query": "q", "texts": ["a", "b"], "raw_scores": true,
                      "return_text": true, "truncation_direction": "Left",
                      "truncate": true})",
                  &rerank, &r)
                  .ok());
  ASSERT_EQ(rerank.items.size(), 2u);
  EXPECT_EQ(rerank.items[1].text, "q");
  EXPECT_EQ(rerank.items[1].pair, "b");
  EXPECT_TRUE(r.raw_scores);
  EXPECT_TRUE(r.return_text);
  EXPECT_EQ(rerank.truncation_side, TruncationSide::kLeft);
  EXPECT_EQ(rerank.truncate, true);
  EXPECT_FALSE(rerank.instruction.has_value());

  // An LLM reranker's instruction, on both rerank routes.
  core::ScoreQuery with_instruction;
  ASSERT_TRUE(ParseTeiRerankBody(
                  R"({"query": "q", "texts": ["a"], "instruction": "Find"})",
                  &with_instruction, &r)
                  .ok());
  EXPECT_EQ(with_instruction.instruction, "Find");
  core::ScoreQuery v1;
  ScoreRendering v1_rendering;
  std::string param;
  ASSERT_TRUE(ParseRerankV1Body(
                  R"({"query": "q", "documents": ["a"], "instruction": ""})",
                  &v1, &v1_rendering, &param)
                  .ok());
  EXPECT_EQ(v1.instruction, "");
  // /v1/rerank's explanation selection, as gRPC's AttentionSelection.
  core::ScoreQuery explained;
  ASSERT_TRUE(ParseRerankV1Body(
                  R"({"query": "q", "documents": ["a"], "attention":
                      {"layers": [0, 2], "heads": [1], "average_heads": true}})",
                  &explained, &v1_rendering, &param)
                  .ok());
  EXPECT_EQ(explained.attention_layers, (std::vector<int64_t>{0, 2}));
  EXPECT_EQ(explained.attention_heads, std::vector<int64_t>{1});
  EXPECT_TRUE(explained.average_heads);
  for (const char* body :
       {R"({"query": "q", "documents": ["a"], "attention": [0]})",
        R"({"query": "q", "documents": ["a"], "attention": {"layers": 0}})",
        R"({"query": "q", "documents": ["a"], "attention": {"rows": [0]}})"}) {
    core::ScoreQuery q;
    param.clear();
    EXPECT_FALSE(ParseRerankV1Body(body, &q, &v1_rendering, &param).ok())
        << body;
    EXPECT_EQ(param, "attention") << body;
  }
  core::ScoreQuery bad;
  EXPECT_FALSE(
      ParseTeiRerankBody(R"({"query": "q", "texts": ["a"], "instruction": 3})",
                         &bad, &r)
          .ok());

  core::ScoreQuery predict;
  ScoreRendering p;
  ASSERT_TRUE(ParseTeiPredictBody(R"({"inputs": [["a", "b"], ["c", "d"]]})",
                                  &predict, &p)
                  .ok());
  ASSERT_EQ(predict.items.size(), 2u);
  EXPECT_EQ(predict.items[1].pair, "d");
  EXPECT_TRUE(p.batch);
}

// The fields every TEI route shares are refused alike, whichever route.
TEST(TeiSharedFields, EveryRouteRefusesTheSameValueTheSameWay) {
  const std::vector<std::string> fields = {R"("truncate": "yes")",
                                           R"("truncation_direction": "Up")",
                                           R"("model": 1)"};
  for (const std::string& field : fields) {
    core::EmbedQuery embed;
    const absl::Status e = ParseTeiEmbedBody(
        absl::StrCat(R"({"inputs": "x", )", field, "}"), false, &embed);
    core::ScoreQuery score;
    ScoreRendering rendering;
    const absl::Status r = ParseTeiRerankBody(
        absl::StrCat(R"({"query": "q", "texts": ["a"], )", field, "}"), &score,
        &rendering);
    core::ScoreQuery predict;
    const absl::Status p = ParseTeiPredictBody(
        absl::StrCat(R"({"inputs": "x", )", field, "}"), &predict, &rendering);
    for (const absl::Status& s : {e, r, p}) {
      EXPECT_EQ(TeiStatus(s), 422) << field << ": " << s;
      EXPECT_EQ(s.message(), e.message()) << field;
    }
  }
}

TEST(TeiTokenBodies, TokenizeAndDecode) {
  core::TokenizeQuery t;
  ASSERT_TRUE(ParseTeiTokenizeBody(
                  R"({"inputs": ["a", "b"], "add_special_tokens": false,
                      "model": "m"})",
                  &t)
                  .ok());
  ASSERT_EQ(t.texts.size(), 2u);
  EXPECT_EQ(t.texts[1].text, "b");
  EXPECT_EQ(t.texts[1].where, "inputs[1]");
  EXPECT_FALSE(t.options.add_special_tokens);
  EXPECT_EQ(t.prompt_name, "");  // TEI: the model's default prompt
  EXPECT_EQ(t.model, "m");

  core::DecodeQuery one;
  ASSERT_TRUE(ParseTeiDecodeBody(R"({"ids": [1, 2, 3]})", &one).ok());
  EXPECT_EQ(one.ids, (std::vector<std::vector<int64_t>>{{1, 2, 3}}));
  EXPECT_TRUE(one.skip_special_tokens);  // TEI's default
  EXPECT_EQ(one.field, "ids");
  core::DecodeQuery many;
  ASSERT_TRUE(
      ParseTeiDecodeBody(
          R"({"ids": [[1], [2, 3]], "skip_special_tokens": false})", &many)
          .ok());
  EXPECT_EQ(many.ids.size(), 2u);
  EXPECT_FALSE(many.skip_special_tokens);

  core::TokenizeQuery empty;
  EXPECT_EQ(TeiStatus(ParseTeiTokenizeBody(R"({"inputs": []})", &empty)), 400);
  core::DecodeQuery bad;
  EXPECT_EQ(TeiStatus(ParseTeiDecodeBody(R"({"ids": ["a"]})", &bad)), 422);
}

}  // namespace
}  // namespace encoder::http
