// Several batches of one model running at once (BatchOptions::executions):
// the worker hands a batch to every free executor, and results, failures,
// order and shutdown stay as with one.
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "server/batching/batcher.h"
#include "tests/batching/batcher_fakes.h"

namespace encoder::batching {
namespace {

using namespace fakes;  // NOLINT(build/namespaces): the test doubles

BatchOptions WithExecutions(int executions, int64_t max_sequences = 32) {
  BatchOptions options = Options(max_sequences);
  options.executions = executions;
  return options;
}

TEST(BatcherTest, SecondExecutionStartsWhileTheFirstRuns) {
  FakeRunner runner;
  runner.Hold();
  Done a, b;
  // One sequence is half of a batch: worth a second execution.
  Batcher batcher(&runner, WithExecutions(2, /*max_sequences=*/2));
  ASSERT_TRUE(batcher.Submit(MakeRequest({{1, 4}}, &a)).ok());
  ASSERT_TRUE(runner.WaitForBatches(1));
  // The first batch is held inside the runner; the second runs beside it.
  ASSERT_TRUE(batcher.Submit(MakeRequest({{2, 4}}, &b)).ok());
  EXPECT_TRUE(runner.WaitForBatches(2));
  EXPECT_EQ(batcher.queued_sequences(), 0);
  runner.Release();
  ASSERT_TRUE(a.Wait());
  ASSERT_TRUE(b.Wait());
  ExpectEcho(a.results()[0], 1, 4);
  ExpectEcho(b.results()[0], 2, 4);
  EXPECT_TRUE(batcher.Drain(absl::Now() + kPatience));
}

TEST(BatcherTest, SmallBatchWaitsForARunningOneUntilItIsWorthAnExecution) {
  FakeRunner runner;
  runner.Hold();
  Done a, b, c;
  Batcher batcher(&runner, WithExecutions(2, /*max_sequences=*/8));
  ASSERT_TRUE(batcher.Submit(MakeRequest({{1, 4}}, &a)).ok());
  ASSERT_TRUE(runner.WaitForBatches(1));  // nothing ran: it starts at once
  // One sequence is under half a batch (4 of 8): it waits.
  ASSERT_TRUE(batcher.Submit(MakeRequest({{2, 4}}, &b)).ok());
  absl::SleepFor(absl::Milliseconds(100));
  EXPECT_EQ(runner.batches().size(), 1u);
  EXPECT_EQ(batcher.queued_sequences(), 1);
  // Four more make five: the second execution takes them all.
  ASSERT_TRUE(
      batcher.Submit(MakeRequest({{3, 4}, {3, 4}, {3, 4}, {3, 4}}, &c)).ok());
  ASSERT_TRUE(runner.WaitForBatches(2));
  EXPECT_EQ(runner.batches()[1].size(), 5u);
  EXPECT_EQ(batcher.queued_sequences(), 0);
  runner.Release();
  ASSERT_TRUE(a.Wait());
  ASSERT_TRUE(b.Wait());
  ASSERT_TRUE(c.Wait());
  ExpectEcho(b.results()[0], 2, 4);
}

TEST(BatcherTest, SmallBatchStartsOnceTheRunningOneFinishes) {
  FakeRunner runner;
  runner.Hold();
  Done a, b;
  Batcher batcher(&runner, WithExecutions(2, /*max_sequences=*/8));
  ASSERT_TRUE(batcher.Submit(MakeRequest({{1, 4}}, &a)).ok());
  ASSERT_TRUE(runner.WaitForBatches(1));
  ASSERT_TRUE(batcher.Submit(MakeRequest({{2, 4}}, &b)).ok());
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_EQ(runner.batches().size(), 1u);
  runner.Release();  // the first finishes; the small one is not left behind
  ASSERT_TRUE(a.Wait());
  ASSERT_TRUE(b.Wait());
  ExpectEcho(b.results()[0], 2, 4);
  EXPECT_EQ(runner.batches().size(), 2u);
}

TEST(BatcherTest, BurstOnAnIdleModelSplitsEvenlyAmongTheExecutions) {
  FakeRunner runner;
  runner.Hold();
  Done done;
  Batcher batcher(&runner, WithExecutions(2, /*max_sequences=*/32));
  std::vector<std::pair<int64_t, int64_t>> sequences;
  for (int i = 0; i < 32; ++i) sequences.push_back({i, 2});
  ASSERT_TRUE(batcher.Submit(MakeRequest(sequences, &done)).ok());
  ASSERT_TRUE(runner.WaitForBatches(2));
  EXPECT_EQ(runner.batches()[0].size(), 16u);
  EXPECT_EQ(runner.batches()[1].size(), 16u);
  runner.Release();
  ASSERT_TRUE(done.Wait());
  ASSERT_EQ(done.results().size(), 32u);
  for (int i = 0; i < 32; ++i) ExpectEcho(done.results()[i], i, 2);
}

TEST(BatcherTest, SmallBurstIsNotSplitBelowWhatIsWorthAnExecution) {
  FakeRunner runner;
  runner.Hold();
  Done done;
  Batcher batcher(&runner, WithExecutions(2, /*max_sequences=*/32));
  ASSERT_TRUE(
      batcher.Submit(MakeRequest({{1, 2}, {2, 2}, {3, 2}}, &done)).ok());
  ASSERT_TRUE(runner.WaitForBatches(1));
  absl::SleepFor(absl::Milliseconds(50));
  ASSERT_EQ(runner.batches().size(), 1u);
  EXPECT_EQ(runner.batches()[0].size(), 3u);  // two parts of 1-2: one batch
  runner.Release();
  ASSERT_TRUE(done.Wait());
}

TEST(BatcherTest, ObserverSeesTheBatchesRunning) {
  FakeRunner runner;
  runner.Hold();
  std::mutex mu;
  std::vector<int64_t> seen;
  BatcherObserver observer;
  observer.on_running = [&](int64_t running) {
    std::lock_guard<std::mutex> lock(mu);
    seen.push_back(running);
  };
  auto last = [&] {
    std::lock_guard<std::mutex> lock(mu);
    return seen.empty() ? int64_t{-1} : seen.back();
  };
  auto wait_for = [&](int64_t want) {
    const absl::Time until = absl::Now() + kPatience;
    while (last() != want && absl::Now() < until) {
      absl::SleepFor(absl::Milliseconds(1));
    }
    return last() == want;
  };
  Done a, b;
  Batcher batcher(&runner, WithExecutions(2, /*max_sequences=*/1), observer);
  EXPECT_TRUE(wait_for(0));
  ASSERT_TRUE(batcher.Submit(MakeRequest({{1, 2}}, &a)).ok());
  ASSERT_TRUE(batcher.Submit(MakeRequest({{2, 2}}, &b)).ok());
  ASSERT_TRUE(runner.WaitForBatches(2));
  EXPECT_TRUE(wait_for(2));
  runner.Release();
  ASSERT_TRUE(a.Wait());
  ASSERT_TRUE(b.Wait());
  EXPECT_TRUE(wait_for(0));
  std::lock_guard<std::mutex> lock(mu);
  for (int64_t n : seen) EXPECT_LE(n, 2);
}

TEST(BatcherTest, OneExecutionRunsOneBatchAtATime) {
  FakeRunner runner;
  runner.Hold();
  Done a, b;
  Batcher batcher(&runner, WithExecutions(1));
  ASSERT_TRUE(batcher.Submit(MakeRequest({{1, 4}}, &a)).ok());
  ASSERT_TRUE(runner.WaitForBatches(1));
  ASSERT_TRUE(batcher.Submit(MakeRequest({{2, 4}}, &b)).ok());
  absl::SleepFor(absl::Milliseconds(100));
  EXPECT_EQ(runner.batches().size(), 1u);
  EXPECT_EQ(batcher.queued_sequences(), 1);
  runner.Release();
  ASSERT_TRUE(a.Wait());
  ASSERT_TRUE(b.Wait());
  EXPECT_EQ(runner.batches().size(), 2u);
}

TEST(BatcherTest, BatchesRunningAtOnceNeverExceedTheExecutions) {
  FakeRunner runner;
  runner.Hold();
  std::vector<Done> done(5);
  Batcher batcher(&runner, WithExecutions(3, /*max_sequences=*/1));
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(batcher.Submit(MakeRequest({{i, 2}}, &done[i])).ok());
  }
  ASSERT_TRUE(runner.WaitForBatches(3));
  absl::SleepFor(absl::Milliseconds(100));
  EXPECT_EQ(runner.batches().size(), 3u);
  EXPECT_EQ(batcher.queued_sequences(), 2);
  runner.Release();
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(done[i].Wait());
    ExpectEcho(done[i].results()[0], i, 2);
  }
}

