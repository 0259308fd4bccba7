// Rerank through a rerank template (an LLM reranker such as
// Qwen3-Reranker) in the core, on a fake model with a byte tokenizer
// ([CLS] bytes [SEP]; fake_model.h): the sequence is the prefix and the
// suffix without special tokens around the body with them, the body cut
// so the whole fits the model's length, the request's instruction in
// place of the template's, and the refusals.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "server/model/rerank_template.h"
#include "server/tokenizer/byte_tokenizer.h"
#include "tests/core/core_test_util.h"

namespace encoder::testing {
namespace {

using core::PreparedScore;
using tokenizer::ByteTokenizer;

model::RerankTemplate Template() {
  model::RerankTemplate t;
  t.name = "custom";
  t.prefix = "P:";
  t.body = "{instruction}|{query}|{document}";
  t.suffix = ";S";
  t.instruction = "ins";
  return t;
}

FakeModelOptions Reranker(int64_t max_positions = 64) {
  FakeModelOptions o;
  o.name = "llm";
  o.max_positions = max_positions;
  o.rerank_template = Template();
  return o;
}

absl::StatusOr<core::ScoreAnswer> Rerank(core::Inference& core,
                                         core::ScoreQuery query) {
  absl::Notification done;
  absl::StatusOr<core::ScoreAnswer> out = absl::UnknownError("unanswered");
  core::Call call;
  call.rpc = "Rerank";
  core.Score(std::move(call), std::move(query),
             [&](absl::StatusOr<core::ScoreAnswer> answer) {
               out = std::move(answer);
               done.Notify();
             });
  EXPECT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(30)));
  return out;
}

core::ScoreQuery Query(const std::string& query,
                       const std::vector<std::string>& documents) {
  core::ScoreQuery q;
  q.task = core::ScoreQuery::Task::kRerank;
  q.model = "llm";
  q.item_field = "documents";
  for (const std::string& d : documents) q.items.push_back({query, d});
  return q;
}

// The byte tokenizer's ids of `text`, with or without [CLS] ... [SEP].
std::vector<int64_t> Ids(const std::string& text, bool specials) {
  std::vector<int64_t> ids =
      *ByteTokenizer::Encode(text, ByteTokenizer::kMinVocab);
  if (!specials) {
    ids.erase(ids.begin());
    ids.pop_back();
  }
  return ids;
}

