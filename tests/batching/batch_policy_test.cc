#include "server/batching/batch_policy.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace encoder::batching {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

const absl::Time kStart = absl::FromUnixSeconds(1'000'000);

// A queue of the given lengths, enqueued one millisecond apart from kStart.
std::vector<QueuedSequence> Queue(const std::vector<int64_t>& lengths) {
  std::vector<QueuedSequence> queue;
  for (size_t i = 0; i < lengths.size(); ++i) {
    QueuedSequence q;
    q.length = lengths[i];
    q.enqueued = kStart + absl::Milliseconds(i);
    queue.push_back(q);
  }
  return queue;
}

BatchOptions Options(int64_t max_sequences, int64_t max_tokens,
                     absl::Duration delay, bool group) {
  BatchOptions options;
  options.max_batch_sequences = max_sequences;
  options.max_batch_tokens = max_tokens;
  options.max_queue_delay = delay;
  options.group_by_length = group;
  return options;
}

int64_t PaddedTokens(const std::vector<QueuedSequence>& queue,
                     const std::vector<size_t>& take) {
  int64_t longest = 0;
  for (size_t i : take) longest = std::max(longest, queue[i].length);
  return longest * static_cast<int64_t>(take.size());
}

TEST(DecideBatchTest, EmptyQueueWaitsForever) {
  const BatchDecision d =
      DecideBatch({}, Options(8, 1000, absl::Milliseconds(5), true), kStart);
  EXPECT_THAT(d.take, IsEmpty());
  EXPECT_EQ(d.wake_at, absl::InfiniteFuture());
}

TEST(DecideBatchTest, SingleSequenceWithZeroDelayRunsAtOnce) {
  const BatchDecision d = DecideBatch(
      Queue({7}), Options(8, 1000, absl::ZeroDuration(), true), kStart);
  EXPECT_THAT(d.take, ElementsAre(0u));
}

TEST(DecideBatchTest, AloneItemAtTheHeadRunsAtOnceWithoutCompany) {
  std::vector<QueuedSequence> queue = Queue({5, 5, 5});
  queue[0].alone = true;
  const BatchDecision d =
      DecideBatch(queue, Options(8, 1000, absl::Hours(1), true), kStart);
  EXPECT_THAT(d.take, ElementsAre(0u));
  EXPECT_EQ(d.anchor, 0u);
}

TEST(DecideBatchTest, AloneItemIsLeftOutAndTheBatchDoesNotWait) {
  std::vector<QueuedSequence> queue = Queue({5, 5, 5});
  queue[1].alone = true;
  // Without it the two others would wait an hour for company.
  const BatchDecision d =
      DecideBatch(queue, Options(8, 1000, absl::Hours(1), true), kStart);
  EXPECT_THAT(d.take, ElementsAre(0u, 2u));
}

TEST(DecideBatchTest, ZeroDelayTakesEverythingThatFits) {
  const BatchDecision d = DecideBatch(
      Queue({3, 4, 5}), Options(8, 1000, absl::ZeroDuration(), true),
      kStart + absl::Milliseconds(2));
  EXPECT_THAT(d.take, ElementsAre(0u, 1u, 2u));
}

TEST(DecideBatchTest, WaitsUntilOldestEnqueuedPlusDelay) {
  const auto queue = Queue({7, 8});
  const BatchOptions options = Options(8, 1000, absl::Milliseconds(50), true);
  const absl::Time due = kStart + absl::Milliseconds(50);

  BatchDecision d = DecideBatch(queue, options, kStart + absl::Milliseconds(3));
  EXPECT_THAT(d.take, IsEmpty());
  EXPECT_EQ(d.wake_at, due);  // the oldest's, not the newest's

  d = DecideBatch(queue, options, due - absl::Nanoseconds(1));
  EXPECT_THAT(d.take, IsEmpty());
  EXPECT_EQ(d.wake_at, due);

  d = DecideBatch(queue, options, due);
  EXPECT_THAT(d.take, ElementsAre(0u, 1u));
}

