// Rerank by late interaction (BGE-M3's compute_score) in the core, on a
// fake model whose outputs are small exact numbers (fake_model.h): which
// sequences run, the score of each document from them as FlagEmbedding
// defines it (recomputed here in double), the weights, and the refusals.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "tests/core/core_test_util.h"

namespace encoder::testing {
namespace {

absl::StatusOr<core::ScoreAnswer> Score(core::Inference& core,
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

core::ScoreQuery RerankQuery(const std::string& query,
                             const std::vector<std::string>& documents) {
  core::ScoreQuery q;
  q.task = core::ScoreQuery::Task::kRerank;
  q.item_field = "documents";
  for (const std::string& d : documents) q.items.push_back({query, d});
  return q;
}

// FlagEmbedding's compute_score from two sequences' outputs: dense dot,
// lexical overlap, mean over the query's token vectors of the best dot.
double Expected(const api::EmbedResult& q, const api::EmbedResult& d, double wd,
                double ws, double wc) {
  double dense = 0;
  for (size_t k = 0; k < q.pooled.size(); ++k)
    dense += q.pooled[k] * d.pooled[k];
  std::map<int32_t, double> doc;
  for (size_t k = 0; k < d.sparse_indices.size(); ++k) {
    doc[d.sparse_indices[k]] = d.sparse_values[k];
  }
  double sparse = 0;
  for (size_t k = 0; k < q.sparse_indices.size(); ++k) {
    auto it = doc.find(q.sparse_indices[k]);
    if (it != doc.end()) sparse += q.sparse_values[k] * it->second;
  }
  const size_t w = static_cast<size_t>(q.dim);
  const size_t qr = q.tokens.size() / w, dr = d.tokens.size() / w;
  double colbert = 0;
  for (size_t i = 0; i < qr; ++i) {
    double best = -std::numeric_limits<double>::infinity();
    for (size_t j = 0; j < dr; ++j) {
      double dot = 0;
      for (size_t k = 0; k < w; ++k) {
        dot += q.tokens[i * w + k] * d.tokens[j * w + k];
      }
      best = std::max(best, dot);
    }
    colbert += best;
  }
  colbert /= static_cast<double>(qr);
  return (wd * dense + ws * sparse + wc * colbert) / (wd + ws + wc);
}

// The core sums in double and returns a float: within float32's rounding
// of the double value (the fake's pooled vectors are large).
double Tol(double expected) { return 1e-6 * std::max(1.0, std::abs(expected)); }

FakeModelOptions Late(bool sparse = true) {
  FakeModelOptions o;
  o.max_positions = 64;
  o.late_interaction = true;
  o.late_sparse = sparse;
  return o;
}

const std::vector<std::string> kDocuments = {"abcd", "query text", "zzzz yy",
                                             "q"};

TEST(LateInteraction, ScoresEachDocumentFromItsOwnSequence) {
  FakeCore fake({}, {Late()});
  auto answer = Score(fake.core, RerankQuery("query", kDocuments));
  ASSERT_TRUE(answer.ok()) << answer.status();
  // The documents alone, in order, then the query; each asks for the
  // pooled, projected token and sparse outputs, and no head.
  const std::vector<api::EmbedSpec> ran = fake.model().ran();
  ASSERT_EQ(ran.size(), kDocuments.size() + 1);
  for (const api::EmbedSpec& s : ran) {
    EXPECT_TRUE(s.want_tokens && s.project_tokens && s.want_sparse);
    EXPECT_FALSE(s.want_scores);
  }
  const api::EmbedResult q = FakeModel::Compute(ran.back());
  ASSERT_EQ(answer->items.size(), kDocuments.size());
  EXPECT_EQ(answer->activation, model::ScoreActivation::kIdentity);
  for (size_t i = 0; i < kDocuments.size(); ++i) {
    const api::EmbedResult d = FakeModel::Compute(ran[i]);
    ASSERT_EQ(answer->items[i].logits.size(), 1u);
    const double want = Expected(q, d, 1, 1, 1);
    EXPECT_NEAR(answer->items[i].logits[0], want, Tol(want)) << kDocuments[i];
    EXPECT_EQ(answer->items[i].tokens, static_cast<int64_t>(d.num_tokens));
  }
  // The ranking is the scores' order.
  const auto ranked = core::RankItems(*answer, /*raw=*/false, 0);
  for (size_t k = 1; k < ranked.size(); ++k) {
    EXPECT_GE(ranked[k - 1].score, ranked[k].score);
  }
}

TEST(LateInteraction, WeighsTheThreeScoresAsAsked) {
  FakeCore fake({}, {Late()});
  core::ScoreQuery query = RerankQuery("query", kDocuments);
  query.late_weights = core::ScoreQuery::LateWeights{0.4f, 0.2f, 0.4f};
  auto answer = Score(fake.core, query);
  ASSERT_TRUE(answer.ok()) << answer.status();
  const std::vector<api::EmbedSpec> ran = fake.model().ran();
  const api::EmbedResult q = FakeModel::Compute(ran.back());
  for (size_t i = 0; i < kDocuments.size(); ++i) {
    const double want = Expected(q, FakeModel::Compute(ran[i]), 0.4, 0.2, 0.4);
    EXPECT_NEAR(answer->items[i].logits[0], want, Tol(want));
  }
  // Sparse weighed 0: the sparse vectors are not computed.
  FakeCore dense_only({}, {Late()});
  query.late_weights = core::ScoreQuery::LateWeights{1, 0, 1};
  ASSERT_TRUE(Score(dense_only.core, query).ok());
  for (const api::EmbedSpec& s : dense_only.model().ran()) {
    EXPECT_FALSE(s.want_sparse);
  }
}

TEST(LateInteraction, WithoutASparseHeadTheDefaultLeavesSparseOut) {
  FakeCore fake({}, {Late(/*sparse=*/false)});
  auto answer = Score(fake.core, RerankQuery("query", kDocuments));
  ASSERT_TRUE(answer.ok()) << answer.status();
  const std::vector<api::EmbedSpec> ran = fake.model().ran();
  const api::EmbedResult q = FakeModel::Compute(ran.back());
  for (size_t i = 0; i < kDocuments.size(); ++i) {
    EXPECT_FALSE(ran[i].want_sparse);
    const double want = Expected(q, FakeModel::Compute(ran[i]), 1, 0, 1);
    EXPECT_NEAR(answer->items[i].logits[0], want, Tol(want));
  }
  core::ScoreQuery query = RerankQuery("query", kDocuments);
  query.late_weights = core::ScoreQuery::LateWeights{1, 1, 1};
  auto refused = Score(fake.core, query);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("no sparse head"),
            std::string::npos)
      << refused.status();
}

TEST(LateInteraction, RefusesWeightsOutOfRangeAndProbes) {
  FakeCore fake({}, {Late()});
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (const core::ScoreQuery::LateWeights& w :
       std::vector<core::ScoreQuery::LateWeights>{
           {0, 0, 0}, {1, -1, 1}, {nan, 1, 1}}) {
    core::ScoreQuery query = RerankQuery("query", kDocuments);
    query.late_weights = w;
    EXPECT_EQ(Score(fake.core, query).status().code(),
              absl::StatusCode::kInvalidArgument);
  }
  core::ScoreQuery probes = RerankQuery("query", kDocuments);
  probes.positional_probes = true;
  EXPECT_EQ(Score(fake.core, probes).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(fake.model().ran().empty());
}

// An explanation is the alignment: every query token vector's product
// with every document token vector, named by their tokens.
TEST(LateInteraction, ExplainsByTokenSimilarity) {
  FakeCore fake({}, {Late()});
  core::ScoreQuery query = RerankQuery("query", kDocuments);
  query.attention_layers = {0};
  auto answer = Score(fake.core, query);
  ASSERT_TRUE(answer.ok()) << answer.status();
  EXPECT_TRUE(answer->token_similarity);
  const std::vector<api::EmbedSpec> ran = fake.model().ran();
  const api::EmbedResult q = FakeModel::Compute(ran.back());
  const size_t w = FakeModel::kWidth;
  const size_t qr = q.tokens.size() / w;
  for (size_t i = 0; i < kDocuments.size(); ++i) {
    SCOPED_TRACE(kDocuments[i]);
    const api::EmbedResult d = FakeModel::Compute(ran[i]);
    const size_t dr = d.tokens.size() / w;
    const core::ScoredItem& item = answer->items[i];
    ASSERT_EQ(item.pair_attention_shape,
              (std::vector<int64_t>{1, static_cast<int64_t>(qr),
                                    static_cast<int64_t>(dr)}));
    ASSERT_EQ(item.pair_attention.size(), qr * dr);
    // The byte tokenizer names each byte; the rows are the tokens after
    // the first.
    EXPECT_EQ(item.first_tokens.size(), qr);
    EXPECT_EQ(item.second_tokens.size(), dr);
    for (size_t a = 0; a < qr; ++a) {
      for (size_t b = 0; b < dr; ++b) {
        double dot = 0;
        for (size_t k = 0; k < w; ++k) {
          dot += q.tokens[a * w + k] * d.tokens[b * w + k];
        }
        EXPECT_NEAR(item.pair_attention[a * dr + b], dot, 1e-6);
      }
    }
  }
}

TEST(LateInteraction, WeightsOnAModelThatDoesNotRankSoAreRefused) {
  FakeCore fake;  // embed only
  core::ScoreQuery query = RerankQuery("query", kDocuments);
  query.late_weights = core::ScoreQuery::LateWeights{1, 1, 1};
  EXPECT_EQ(Score(fake.core, query).status().code(),
            absl::StatusCode::kFailedPrecondition);
  core::ScoreQuery classify = query;
  classify.task = core::ScoreQuery::Task::kClassify;
  EXPECT_FALSE(Score(fake.core, classify).ok());
}

}  // namespace
}  // namespace encoder::testing
