// A PyLate ColBERT model in the core (ModelDescription::colbert), on a
// fake model with the byte tokenizer ([CLS] = 1, [SEP] = 2, byte b ->
// b + 4) whose projected token vectors are small exact numbers
// (fake_model.h): the sequences Rerank and Embed frame (marker, cut,
// expansion, the tokens attended), the skiplist rows left out, the score
// as PyLate's rank.rerank defines it (recomputed here in double), and the
// refusals.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "tests/core/core_test_util.h"

namespace encoder::testing {
namespace {

constexpr int64_t kQueryMarker = 5, kDocumentMarker = 6, kMask = 7;

int64_t Byte(char c) { return static_cast<int64_t>(c) + 4; }

model::ColbertFraming Framing() {
  model::ColbertFraming f;
  f.query_prefix = "[Q] ";
  f.document_prefix = "[D] ";
  f.query_prefix_id = kQueryMarker;
  f.document_prefix_id = kDocumentMarker;
  f.query_length = 8;
  f.document_length = 6;
  f.expansion_id = kMask;
  // '%' is the best match of some query token here: skipping it changes
  // the score.
  f.skiplist_words = {",", "%"};
  f.skiplist_ids = {Byte('%'), Byte(',')};  // sorted
  return f;
}

FakeModelOptions Colbert(model::ColbertFraming f = Framing()) {
  FakeModelOptions o;
  o.name = "colbert";
  o.max_positions = 64;
  o.colbert = std::move(f);
  return o;
}

absl::StatusOr<core::ScoreAnswer> Rerank(core::Inference& core,
                                         const std::string& query,
                                         const std::vector<std::string>& docs,
                                         const std::string& model = "colbert") {
  core::ScoreQuery q;
  q.task = core::ScoreQuery::Task::kRerank;
  q.model = model;
  q.item_field = "documents";
  for (const std::string& d : docs) q.items.push_back({query, d});
  absl::Notification done;
  absl::StatusOr<core::ScoreAnswer> out = absl::UnknownError("unanswered");
  core::Call call;
  call.rpc = "Rerank";
  core.Score(std::move(call), std::move(q),
             [&](absl::StatusOr<core::ScoreAnswer> answer) {
               out = std::move(answer);
               done.Notify();
             });
  EXPECT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(30)));
  return out;
}

// The fake's projected rows of `ids` whose id is not in `skip`.
std::vector<std::vector<double>> Rows(const std::vector<int64_t>& ids,
                                      const std::vector<int64_t>& skip = {}) {
  std::vector<std::vector<double>> rows;
  for (int64_t id : ids) {
    if (std::find(skip.begin(), skip.end(), id) != skip.end()) continue;
    rows.push_back(
        {(id % 7) / 8.0, (id % 5 - 2) / 8.0, 1 / 8.0, -(id % 3) / 8.0});
  }
  return rows;
}

// rank.rerank's score: the sum over the query's rows of the best product
// with a document row.
double MaxSimSum(const std::vector<std::vector<double>>& q,
                 const std::vector<std::vector<double>>& d) {
  double sum = 0;
  for (const auto& a : q) {
    double best = -std::numeric_limits<double>::infinity();
    for (const auto& b : d) {
      double dot = 0;
      for (size_t k = 0; k < a.size(); ++k) dot += a[k] * b[k];
      best = std::max(best, dot);
    }
    sum += best;
  }
  return sum;
}

TEST(Colbert, RerankFramesQueriesAndDocumentsAndSumsMaxSim) {
  FakeCore fake({}, {Colbert()});
  // Whitespace is stripped; "xy, z." is cut to [CLS] x y , [SEP] (five
  // tokens, the marker makes six): three tokens dropped.
  auto answer = Rerank(fake.core, " ab\n", {"xy, z.", "b%a"});
  ASSERT_TRUE(answer.ok()) << answer.status();
  const std::vector<api::EmbedSpec> ran = fake.model("colbert").ran();
  ASSERT_EQ(ran.size(), 3u);
  const std::vector<int64_t> doc0 = {1,         kDocumentMarker, Byte('x'),
                                     Byte('y'), Byte(','),       2};
  const std::vector<int64_t> doc1 = {1,         kDocumentMarker, Byte('b'),
                                     Byte('%'), Byte('a'),       2};
  const std::vector<int64_t> query = {1, kQueryMarker, Byte('a'), Byte('b'),
                                      2, kMask,        kMask,     kMask};
  EXPECT_EQ(ran[0].token_ids, doc0);
  EXPECT_EQ(ran[1].token_ids, doc1);
  EXPECT_EQ(ran[2].token_ids, query);
  // The query's five real tokens are attended, its mask tokens are not.
  EXPECT_EQ(ran[2].attended_tokens, 5);
  EXPECT_EQ(ran[0].attended_tokens, 0);
  EXPECT_EQ(answer->items[0].truncated_tokens, 3);
  EXPECT_EQ(answer->items[1].truncated_tokens, 0);
  EXPECT_EQ(answer->activation, model::ScoreActivation::kIdentity);
  const std::vector<int64_t> skip = {Byte(','), Byte('%')};
  const double want0 = MaxSimSum(Rows(query), Rows(doc0, skip));
  const double want1 = MaxSimSum(Rows(query), Rows(doc1, skip));
  // Skipping the punctuation changes the score: the check can fail.
  ASSERT_NE(want1, MaxSimSum(Rows(query), Rows(doc1)));
  EXPECT_NEAR(answer->items[0].logits[0], want0, 1e-6);
  EXPECT_NEAR(answer->items[1].logits[0], want1, 1e-6);
}