TEST(DecideBatchTest, InfiniteDelayWaitsForArrivalsOnly) {
  const BatchDecision d =
      DecideBatch(Queue({7}), Options(8, 1000, absl::InfiniteDuration(), true),
                  kStart + absl::Hours(24));
  EXPECT_THAT(d.take, IsEmpty());
  EXPECT_EQ(d.wake_at, absl::InfiniteFuture());
}

TEST(DecideBatchTest, FullByCountRunsWithoutWaiting) {
  const BatchOptions options = Options(3, 1000, absl::Hours(1), false);
  BatchDecision d = DecideBatch(Queue({5, 5, 5}), options, kStart);
  EXPECT_THAT(d.take, ElementsAre(0u, 1u, 2u));

  d = DecideBatch(Queue({5, 5, 5, 5, 5}), options, kStart);
  EXPECT_THAT(d.take, ElementsAre(0u, 1u, 2u));
}

TEST(DecideBatchTest, MaxOneSequenceTakesOnlyTheOldest) {
  const BatchDecision d = DecideBatch(
      Queue({5, 5, 5}), Options(1, 1000, absl::Hours(1), true), kStart);
  EXPECT_THAT(d.take, ElementsAre(0u));
}

TEST(DecideBatchTest, TokenLimitCountsLongestTimesCount) {
  // 10 x 2 = 20 fits in 25; 10 x 3 = 30 does not, though the sum (14) would.
  const BatchDecision d = DecideBatch(
      Queue({10, 2, 2}), Options(8, 25, absl::ZeroDuration(), false), kStart);
  EXPECT_THAT(d.take, ElementsAre(0u, 1u));
}

TEST(DecideBatchTest, TokenLimitRespectedAcrossManyQueues) {
  for (int64_t max_tokens : {16, 40, 64, 100}) {
    for (bool group : {false, true}) {
      std::vector<int64_t> lengths;
      for (int i = 0; i < 40; ++i) lengths.push_back(1 + (i * 7) % 15);
      const auto queue = Queue(lengths);
      const BatchDecision d = DecideBatch(
          queue, Options(16, max_tokens, absl::ZeroDuration(), group), kStart);
      ASSERT_FALSE(d.take.empty());
      EXPECT_EQ(d.take.front(), 0u);
      EXPECT_LE(d.take.size(), 16u);
      EXPECT_LE(PaddedTokens(queue, d.take), max_tokens)
          << "max_tokens=" << max_tokens << " group=" << group;
    }
  }
}

TEST(DecideBatchTest, FullByTokensRunsWithoutWaiting) {
  // 3 x 10 = 30 reaches the limit exactly.
  BatchDecision d = DecideBatch(Queue({10, 10, 10}),
                                Options(8, 30, absl::Hours(1), true), kStart);
  EXPECT_THAT(d.take, ElementsAre(0u, 1u, 2u));

  // More is queued than one batch can carry: no point in waiting.
  d = DecideBatch(Queue({10, 12}), Options(8, 22, absl::Hours(1), true),
                  kStart);
  EXPECT_THAT(d.take, ElementsAre(0u));
}

TEST(DecideBatchTest, UnderfullBatchWaits) {
  const BatchDecision d = DecideBatch(
      Queue({10, 10}), Options(8, 30, absl::Seconds(1), true), kStart);
  EXPECT_THAT(d.take, IsEmpty());
  EXPECT_EQ(d.wake_at, kStart + absl::Seconds(1));
}

TEST(DecideBatchTest, OversizeSingleSequenceRunsAlone) {
  const BatchDecision d = DecideBatch(
      Queue({100, 5, 5}), Options(8, 50, absl::Hours(1), true), kStart);
  EXPECT_THAT(d.take, ElementsAre(0u));
}

TEST(DecideBatchTest, OversizeSequenceBehindOthersWaitsItsTurn) {
  const BatchDecision d = DecideBatch(
      Queue({5, 100, 5}), Options(8, 50, absl::ZeroDuration(), true), kStart);
  EXPECT_THAT(d.take, ElementsAre(0u, 2u));
}

