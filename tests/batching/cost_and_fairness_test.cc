// Batches budgeted by cost, requests interleaved by rank, and the memory
// budget the batchers share.
#include <atomic>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/batching/batch_policy.h"
#include "server/batching/memory_budget.h"

namespace encoder::batching {
namespace {

using ::testing::ElementsAre;

const absl::Time kStart = absl::FromUnixSeconds(1'000'000);
// Every sequence below has waited its max_queue_delay (zero) by then.
const absl::Time kNow = kStart + absl::Hours(1);

QueuedSequence Seq(int64_t length, int64_t rank, SequenceCost cost = {},
                   int64_t share = 0) {
  static int n = 0;
  return {length, kStart + absl::Milliseconds(n++), cost, rank, share};
}

BatchOptions Options(int64_t max_sequences, int64_t max_tokens) {
  BatchOptions o;
  o.max_batch_sequences = max_sequences;
  o.max_batch_tokens = max_tokens;
  o.group_by_length = false;
  return o;
}

TEST(SequenceCostTest, IsLinearPlusQuadraticAndSaturates) {
  EXPECT_EQ((SequenceCost{10, 3}).At(4), 10 * 4 + 3 * 16);
  EXPECT_EQ((SequenceCost{0, 0}).At(1000), 0);
  EXPECT_EQ((SequenceCost{1, INT64_MAX / 2}).At(1 << 20), INT64_MAX);
}

TEST(FairShareTest, ASmallRequestJoinsTheNextBatchOfALargeOne) {
  // One request of 6 sequences (ranks 0..5), then a 1-sequence request.
  std::vector<QueuedSequence> queue;
  for (int r = 0; r < 6; ++r) queue.push_back(Seq(100, r));
  queue.push_back(Seq(1, 0));
  BatchOptions o = Options(3, 100000);
  EXPECT_THAT(DecideBatch(queue, o, kNow).take, ElementsAre(0, 1, 6));
  o.fair_share = false;  // strict arrival order: the small one waits
  EXPECT_THAT(DecideBatch(queue, o, kNow).take, ElementsAre(0, 1, 2));
}

TEST(FairShareTest, TheLeastServedRequestAnchorsTheBatch) {
  // A large request served 40 sequences so far; a small one arrived at
  // virtual time 39. With one sequence per batch the small one goes next.
  std::vector<QueuedSequence> queue;
  for (int r = 0; r < 5; ++r) queue.push_back(Seq(100, r, {}, 40));
  queue.push_back(Seq(3, 0, {}, 39));
  BatchOptions o = Options(1, 100000);
  const BatchDecision d = DecideBatch(queue, o, kNow);
  EXPECT_THAT(d.take, ElementsAre(5));
  EXPECT_EQ(d.anchor, 5u);
  // Equal shares: the older head wins, so the small one waits one batch.
  queue.back().share = 40;
  EXPECT_THAT(DecideBatch(queue, o, kNow).take, ElementsAre(0));
  o.fair_share = false;  // arrival order: the oldest, whatever its share
  queue.back().share = 0;
  EXPECT_THAT(DecideBatch(queue, o, kNow).take, ElementsAre(0));
}

TEST(FairShareTest, OtherRequestsOldestSequencesComeFirst) {
  // Requests A (3 seqs), B (2 seqs), C (1 seq), queued in that order.
  std::vector<QueuedSequence> queue = {Seq(8, 0), Seq(8, 1), Seq(8, 2),
                                       Seq(8, 0), Seq(8, 1), Seq(8, 0)};
  EXPECT_THAT(DecideBatch(queue, Options(4, 100000), kNow).take,
              ElementsAre(0, 1, 3, 5));
}

TEST(BatchCostTest, MembersStopAtTheCostLimitAtThePaddedLength) {
  // Each costs 10 L + L^2 at padded length L: 200 at 10, 1200 at 30.
  const SequenceCost c{10, 1};
  std::vector<QueuedSequence> queue = {Seq(10, 0, c), Seq(10, 0, c),
                                       Seq(30, 0, c), Seq(10, 0, c)};
  BatchOptions o = Options(8, 100000);
  o.max_batch_cost_bytes = 3 * 200 + 50;  // three of length 10 fit
  // The 30-long one would pad all to 30 (1000 each): skipped, and the
  // batch is full.
  EXPECT_THAT(DecideBatch(queue, o, kNow).take, ElementsAre(0, 1, 3));
  o.max_batch_cost_bytes = 0;  // no limit
  EXPECT_THAT(DecideBatch(queue, o, kNow).take, ElementsAre(0, 1, 2, 3));
}

TEST(BatchCostTest, ASequenceOverTheLimitStillRunsAlone) {
  std::vector<QueuedSequence> queue = {Seq(50, 0, {0, 10}), Seq(1, 0, {})};
  BatchOptions o = Options(8, 100000);
  o.max_batch_cost_bytes = 100;
  const BatchDecision d = DecideBatch(queue, o, kNow);
  EXPECT_THAT(d.take, ElementsAre(0));
  // Once it has run, the next one is free to go.
  queue.erase(queue.begin());
  EXPECT_THAT(DecideBatch(queue, o, kNow).take, ElementsAre(0));
}

TEST(MemoryBudgetTest, HoldersNeverExceedTheCapacity) {
  MemoryBudget budget(100);
  std::atomic<int64_t> peak{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        const int64_t bytes = 30 + 10 * t;  // 30..60: at most 3 fit
        budget.Acquire(bytes);
        const int64_t now = budget.held();
        int64_t seen = peak.load();
        while (now > seen && !peak.compare_exchange_weak(seen, now)) {
        }
        std::this_thread::yield();
        budget.Release(bytes);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_LE(peak.load(), 100);
  EXPECT_GE(peak.load(), 30);
  EXPECT_EQ(budget.held(), 0);
}

TEST(MemoryBudgetTest, AnOversizedRequestWaitsUntilItIsAlone) {
  MemoryBudget budget(100);
  budget.Acquire(40);
  std::atomic<bool> got{false};
  std::thread big([&] {
    budget.Acquire(500);
    got = true;
    budget.Release(500);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(got.load());
  budget.Release(40);
  big.join();
  EXPECT_TRUE(got.load());
  EXPECT_EQ(budget.held(), 0);
}

TEST(MemoryLimitTest, DetectsAPositiveLimitAndNamesItsSource) {
  std::string source;
  const int64_t limit = DetectMemoryLimit(&source);
  EXPECT_GT(limit, int64_t{64} << 20);
  EXPECT_FALSE(source.empty());
}

}  // namespace
}  // namespace encoder::batching