TEST(Colbert, ExpansionAndAttentionFollowTheFraming) {
  model::ColbertFraming attend = Framing();
  attend.attend_to_expansion = true;
  model::ColbertFraming none = Framing();
  none.query_expansion = false;
  FakeCore fake({}, {Colbert(attend)});
  ASSERT_TRUE(Rerank(fake.core, "ab", {"c"}).ok());
  EXPECT_EQ(fake.model("colbert").ran().back().token_ids.size(), 8u);
  EXPECT_EQ(fake.model("colbert").ran().back().attended_tokens, 0);
  FakeCore plain({}, {Colbert(none)});
  ASSERT_TRUE(Rerank(plain.core, "ab", {"c"}).ok());
  const std::vector<int64_t> query = {1, kQueryMarker, Byte('a'), Byte('b'), 2};
  EXPECT_EQ(plain.model("colbert").ran().back().token_ids, query);
  // A query longer than the framing is cut to it, its end token kept.
  FakeCore cut({}, {Colbert()});
  ASSERT_TRUE(Rerank(cut.core, "abcdefghij", {"c"}).ok());
  const std::vector<int64_t> got = cut.model("colbert").ran().back().token_ids;
  ASSERT_EQ(got.size(), 8u);
  EXPECT_EQ(got[1], kQueryMarker);
  EXPECT_EQ(got.back(), 2);
}

TEST(Colbert, EmbedFramesByInputTypeAndDropsSkiplistRows) {
  FakeCore fake({}, {Colbert()});
  core::EmbedQuery q = TextQuery({"xy, z.", "b%a"});
  q.model = "colbert";
  q.token_embeddings = q.project_tokens = true;
  q.input_type = "document";
  auto docs = Embed(fake.core, q);
  ASSERT_TRUE(docs.ok()) << docs.status();
  const std::vector<int64_t> skip = {Byte(','), Byte('%')};
  const std::vector<std::vector<int64_t>> ids = {
      {1, kDocumentMarker, Byte('x'), Byte('y'), Byte(','), 2},
      {1, kDocumentMarker, Byte('b'), Byte('%'), Byte('a'), 2}};
  for (size_t i = 0; i < 2; ++i) {
    const api::EmbedResult& r = docs->inputs[i].result;
    const auto want = Rows(ids[i], skip);
    ASSERT_EQ(r.tokens.size(), want.size() * 4) << i;
    for (size_t row = 0; row < want.size(); ++row) {
      for (size_t k = 0; k < 4; ++k) {
        EXPECT_EQ(r.tokens[row * 4 + k], static_cast<float>(want[row][k]));
      }
    }
  }
  EXPECT_EQ(docs->inputs[0].truncated_tokens, 3);
  q.input_type = "query";
  q.inputs = {core::EmbedInput::Text("ab")};
  auto queries = Embed(fake.core, q);
  ASSERT_TRUE(queries.ok()) << queries.status();
  EXPECT_EQ(queries->inputs[0].result.tokens.size(), 8u * 4);
  EXPECT_EQ(fake.model("colbert").ran().back().attended_tokens, 5);
}

void ExpectInvalid(const absl::Status& status, const std::string& text) {
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_NE(std::string(status.message()).find(text), std::string::npos)
      << status;
}

TEST(Colbert, RefusesWhatTheFramingCannotServe) {
  FakeModelOptions other;
  other.name = "plain";
  FakeCore fake({}, {Colbert(), other});
  core::ScoreQuery weighted;
  weighted.task = core::ScoreQuery::Task::kRerank;
  weighted.model = "colbert";
  weighted.items = {{"q", "d"}};
  weighted.late_weights = core::ScoreQuery::LateWeights{1, 0, 1};
  absl::Notification done;
  absl::Status status;
  core::Call call;
  call.rpc = "Rerank";
  fake.core.Score(std::move(call), weighted,
                  [&](absl::StatusOr<core::ScoreAnswer> a) {
                    status = a.status();
                    done.Notify();
                  });
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(30)));
  ExpectInvalid(status, "weights are for BGE-M3");

  core::EmbedQuery q = TextQuery({"text"});
  q.model = "colbert";
  q.token_embeddings = q.project_tokens = true;
  ExpectInvalid(Embed(fake.core, q).status(), "set input_type");
  q.input_type = "passage";
  ExpectInvalid(Embed(fake.core, q).status(), "\"query\" or \"document\"");
  q.input_type = "query";
  q.long_input = LongInputPolicy::kChunk;
  ExpectInvalid(Embed(fake.core, q).status(), "not chunked");
  q.long_input.reset();
  q.inputs = {core::EmbedInput::Ids({1, 40, 2})};
  ExpectInvalid(Embed(fake.core, q).status(), "input_type frames text");
  core::EmbedQuery plain = TextQuery({"text"});
  plain.model = "plain";
  plain.input_type = "query";
  ExpectInvalid(Embed(fake.core, plain).status(), "has none");
  // Nothing ran.
  EXPECT_TRUE(fake.model("colbert").ran().empty());
}

}  // namespace
}  // namespace encoder::testing