TEST(DecideBatchTest, GroupingPicksSimilarLengths) {
  const BatchDecision d =
      DecideBatch(Queue({10, 50, 11, 49, 9, 30}),
                  Options(3, 1000, absl::ZeroDuration(), true), kStart);
  EXPECT_THAT(d.take, ElementsAre(0u, 2u, 4u));
}

TEST(DecideBatchTest, GroupingAlwaysIncludesTheOldest) {
  const BatchDecision d =
      DecideBatch(Queue({100, 5, 5, 5, 5}),
                  Options(2, 1000, absl::ZeroDuration(), true), kStart);
  ASSERT_EQ(d.take.size(), 2u);
  EXPECT_EQ(d.take[0], 0u);
}

TEST(DecideBatchTest, GroupingBreaksTiesByAge) {
  // 12 and 8 are equally close to 10: the older one (index 1) wins.
  BatchDecision d = DecideBatch(
      Queue({10, 12, 8}), Options(2, 1000, absl::ZeroDuration(), true), kStart);
  EXPECT_THAT(d.take, ElementsAre(0u, 1u));
  d = DecideBatch(Queue({10, 8, 12}),
                  Options(2, 1000, absl::ZeroDuration(), true), kStart);
  EXPECT_THAT(d.take, ElementsAre(0u, 1u));
}

TEST(DecideBatchTest, GroupingSkipsWhatDoesNotFitAndKeepsLooking) {
  // 14 is closest to 10 but 14 x 2 = 28 > 25; 4 is further and fits.
  const BatchDecision d = DecideBatch(
      Queue({10, 14, 4}), Options(8, 25, absl::ZeroDuration(), true), kStart);
  EXPECT_THAT(d.take, ElementsAre(0u, 2u));
}

TEST(DecideBatchTest, ArrivalOrderWhenGroupingOff) {
  const BatchDecision d =
      DecideBatch(Queue({10, 50, 11, 49, 9, 30}),
                  Options(3, 1000, absl::ZeroDuration(), false), kStart);
  EXPECT_THAT(d.take, ElementsAre(0u, 1u, 2u));
}

TEST(DecideBatchTest, ResultIndicesAreOldestFirst) {
  // Grouping visits 3 (length 20) before 1 (length 26); the result is sorted.
  const BatchDecision d =
      DecideBatch(Queue({20, 26, 40, 20, 90}),
                  Options(3, 1000, absl::ZeroDuration(), true), kStart);
  EXPECT_THAT(d.take, ElementsAre(0u, 1u, 3u));
  EXPECT_TRUE(std::is_sorted(d.take.begin(), d.take.end()));
}

TEST(DecideBatchTest, NonPositiveLimitsStillRunTheOldest) {
  const BatchDecision d =
      DecideBatch(Queue({4, 4}), Options(0, 0, absl::Hours(1), true), kStart);
  EXPECT_THAT(d.take, ElementsAre(0u));
}

// 1/executions of any limit makes a batch worth running beside others.
TEST(WorthAnotherExecutionTest, HalfOfAnyLimitWithTwoExecutions) {
  BatchOptions o = Options(8, 1000, absl::ZeroDuration(), true);
  o.executions = 2;
  auto worth = [&](const std::vector<int64_t>& lengths) {
    const std::vector<QueuedSequence> queue = Queue(lengths);
    const BatchDecision d = DecideBatch(queue, o, kStart);
    return WorthAnotherExecution(queue, d, o);
  };
  EXPECT_FALSE(worth({5, 5, 5}));    // 3 of 8 sequences, 15 of 1000 tokens
  EXPECT_TRUE(worth({5, 5, 5, 5}));  // 4 of 8 sequences
  EXPECT_TRUE(worth({500}));         // 500 of 1000 padded tokens
  EXPECT_FALSE(worth({499}));
  o.executions = 1;  // one execution: any batch
  EXPECT_TRUE(worth({5}));
  o.executions = 4;  // a quarter
  EXPECT_TRUE(worth({5, 5}));
  EXPECT_FALSE(worth({5}));
  // The length cap and the cost limit count as well.
  o.executions = 2;
  o.length_caps = {{5, 2}};  // 2 sequences of 5 tokens
  EXPECT_TRUE(worth({5}));
  o.length_caps.clear();
  o.max_batch_cost_bytes = 100;
  std::vector<QueuedSequence> costly = Queue({5});
  costly[0].cost.per_token = 10;  // 50 of 100 bytes
  EXPECT_TRUE(WorthAnotherExecution(costly, DecideBatch(costly, o, kStart), o));
  costly[0].cost.per_token = 9;
  EXPECT_FALSE(
      WorthAnotherExecution(costly, DecideBatch(costly, o, kStart), o));
  // Nothing to run is never worth it; an alone item always is.
  EXPECT_FALSE(WorthAnotherExecution({}, BatchDecision{}, o));
  std::vector<QueuedSequence> alone = Queue({5});
  alone[0].alone = true;
  EXPECT_TRUE(WorthAnotherExecution(alone, DecideBatch(alone, o, kStart), o));
}