TEST(BatcherTest, RequestSplitOverConcurrentBatchesKeepsItsOrder) {
  FakeRunner runner;
  runner.Hold();
  Done done;
  Batcher batcher(&runner, WithExecutions(2, /*max_sequences=*/1));
  ASSERT_TRUE(
      batcher.Submit(MakeRequest({{10, 1}, {11, 2}, {12, 3}, {13, 4}}, &done))
          .ok());
  ASSERT_TRUE(runner.WaitForBatches(2));  // two of its sequences at once
  runner.Release();
  ASSERT_TRUE(done.Wait());
  ASSERT_TRUE(done.status().ok()) << done.status();
  const std::vector<ItemResult> results = done.results();
  ASSERT_EQ(results.size(), 4u);
  for (int i = 0; i < 4; ++i) ExpectEcho(results[i], 10 + i, 1 + i);
  EXPECT_EQ(done.calls(), 1);
}

TEST(BatcherTest, FailedBatchFailsItsRequestOnceWhileAnotherBatchOfItRuns) {
  FakeRunner runner;
  runner.Hold();
  Done split, other;
  Batcher batcher(&runner, WithExecutions(2, /*max_sequences=*/1));
  ASSERT_TRUE(
      batcher.Submit(MakeRequest({{7, 2}, {kFailToken, 2}}, &split)).ok());
  ASSERT_TRUE(runner.WaitForBatches(2));  // both halves are running
  runner.Release();
  ASSERT_TRUE(split.Wait());
  EXPECT_EQ(split.status().code(), absl::StatusCode::kAborted);
  EXPECT_TRUE(split.results().empty());
  // Other callers are unaffected.
  ASSERT_TRUE(batcher.Submit(MakeRequest({{8, 2}}, &other)).ok());
  ASSERT_TRUE(other.Wait());
  ExpectEcho(other.results()[0], 8, 2);
  EXPECT_TRUE(batcher.Drain(absl::Now() + kPatience));
  EXPECT_EQ(split.calls(), 1);
}

TEST(BatcherTest, DestructionWaitsForEveryRunningBatch) {
  FakeRunner runner;
  runner.Hold();
  Done a, b, queued;
  auto batcher = std::make_unique<Batcher>(
      &runner, WithExecutions(2, /*max_sequences=*/1));
  ASSERT_TRUE(batcher->Submit(MakeRequest({{1, 2}}, &a)).ok());
  ASSERT_TRUE(batcher->Submit(MakeRequest({{2, 2}}, &b)).ok());
  ASSERT_TRUE(runner.WaitForBatches(2));
  ASSERT_TRUE(batcher->Submit(MakeRequest({{3, 2}}, &queued)).ok());
  std::thread release([&runner] {
    absl::SleepFor(absl::Milliseconds(50));
    runner.Release();
  });
  batcher.reset();  // both running batches finish; the queued one fails
  release.join();
  ASSERT_TRUE(a.Wait());
  ASSERT_TRUE(b.Wait());
  ASSERT_TRUE(queued.Wait());
  ExpectEcho(a.results()[0], 1, 2);
  ExpectEcho(b.results()[0], 2, 2);
  EXPECT_EQ(queued.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(runner.batches().size(), 2u);
}

}  // namespace
}  // namespace encoder::batching
