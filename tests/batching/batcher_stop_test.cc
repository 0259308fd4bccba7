// A request that gives up while its batch runs: the batcher answers it at
// once, and the batch stops at its next step when nobody else waits for it;
// the measured compute rate; a long batch leaves an execution free.
#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "server/batching/batcher.h"
#include "tests/batching/batcher_fakes.h"

namespace encoder::batching {
namespace {

using namespace fakes;  // NOLINT(build/namespaces): the test doubles

// Waits up to kPatience for `done` and returns how long it took.
absl::Duration TimeToDone(Done* done, absl::Time since) {
  EXPECT_TRUE(done->Wait());
  return absl::Now() - since;
}

TEST(BatcherStopTest, DeadlineWhileRunningAnswersAndStopsTheBatch) {
  FakeRunner runner;
  runner.Hold();  // the batch would run until released
  ObserverLog log;
  Done done;
  Batcher batcher(&runner, Options(), log.Observer());
  auto request = MakeRequest({{1, 4}, {2, 4}}, &done);
  const absl::Time start = absl::Now();
  request->deadline = start + absl::Milliseconds(300);
  ASSERT_TRUE(batcher.Submit(request).ok());
  ASSERT_TRUE(runner.WaitForBatches(1));
  // Answered within a poll interval of the deadline, without a release.
  const absl::Duration took = TimeToDone(&done, start);
  EXPECT_EQ(done.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_LT(took, absl::Milliseconds(300) + 5 * Batcher::kPollInterval);
  EXPECT_EQ(done.calls(), 1);
  // The batch asked and stopped, though never released.
  EXPECT_TRUE(runner.WaitForStopped(1));
  EXPECT_TRUE(batcher.Drain(absl::Now() + kPatience));
  EXPECT_EQ(done.calls(), 1);
  runner.Release();
}

TEST(BatcherStopTest, CancelWhileRunningAnswersAndStopsTheBatch) {
  FakeRunner runner;
  runner.Hold();
  ObserverLog log;
  Done done;
  Batcher batcher(&runner, Options(), log.Observer());
  auto cancelled = std::make_shared<std::atomic<bool>>(false);
  auto request = MakeRequest({{1, 4}}, &done);
  request->is_cancelled = [cancelled] { return cancelled->load(); };
  ASSERT_TRUE(batcher.Submit(request).ok());
  ASSERT_TRUE(runner.WaitForBatches(1));
  const absl::Time start = absl::Now();
  cancelled->store(true);
  const absl::Duration took = TimeToDone(&done, start);
  EXPECT_EQ(done.status().code(), absl::StatusCode::kCancelled);
  EXPECT_LT(took, 5 * Batcher::kPollInterval);
  EXPECT_TRUE(runner.WaitForStopped(1));
  EXPECT_TRUE(batcher.Drain(absl::Now() + kPatience));
  EXPECT_EQ(done.calls(), 1);
  runner.Release();
}

TEST(BatcherStopTest, BatchRunsOnWhileAnotherOfItsRequestsWaits) {
  FakeRunner runner;
  runner.Hold();
  Done a, b;
  // max_queue_delay lets both requests share one batch.
  BatchOptions options = Options();
  options.max_queue_delay = absl::Milliseconds(200);
  Batcher batcher(&runner, options);
  auto cancelled = std::make_shared<std::atomic<bool>>(false);
  auto ra = MakeRequest({{1, 4}}, &a);
  ra->is_cancelled = [cancelled] { return cancelled->load(); };
  ASSERT_TRUE(batcher.Submit(ra).ok());
  ASSERT_TRUE(batcher.Submit(MakeRequest({{2, 4}}, &b)).ok());
  ASSERT_TRUE(runner.WaitForBatches(1));
  ASSERT_EQ(runner.batches()[0].size(), 2u);
  cancelled->store(true);
  ASSERT_TRUE(a.Wait());
  EXPECT_EQ(a.status().code(), absl::StatusCode::kCancelled);
  absl::SleepFor(3 * Batcher::kPollInterval);
  EXPECT_EQ(runner.stopped(), 0);  // b still wants the batch
  EXPECT_EQ(b.calls(), 0);
  runner.Release();
  ASSERT_TRUE(b.Wait());
  ASSERT_TRUE(b.status().ok()) << b.status();
  ExpectEcho(b.results()[0], 2, 4);
  EXPECT_EQ(a.calls(), 1);
}

TEST(BatcherStopTest, MeasuresTheComputeRateOfItsBatches) {
  FakeRunner runner;
  Done done;
  BatchOptions options = Options();
  options.work_per_second = 123;  // the start-up estimate
  Batcher batcher(&runner, options);
  EXPECT_EQ(batcher.work_per_second(), 123);
  runner.Hold();
  auto request = MakeRequest({{1, 4}}, &done);
  request->sequences[0].compute.per_token = 1'000'000;  // 4e6 units
  ASSERT_TRUE(batcher.Submit(request).ok());
  ASSERT_TRUE(runner.WaitForBatches(1));
  absl::SleepFor(absl::Milliseconds(200));
  runner.Release();
  ASSERT_TRUE(done.Wait());
  ASSERT_TRUE(batcher.Drain(absl::Now() + kPatience));
  // About 4e6 units in 0.2 s: the estimate moved from 123 toward 2e7
  // (partly: one batch of 0.2 s weighs 0.2 / 0.7 of the sample).
  const double rate = batcher.work_per_second();
  EXPECT_GT(rate, 1e6);
  EXPECT_LT(rate, 2.1e7);
}

TEST(BatcherStopTest, LongBatchLeavesTheSecondExecutionToOthers) {
  FakeRunner runner;
  runner.Hold();
  Done heavy, small;
  BatchOptions options = Options();
  options.executions = 2;
  options.max_batch_time = absl::Milliseconds(250);
  options.work_per_second = 1000;
  Batcher batcher(&runner, options);
  // Three sequences of 2 s each (2000 units): long, one at a time.
  auto big = MakeRequest({{1, 200}, {1, 200}, {1, 200}}, &heavy);
  for (BatchItem& item : big->sequences) item.compute.per_token = 10;
  ASSERT_TRUE(batcher.Submit(big).ok());
  ASSERT_TRUE(runner.WaitForBatches(1));
  absl::SleepFor(absl::Milliseconds(100));
  EXPECT_EQ(runner.batches().size(), 1u);  // not a second long one
  EXPECT_EQ(batcher.queued_sequences(), 2);
  // A small call takes the free execution at once, though it is far
  // below what is worth an execution by size.
  auto one = MakeRequest({{2, 1}}, &small);
  one->sequences[0].compute.per_token = 10;
  ASSERT_TRUE(batcher.Submit(one).ok());
  ASSERT_TRUE(runner.WaitForBatches(2));
  ASSERT_EQ(runner.batches()[1].size(), 1u);
  EXPECT_EQ(runner.batches()[1][0].first_token, 2);
  runner.Release();
  ASSERT_TRUE(small.Wait());
  ASSERT_TRUE(heavy.Wait());
  EXPECT_TRUE(heavy.status().ok()) << heavy.status();
}

}  // namespace
}  // namespace encoder::batching
