// The core's admission and limits, on fake models: loading, draining,
// unknown models, inputs per request, the send limit, the unread-response
// ledger, the batch memory budget, the queue bound, deadlines and
// cancellation. Each refusal comes before the model is asked to run.
#include <gtest/gtest.h>

#include <atomic>

#include "absl/strings/match.h"
#include "tests/core/core_test_util.h"

namespace encoder::testing {
namespace {

TEST(CoreAdmission, CallsWaitForTheModelsThenRunOnThem) {
  metrics::NoopMetrics metrics;
  core::Inference core(&metrics, {}, {});
  auto loading = Embed(core, IdsQuery({{5, 6, 7}}));
  EXPECT_EQ(loading.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(absl::StrContains(loading.status().message(), "loading"))
      << loading.status();

  FakeCatalog catalog;
  core.SetHost(&catalog);
  auto answer = Embed(core, IdsQuery({{5, 6, 7}, {9}}));
  ASSERT_TRUE(answer.ok()) << answer.status();
  EXPECT_EQ(answer->model, "fake");
  ASSERT_EQ(answer->inputs.size(), 2u);
  // [tokens, sum, first, last]: the ids reached the model as sent.
  EXPECT_EQ(answer->inputs[0].result.pooled, (std::vector<float>{3, 18, 5, 7}));
  EXPECT_EQ(answer->inputs[1].result.pooled, (std::vector<float>{1, 9, 9, 9}));
  EXPECT_EQ(answer->total_tokens, 4);
}

TEST(CoreAdmission, DrainingRefusesNewCallsAndFinishesAcceptedOnes) {
  FakeCore f;
  f.model().CloseGate();
  PendingEmbed accepted(f.core, IdsQuery({{5, 6}}));
  f.core.StartDraining();
  auto refused = Embed(f.core, IdsQuery({{5, 6}}));
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(absl::StrContains(refused.status().message(), "shutting down"))
      << refused.status();
  EXPECT_FALSE(accepted.done());
  f.model().OpenGate();
  auto answer = accepted.Wait();
  ASSERT_TRUE(answer.ok()) << answer.status();
  EXPECT_EQ(answer->inputs[0].result.pooled, (std::vector<float>{2, 11, 5, 6}));
}

TEST(CoreAdmission, AnUnhealthyProcessStillServesAndSaysWhy) {
  FakeCore f;
  EXPECT_EQ(f.core.unhealthy(), "");
  f.core.MarkUnhealthy("the http port stopped accepting connections");
  f.core.MarkUnhealthy("a second reason does not replace the first");
  EXPECT_EQ(f.core.unhealthy(), "the http port stopped accepting connections");
  EXPECT_TRUE(Embed(f.core, IdsQuery({{5}})).ok());
}

TEST(CoreAdmission, UnknownModelIsNotFoundAndNamesTheServedOnes) {
  FakeCore f({}, {{.name = "a"}, {.name = "b"}});
  auto answer = Embed(f.core, IdsQuery({{5}}, "c"));
  EXPECT_EQ(answer.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(absl::StrContains(answer.status().message(), "\"c\""))
      << answer.status();
  auto b = Embed(f.core, IdsQuery({{5}}, "b"));
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->model, "b");
  EXPECT_EQ(f.model("a").calls(), 0);
  EXPECT_EQ(f.model("b").calls(), 1);
}

TEST(CoreAdmission, InputsPerRequestAreBounded) {
  core::ServiceLimits limits;
  limits.max_inputs_per_request = 2;
  FakeCore f(limits);
  EXPECT_TRUE(Embed(f.core, IdsQuery({{5}, {6}})).ok());
  auto over = Embed(f.core, IdsQuery({{5}, {6}, {7}}));
  EXPECT_EQ(over.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(over.status().message(), "at most 2"))
      << over.status();
  EXPECT_EQ(f.model().calls(), 1);
}

TEST(CoreAdmission, EmptyRequestsAndInputsAreRefused) {
  FakeCore f;
  EXPECT_EQ(Embed(f.core, IdsQuery({})).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Embed(f.core, IdsQuery({{5}, {}})).status().code(),
            absl::StatusCode::kInvalidArgument);
  auto outside = Embed(f.core, IdsQuery({{5, 100000}}));
  EXPECT_EQ(outside.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(outside.status().message(), "inputs[0]"))
      << outside.status();
  EXPECT_EQ(f.model().calls(), 0);
}

TEST(CoreAdmission, AResponseOverTheSendLimitIsRefusedBeforeItRuns) {
  core::ServiceLimits limits;
  limits.max_send_message_bytes = 64;
  FakeCore f(limits);
  core::EmbedQuery q = IdsQuery({{5}, {6}, {7}, {8}});
  q.token_embeddings = true;
  auto over = Embed(f.core, q);
  EXPECT_EQ(over.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(f.model().calls(), 0);
}

TEST(CoreAdmission, APeerWithUnreadResponsesIsRefusedOthersAreNot) {
  core::ServiceLimits limits;
  limits.unread.per_connection_bytes = 1000;
  FakeCore f(limits);
  core::Call slow;
  slow.peer = "ipv4:10.0.0.1:1";
  {
    core::UnreadResponses::Hold unread = f.core.HoldUnread(slow.peer, 5000);
    auto refused = Embed(f.core, IdsQuery({{5}}), slow);
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
    core::Call other;
    other.peer = "ipv4:10.0.0.2:1";
    EXPECT_TRUE(Embed(f.core, IdsQuery({{5}}), other).ok());
  }
  // Read: the peer is admitted again.
  EXPECT_TRUE(Embed(f.core, IdsQuery({{5}}), slow).ok());
}

TEST(CoreAdmission, AnInputOverTheBatchMemoryBudgetIsRefusedByName) {
  FakeCore f({}, {{.bytes_per_token = 1000, .max_batch_cost_bytes = 5000}});
  EXPECT_TRUE(Embed(f.core, IdsQuery({{5, 6, 7, 8}})).ok());
  auto over = Embed(f.core, IdsQuery({{5}, Ids(8)}));
  EXPECT_EQ(over.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(
      absl::StrContains(over.status().message(), "inputs[1] (8 tokens)"))
      << over.status();
  EXPECT_EQ(f.model().calls(), 1);
}

TEST(CoreAdmission, AFullQueueRefusesAtOnce) {
  FakeCore f({}, {{.max_queued = 2}});
  f.model().CloseGate();
  PendingEmbed first(f.core, IdsQuery({{5}, {6}}));
  auto refused = Embed(f.core, IdsQuery({{7}}));
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  f.model().OpenGate();
  EXPECT_TRUE(first.Wait().ok());
}

TEST(CoreAdmission, DeadlinesAndCancellationEndQueuedWork) {
  FakeCore f;
  f.model().CloseGate();
  core::Call late;
  late.deadline = absl::Now() + absl::Milliseconds(20);
  PendingEmbed expired(f.core, IdsQuery({{5}}), late);
  std::atomic<bool> cancelled{false};
  core::Call cancellable;
  cancellable.is_cancelled = [&cancelled] { return cancelled.load(); };
  PendingEmbed gone(f.core, IdsQuery({{6}}), cancellable);
  absl::SleepFor(absl::Milliseconds(50));
  cancelled = true;
  f.model().OpenGate();
  EXPECT_EQ(expired.Wait().status().code(),
            absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(gone.Wait().status().code(), absl::StatusCode::kCancelled);
  EXPECT_TRUE(f.model().ran().empty());
}

}  // namespace
}  // namespace encoder::testing
