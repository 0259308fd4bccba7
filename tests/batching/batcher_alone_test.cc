// Items that run alone (BatchItem::run_alone, how Diagnose reaches a
// model): queued with the sequences, never batched with them, run by the
// worker instead of the runner, dropped and drained like any sequence.
#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/batching/batcher.h"
#include "server/batching/memory_budget.h"
#include "tests/batching/batcher_fakes.h"

namespace encoder::batching {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using namespace fakes;  // NOLINT(build/namespaces)

// What an alone job saw when it ran.
struct JobLog {
  std::atomic<int> runs{0};
  std::atomic<int64_t> budget_held{-1};
  std::thread::id thread;
};

// A request of one item of `length` tokens that runs alone and returns
// `status`; it records its runs (and the budget's hold, when given) in
// `log`.
std::shared_ptr<Request> AloneRequest(int64_t length, absl::Status status,
                                      JobLog* log, Done* done,
                                      const MemoryBudget* budget = nullptr,
                                      SequenceCost cost = {}) {
  auto request = std::make_shared<Request>();
  BatchItem spec;
  spec.length = length;
  spec.cost = cost;
  spec.work = FakeWork{900};
  spec.run_alone = [log, budget, status] {
    log->thread = std::this_thread::get_id();
    if (budget != nullptr) log->budget_held = budget->held();
    ++log->runs;
    return status;
  };
  request->sequences.push_back(std::move(spec));
  request->done = done->Callback();
  return request;
}

TEST(BatcherTest, AloneItemRunsInItsOwnBatchOnTheWorkerNotTheRunner) {
  FakeRunner runner;
  ObserverLog observed;
  JobLog job;
  Done first, before, alone, after;
  Batcher batcher(&runner, Options(), observed.Observer());
  runner.Hold();
  ASSERT_TRUE(batcher.Submit(MakeRequest({{1, 3}}, &first)).ok());
  ASSERT_TRUE(runner.WaitForBatches(1));
  // Queued while the first batch runs: a sequence, the job, a sequence.
  ASSERT_TRUE(batcher.Submit(MakeRequest({{2, 3}}, &before)).ok());
  ASSERT_TRUE(
      batcher.Submit(AloneRequest(5, absl::OkStatus(), &job, &alone)).ok());
  ASSERT_TRUE(batcher.Submit(MakeRequest({{3, 3}}, &after)).ok());
  runner.Release();
  ASSERT_TRUE(first.Wait() && before.Wait() && alone.Wait() && after.Wait());

  // The sequences batch together around the oldest; the job never joins a
  // batch and never reaches the runner.
  const auto batches = runner.batches();
  ASSERT_EQ(batches.size(), 2u);
  EXPECT_THAT(FirstTokens(batches[0]), ElementsAre(1));
  EXPECT_THAT(FirstTokens(batches[1]), ElementsAre(2, 3));
  EXPECT_FALSE(runner.SawToken(900));
  EXPECT_EQ(job.runs.load(), 1);
  EXPECT_EQ(job.thread, runner.run_thread());  // the model's one worker
  ASSERT_TRUE(alone.status().ok());
  ASSERT_EQ(alone.results().size(), 1u);
  EXPECT_EQ(alone.results()[0].batch.batch_size, 1);
  EXPECT_EQ(alone.results()[0].batch.real_tokens, 5);
  EXPECT_FALSE(alone.results()[0].output.has_value());
  EXPECT_EQ(observed.batches(), 3);
}

TEST(BatcherTest, AloneItemAtTheHeadDoesNotWaitForQueueDelay) {
  FakeRunner runner;
  JobLog job;
  Done alone;
  BatchOptions options = Options();
  options.max_queue_delay = absl::Hours(1);
  Batcher batcher(&runner, options);
  ASSERT_TRUE(
      batcher.Submit(AloneRequest(4, absl::OkStatus(), &job, &alone)).ok());
  ASSERT_TRUE(alone.Wait());  // within kPatience, not an hour
  EXPECT_TRUE(alone.status().ok());
  EXPECT_EQ(job.runs.load(), 1);
}

TEST(BatcherTest, AloneItemFailureFailsOnlyItself) {
  FakeRunner runner;
  JobLog job;
  Done alone, other;
  Batcher batcher(&runner, Options());
  runner.Hold();
  Done first;
  ASSERT_TRUE(batcher.Submit(MakeRequest({{1, 3}}, &first)).ok());
  ASSERT_TRUE(runner.WaitForBatches(1));
  ASSERT_TRUE(batcher
                  .Submit(AloneRequest(4, absl::InvalidArgumentError("bad"),
                                       &job, &alone))
                  .ok());
  ASSERT_TRUE(batcher.Submit(MakeRequest({{2, 3}}, &other)).ok());
  runner.Release();
  ASSERT_TRUE(alone.Wait() && other.Wait() && first.Wait());
  EXPECT_EQ(alone.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(alone.status().message(), "bad");
  EXPECT_THAT(alone.results(), IsEmpty());
  EXPECT_TRUE(other.status().ok());
  EXPECT_EQ(alone.calls(), 1);
}

TEST(BatcherTest, AloneItemIsDroppedWhenCancelledOrLate) {
  FakeRunner runner;
  ObserverLog observed;
  JobLog cancelled_job, late_job;
  Done cancelled, late;
  Batcher batcher(&runner, Options(), observed.Observer());
  auto c = AloneRequest(4, absl::OkStatus(), &cancelled_job, &cancelled);
  c->is_cancelled = [] { return true; };
  auto l = AloneRequest(4, absl::OkStatus(), &late_job, &late);
  l->deadline = absl::Now() - absl::Seconds(1);
  ASSERT_TRUE(batcher.Submit(c).ok());
  ASSERT_TRUE(batcher.Submit(l).ok());
  ASSERT_TRUE(cancelled.Wait() && late.Wait());
  EXPECT_EQ(cancelled.status().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(late.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(cancelled_job.runs.load() + late_job.runs.load(), 0);
  EXPECT_EQ(observed.dropped("cancelled"), 1);
  EXPECT_EQ(observed.dropped("deadline"), 1);
}

TEST(BatcherTest, AloneItemHoldsItsCostOfTheMemoryBudget) {
  FakeRunner runner;
  MemoryBudget budget(int64_t{1} << 30);
  BatchOptions options = Options();
  options.memory_budget = &budget;
  Batcher batcher(&runner, options);
  JobLog job;
  Done alone;
  SequenceCost cost;
  cost.per_token = 1000;
  cost.per_token_pair = 10;
  ASSERT_TRUE(batcher
                  .Submit(AloneRequest(20, absl::OkStatus(), &job, &alone,
                                       &budget, cost))
                  .ok());
  ASSERT_TRUE(alone.Wait());
  EXPECT_EQ(job.budget_held.load(), 1000 * 20 + 10 * 20 * 20);
  EXPECT_EQ(budget.held(), 0);
}

TEST(BatcherTest, DrainWaitsForAQueuedAloneItem) {
  FakeRunner runner;
  JobLog job;
  Done first, alone;
  Batcher batcher(&runner, Options());
  runner.Hold();
  ASSERT_TRUE(batcher.Submit(MakeRequest({{1, 3}}, &first)).ok());
  ASSERT_TRUE(runner.WaitForBatches(1));
  ASSERT_TRUE(
      batcher.Submit(AloneRequest(4, absl::OkStatus(), &job, &alone)).ok());
  std::thread release([&runner] {
    absl::SleepFor(absl::Milliseconds(50));
    runner.Release();
  });
  EXPECT_TRUE(batcher.Drain(absl::Now() + kPatience));
  release.join();
  EXPECT_EQ(job.runs.load(), 1);
  EXPECT_TRUE(alone.status().ok());
  Done refused;
  EXPECT_EQ(
      batcher.Submit(AloneRequest(4, absl::OkStatus(), &job, &refused)).code(),
      absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace encoder::batching