std::vector<int64_t> Join(std::vector<std::vector<int64_t>> parts) {
  std::vector<int64_t> out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

TEST(RerankTemplate, TheSequenceIsPrefixBodySuffix) {
  FakeCore fake({}, {Reranker()});
  auto answer = Rerank(fake.core, Query("q1", {"doc a", "b"}));
  ASSERT_TRUE(answer.ok()) << answer.status();
  const std::vector<api::EmbedSpec> ran = fake.model("llm").ran();
  ASSERT_EQ(ran.size(), 2u);
  const std::vector<int64_t> want =
      Join({Ids("P:", false), Ids("ins|q1|doc a", true), Ids(";S", false)});
  EXPECT_EQ(ran[0].token_ids, want);
  EXPECT_EQ(answer->items[0].tokens, static_cast<int64_t>(want.size()));
  // The head's one logit, as the fake computes it from the ids.
  int64_t sum = 0;
  for (int64_t id : want) sum += id;
  ASSERT_EQ(answer->items[0].logits.size(), 1u);
  EXPECT_FLOAT_EQ(answer->items[0].logits[0], static_cast<float>(sum) / 1000);
  EXPECT_TRUE(ran[1].type_ids.empty() ||
              std::all_of(ran[1].type_ids.begin(), ran[1].type_ids.end(),
                          [](int64_t t) { return t == 0; }));
}

TEST(RerankTemplate, TheRequestsInstructionReplacesTheTemplates) {
  FakeCore fake({}, {Reranker()});
  core::ScoreQuery q = Query("q", {"d"});
  q.instruction = "find {query}";  // braces in a value stay as they are
  ASSERT_TRUE(Rerank(fake.core, q).ok());
  EXPECT_EQ(fake.model("llm").ran()[0].token_ids,
            Join({Ids("P:", false), Ids("find {query}|q|d", true),
                  Ids(";S", false)}));
}

TEST(RerankTemplate, TruncationCutsTheBodyAndKeepsTheFrame) {
  FakeCore fake({}, {Reranker(/*max_positions=*/20)});
  const std::string document(40, 'x');
  core::ScoreQuery q = Query("q", {document});
  q.truncate = false;
  auto refused = Rerank(fake.core, q);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  q.truncate = true;
  auto answer = Rerank(fake.core, q);
  ASSERT_TRUE(answer.ok()) << answer.status();
  const std::vector<int64_t> ids = fake.model("llm").ran()[0].token_ids;
  ASSERT_EQ(ids.size(), 20u);
  // The prefix first, the suffix last, the body's [SEP] before it.
  const std::vector<int64_t> prefix = Ids("P:", false);
  const std::vector<int64_t> suffix = Ids(";S", false);
  EXPECT_TRUE(std::equal(prefix.begin(), prefix.end(), ids.begin()));
  EXPECT_TRUE(std::equal(suffix.rbegin(), suffix.rend(), ids.rbegin()));
  EXPECT_EQ(ids[ids.size() - suffix.size() - 1], ByteTokenizer::kSep);
  EXPECT_TRUE(answer->items[0].truncated_tokens > 0);
}

TEST(RerankTemplate, ExplainsFromTheAnswerPositionToTheDocument) {
  FakeCatalog catalog({Reranker()});
  core::ScoreQuery q = Query("q1", {"doc"});
  q.attention_layers = {0};
  auto prepared = core::PrepareScore(q, catalog, core::ServiceLimits{});
  ASSERT_TRUE(prepared.ok()) << prepared.status();
  ASSERT_EQ(prepared->sides.size(), 1u);
  const PreparedScore::Sides& sides = prepared->sides[0];
  const int64_t n =
      static_cast<int64_t>(prepared->sequences[0].token_ids.size());
  // The rows: the last position, whose state the head reads.
  EXPECT_EQ(sides.first, std::vector<int64_t>{n - 1});
  // The columns: the document's bytes "doc", after the prefix "P:",
  // [CLS] and "ins|q1|".
  const int64_t start = 2 + 1 + 7;
  EXPECT_EQ(sides.second, (std::vector<int64_t>{start, start + 1, start + 2}));
  EXPECT_EQ(sides.second_tokens.size(), 3u);
  EXPECT_EQ(prepared->sequences[0].attention_layers, std::vector<int64_t>{0});
}

TEST(RerankTemplate, RefusesProbesAndStrayInstructions) {
  FakeModelOptions late;  // ranks by late interaction, without a template
  late.name = "late";
  late.late_interaction = true;
  FakeCore fake({}, {Reranker(), late});
  core::ScoreQuery probes = Query("q", {"d"});
  probes.positional_probes = true;
  auto refused = Rerank(fake.core, probes);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("rerank template"),
            std::string::npos);
  // Classify on the templated model takes no instruction, nor does a
  // reranker without a template.
  core::ScoreQuery classify = Query("q", {"d"});
  classify.task = core::ScoreQuery::Task::kClassify;
  classify.instruction = "x";
  EXPECT_EQ(Rerank(fake.core, classify).status().code(),
            absl::StatusCode::kInvalidArgument);
  core::ScoreQuery other = Query("q", {"d"});
  other.model = "late";
  other.instruction = "x";
  auto stray = Rerank(fake.core, other);
  EXPECT_NE(stray.status().message().find("has no rerank template"),
            std::string::npos)
      << stray.status();
}

TEST(RerankTemplate, FormatsEachPlaceholderOnce) {
  const model::RerankTemplate t = Template();
  EXPECT_EQ(model::FormatRerankBody(t, "{document}", "{instruction}", "d"),
            "{document}|{instruction}|d");
  model::RerankTemplate bad = t;
  bad.body = "{query} only";
  EXPECT_FALSE(model::ValidateRerankTemplate(bad).ok());
  bad = t;
  bad.yes = "yes";
  EXPECT_FALSE(model::ValidateRerankTemplate(bad).ok());
  EXPECT_TRUE(model::BuiltinRerankTemplate("qwen3-reranker").has_value());
  EXPECT_TRUE(model::ValidateRerankTemplate(
                  *model::BuiltinRerankTemplate("qwen3-reranker"))
                  .ok());
}

}  // namespace
}  // namespace encoder::testing