// Several executions: even shares of the work, and no small batch beside
// a running one.
TEST(DecideNextBatchTest, EvenSharesAndNoSmallBatchBesideARunningOne) {
  BatchOptions o = Options(32, 16384, absl::ZeroDuration(), false);
  o.executions = 2;
  const std::vector<QueuedSequence> burst = Queue(std::vector<int64_t>(32, 4));
  // A burst of 32 on an idle model: 16 now, the other 16 for the other.
  EXPECT_EQ(DecideNextBatch(burst, o, kStart, {}).take.size(), 16u);
  const std::vector<QueuedSequence> half = Queue(std::vector<int64_t>(16, 4));
  EXPECT_EQ(DecideNextBatch(half, o, kStart, {1, 16}).take.size(), 16u);
  // 30 queued beside a running batch of 2: an even 16, not all 30.
  const std::vector<QueuedSequence> many = Queue(std::vector<int64_t>(30, 4));
  EXPECT_EQ(DecideNextBatch(many, o, kStart, {1, 2}).take.size(), 16u);
  // Three beside a running batch: under half a batch, so they wait for it.
  const std::vector<QueuedSequence> few = Queue({4, 4, 4});
  const BatchDecision wait = DecideNextBatch(few, o, kStart, {1, 16});
  EXPECT_THAT(wait.take, IsEmpty());
  EXPECT_EQ(wait.wake_at, absl::InfiniteFuture());
  // The same three on an idle model run at once, not split below what is
  // worth an execution.
  EXPECT_EQ(DecideNextBatch(few, o, kStart, {}).take.size(), 3u);
  // One execution: DecideBatch's decision.
  o.executions = 1;
  EXPECT_EQ(DecideNextBatch(burst, o, kStart, {}).take.size(), 32u);
}

// Sequences of the given lengths, each costing `per_token` compute units
// per token, under a rate of 1000 units/s and a 250 ms bound.
std::vector<QueuedSequence> TimedQueue(const std::vector<int64_t>& lengths,
                                       int64_t per_token) {
  std::vector<QueuedSequence> queue = Queue(lengths);
  for (QueuedSequence& q : queue) q.compute.per_token = per_token;
  return queue;
}

BatchOptions Timed(int executions) {
  BatchOptions options = Options(32, 1 << 20, absl::ZeroDuration(), false);
  options.max_batch_time = absl::Milliseconds(250);
  options.work_per_second = 1000;
  options.executions = executions;
  return options;
}

TEST(BatchTimeTest, ExpectedTimeBoundsTheBatch) {
  // 10 tokens x 10 units = 100 units = 0.1 s each: two fit in 250 ms.
  const auto queue = TimedQueue({10, 10, 10, 10}, 10);
  EXPECT_THAT(DecideBatch(queue, Timed(1), kStart).take, ElementsAre(0, 1));
  // Unknown rate: no time bound.
  BatchOptions unknown = Timed(1);
  unknown.work_per_second = 0;
  EXPECT_THAT(DecideBatch(queue, unknown, kStart).take,
              ElementsAre(0, 1, 2, 3));
  // No bound.
  BatchOptions unbounded = Timed(1);
  unbounded.max_batch_time = absl::ZeroDuration();
  EXPECT_THAT(DecideBatch(queue, unbounded, kStart).take,
              ElementsAre(0, 1, 2, 3));
}

