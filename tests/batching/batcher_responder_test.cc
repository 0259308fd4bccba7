// The batcher's responder thread: large completions are packed off the
// worker, small ones on it, in order, with a bounded number waiting.
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/batching/batcher.h"
#include "tests/batching/batcher_fakes.h"

namespace encoder::batching {
namespace {

using namespace fakes;  // NOLINT(build/namespaces): the test doubles

// A latch the completion callback of one request blocks on, standing in
// for packing a large response.
class Gate {
 public:
  void Wait() {
    std::unique_lock<std::mutex> lock(mu_);
    entered_ = true;
    cv_.notify_all();
    cv_.wait(lock, [this] { return open_; });
  }
  bool WaitEntered() {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, absl::ToChronoSeconds(kPatience),
                        [this] { return entered_; });
  }
  void Open() {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = true;
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool entered_ = false;
  bool open_ = false;
};

// Makes `request`'s completion wait at `gate` before it records.
void HoldCompletionAt(Gate* gate, Request* request) {
  auto record = request->done;
  request->done = [gate, record](absl::Status status,
                                 std::vector<ItemResult> results) {
    gate->Wait();
    record(std::move(status), std::move(results));
  };
}

TEST(BatcherTest, SlowCompletionDoesNotHoldUpTheNextBatch) {
  FakeRunner runner;
  Gate gate;
  Done a, b;
  Batcher batcher(&runner, Options());
  // Large results go to the responder; the small ones after them follow.
  auto first = MakeRequest({{kBigToken, 2}}, &a);
  HoldCompletionAt(&gate, first.get());
  ASSERT_TRUE(batcher.Submit(first).ok());
  ASSERT_TRUE(gate.WaitEntered());
  // The first request's callback is still running; the next batch runs
  // and is computed all the same.
  ASSERT_TRUE(batcher.Submit(MakeRequest({{2, 3}}, &b)).ok());
  EXPECT_TRUE(runner.WaitForBatches(2));
  EXPECT_EQ(b.calls(), 0);  // completions keep their order
  gate.Open();
  ASSERT_TRUE(a.Wait());
  ASSERT_TRUE(b.Wait());
  EXPECT_TRUE(a.status().ok());
  ExpectEcho(b.results()[0], 2, 3);
  EXPECT_TRUE(batcher.Drain(absl::Now() + kPatience));
}

TEST(BatcherTest, FinishedResultsWaitingForCompletionAreBounded) {
  FakeRunner runner;
  Gate gate;
  std::vector<Done> done(6);
  Batcher batcher(&runner, Options(/*max_sequences=*/1));
  auto first = MakeRequest({{kBigToken, 2}}, &done[0]);
  HoldCompletionAt(&gate, first.get());
  ASSERT_TRUE(batcher.Submit(first).ok());
  ASSERT_TRUE(gate.WaitEntered());
  for (int i = 1; i < 6; ++i) {
    ASSERT_TRUE(batcher.Submit(MakeRequest({{i, 2}}, &done[i])).ok());
  }
  // Batch 0 is in its callback; batches 1 and 2 wait for the responder;
  // batch 3 is computed and the worker waits for room to hand it over.
  // Batch 4 may have gone to the free executor before that (compute
  // resumes before results are filed, unless finished batches already
  // wait) and then waits, finished, for the worker. So batch 5, at least,
  // stays queued however long the callback takes.
  const bool computed = runner.WaitForBatches(4);
  absl::SleepFor(absl::Milliseconds(200));
  const size_t ran = runner.batches().size();
  const int64_t queued = batcher.queued_sequences();
  gate.Open();  // before any check can end the test
  ASSERT_TRUE(computed);
  EXPECT_GE(ran, 4u);
  EXPECT_LE(ran, 5u);
  EXPECT_EQ(queued, 6 - static_cast<int64_t>(ran));
  EXPECT_TRUE(batcher.Drain(absl::Now() + kPatience));
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(done[i].calls(), 1);
    ASSERT_TRUE(done[i].status().ok()) << done[i].status();
    ExpectEcho(done[i].results()[0], i == 0 ? kBigToken : i, 2);
  }
}

TEST(BatcherTest, SmallResultsCompleteOnTheWorkerLargeOnesOnTheResponder) {
  FakeRunner runner;
  std::thread::id small_thread, big_thread;
  std::mutex worker_mu;
  std::thread::id worker_thread;  // on_batch runs on the worker
  BatcherObserver observer;
  observer.on_batch = [&](const BatchStats&) {
    std::lock_guard<std::mutex> lock(worker_mu);
    worker_thread = std::this_thread::get_id();
  };
  Done small, big;
  Batcher batcher(&runner, Options(), observer);
  auto with_thread = [](Done* done, std::thread::id* where) {
    auto record = done->Callback();
    return
        [record, where](absl::Status status, std::vector<ItemResult> results) {
          *where = std::this_thread::get_id();
          record(std::move(status), std::move(results));
        };
  };
  auto a = MakeRequest({{1, 2}}, &small);
  a->done = with_thread(&small, &small_thread);
  ASSERT_TRUE(batcher.Submit(a).ok());
  ASSERT_TRUE(small.Wait());
  auto b = MakeRequest({{kBigToken, 2}}, &big);
  b->done = with_thread(&big, &big_thread);
  ASSERT_TRUE(batcher.Submit(b).ok());
  ASSERT_TRUE(big.Wait());
  {
    std::lock_guard<std::mutex> lock(worker_mu);
    EXPECT_EQ(small_thread, worker_thread);
    EXPECT_NE(big_thread, worker_thread);
  }
  EXPECT_NE(small_thread, runner.run_thread());  // not the executor either
  EXPECT_NE(big_thread, runner.run_thread());
  EXPECT_NE(big_thread, std::this_thread::get_id());
  const std::vector<ItemResult> big_results = big.results();
  ASSERT_EQ(big_results.size(), 1u);
  const Echo* echo = EchoOf(big_results[0]);
  ASSERT_NE(echo, nullptr);
  EXPECT_EQ(echo->tokens.size(), 32768u);
}

// The batcher's threads carry names (top -H, perf, /proc/PID/task/*/comm):
// one planner, one responder, one runner per execution.
TEST(BatcherTest, ItsThreadsCarryTheirNames) {
  FakeRunner runner;
  BatchOptions options = Options();
  options.executions = 2;
  Batcher batcher(&runner, options);
  auto count = [] {
    std::map<std::string, int> names;
    for (const auto& task :
         std::filesystem::directory_iterator("/proc/self/task")) {
      std::ifstream comm(task.path() / "comm");
      std::string name;
      if (std::getline(comm, name)) ++names[name];
    }
    return names;
  };
  const std::map<std::string, int> want = {
      {"batch-plan", 1}, {"batch-reply", 1}, {"batch-run", 2}};
  std::map<std::string, int> seen;
  // The threads name themselves as they start.
  for (const absl::Time end = absl::Now() + kPatience; absl::Now() < end;
       absl::SleepFor(absl::Milliseconds(5))) {
    seen.clear();
    for (const auto& [name, n] : count()) {
      if (want.count(name) > 0) seen[name] = n;
    }
    if (seen == want) break;
  }
  EXPECT_EQ(seen, want);
}

}  // namespace
}  // namespace encoder::batching