TEST(BatchTimeTest, ASequenceOverTheBoundRunsAloneAndLongPastFourTimesIt) {
  // 300 units: 0.3 s, over the bound but not long; 1100 units: long.
  const auto queue = TimedQueue({30, 30}, 10);
  EXPECT_THAT(DecideBatch(queue, Timed(1), kStart).take, ElementsAre(0));
  EXPECT_FALSE(IsLongBatch(300, Timed(1)));
  EXPECT_TRUE(IsLongBatch(1100, Timed(1)));
  EXPECT_FALSE(IsLongBatch(1000, Timed(1)));  // exactly 4 x 250 ms
  EXPECT_EQ(ExpectedTime(500, Timed(1)), absl::Milliseconds(500));
}

TEST(BatchTimeTest, LongBatchNeverTakesTheLastFreeExecution) {
  // Two long sequences (2 s each) of one request, then a short one.
  std::vector<QueuedSequence> queue = TimedQueue({200, 200, 1}, 10);
  queue[1].rank = 1;
  queue[2].share = 5;  // served more, so the long request anchors
  const BatchOptions options = Timed(2);
  const absl::Time now = kStart + absl::Seconds(1);  // all have arrived
  RunningBatches none;
  EXPECT_THAT(DecideNextBatch(queue, options, now, none).take, ElementsAre(0));
  RunningBatches one_long{1, 1, 1, now + absl::Seconds(2)};
  // The long one waits; the short one takes the last execution.
  EXPECT_THAT(DecideNextBatch(queue, options, now, one_long).take,
              ElementsAre(2));
  // Nothing short: nothing starts.
  const std::vector<QueuedSequence> only_long(queue.begin(), queue.begin() + 2);
  const BatchDecision d = DecideNextBatch(only_long, options, now, one_long);
  EXPECT_THAT(d.take, IsEmpty());
  EXPECT_EQ(d.wake_at, absl::InfiniteFuture());
  // With three executions, a second long batch may run.
  BatchOptions three = options;
  three.executions = 3;
  EXPECT_THAT(DecideNextBatch(only_long, three, now, one_long).take,
              ElementsAre(0));
}

TEST(BatchTimeTest, SmallBatchStartsBesideABatchThatRunsOnForLong) {
  // One 1-token sequence: not worth an execution by size.
  const auto queue = TimedQueue({1}, 10);
  const BatchOptions options = Timed(2);
  RunningBatches ends_soon{1, 8, 0, kStart + absl::Milliseconds(100)};
  const BatchDecision wait = DecideNextBatch(queue, options, kStart, ends_soon);
  EXPECT_THAT(wait.take, IsEmpty());
  // It waits until that batch's expected end, and decides again then.
  EXPECT_EQ(wait.wake_at, kStart + absl::Milliseconds(100));
  // Past its expected end a batch may run on for any time (its estimate
  // was short): the small one starts beside it, also just at the end.
  for (const absl::Duration late :
       {absl::ZeroDuration(), absl::Milliseconds(1), absl::Seconds(2)}) {
    EXPECT_THAT(
        DecideNextBatch(queue, options, kStart + absl::Milliseconds(100) + late,
                        ends_soon)
            .take,
        ElementsAre(0));
  }
  RunningBatches runs_on{1, 1, 1, kStart + absl::Seconds(3)};
  EXPECT_THAT(DecideNextBatch(queue, options, kStart, runs_on).take,
              ElementsAre(0));
  // Without a known end it waits, as before.
  RunningBatches unknown{1, 1, 0, absl::InfiniteFuture()};
  EXPECT_THAT(DecideNextBatch(queue, options, kStart, unknown).take, IsEmpty());
}

}  // namespace
}  // namespace encoder::batching
