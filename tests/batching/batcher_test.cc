#include "server/batching/batcher.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace encoder::batching {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// First-token commands understood by FakeRunner.
constexpr int64_t kFailToken = -1;   // the batch fails with ABORTED
constexpr int64_t kThrowToken = -2;  // Run throws std::runtime_error
constexpr int64_t kShortToken = -3;  // Run returns one result too few
constexpr int64_t kBigToken = -4;    // the result carries 128 KiB of tokens

// Generous bound for waits that succeed at once unless the code is broken.
constexpr absl::Duration kPatience = absl::Seconds(30);

// Echo model: pooled = {first token id, length, position in the batch}.
// Records every batch it sees; Hold() makes each Run block (after recording
// its batch) until Release().
class FakeRunner : public ModelRunner {
 public:
  struct Seen {
    int64_t first_token;
    int64_t length;
  };

  absl::Status Run(const std::vector<const SequenceSpec*>& batch,
                   std::vector<SequenceResult>* results) override {
    std::vector<Seen> seen;
    for (const SequenceSpec* spec : batch) {
      seen.push_back({spec->token_ids.front(),
                      static_cast<int64_t>(spec->token_ids.size())});
    }
    {
      std::unique_lock<std::mutex> lock(mu_);
      run_thread_ = std::this_thread::get_id();
      batches_.push_back(seen);
      cv_.notify_all();
      cv_.wait(lock, [this] { return !held_; });
    }
    size_t count = seen.size();
    for (const Seen& s : seen) {
      if (s.first_token == kFailToken) {
        return absl::AbortedError("injected failure");
      }
      if (s.first_token == kThrowToken) {
        throw std::runtime_error("injected exception");
      }
      if (s.first_token == kShortToken) count = seen.size() - 1;
    }
    results->resize(count);
    for (size_t i = 0; i < count; ++i) {
      SequenceResult& result = (*results)[i];
      result.pooled = {static_cast<float>(seen[i].first_token),
                       static_cast<float>(seen[i].length),
                       static_cast<float>(i)};
      result.num_tokens = seen[i].length;
      result.dim = 3;
      if (seen[i].first_token == kBigToken) result.tokens.resize(32768);
    }
    return absl::OkStatus();
  }

  void Hold() {
    std::lock_guard<std::mutex> lock(mu_);
    held_ = true;
  }
  void Release() {
    std::lock_guard<std::mutex> lock(mu_);
    held_ = false;
    cv_.notify_all();
  }
  // Waits until Run has been entered `n` times in all.
  bool WaitForBatches(size_t n) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, absl::ToChronoSeconds(kPatience),
                        [&] { return batches_.size() >= n; });
  }
  std::vector<std::vector<Seen>> batches() const {
    std::lock_guard<std::mutex> lock(mu_);
    return batches_;
  }
  std::thread::id run_thread() const {
    std::lock_guard<std::mutex> lock(mu_);
    return run_thread_;
  }
  bool SawToken(int64_t token) const {
    for (const auto& batch : batches()) {
      for (const Seen& s : batch) {
        if (s.first_token == token) return true;
      }
    }
    return false;
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool held_ = false;
  std::vector<std::vector<Seen>> batches_;
  std::thread::id run_thread_;
};

// Collects the completion of one request.
class Done {
 public:
  std::function<void(absl::Status, std::vector<SequenceResult>)> Callback() {
    return [this](absl::Status status, std::vector<SequenceResult> results) {
      std::lock_guard<std::mutex> lock(mu_);
      ++calls_;
      status_ = std::move(status);
      results_ = std::move(results);
      cv_.notify_all();
    };
  }
  bool Wait() {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, absl::ToChronoSeconds(kPatience),
                        [this] { return calls_ > 0; });
  }
  int calls() const {
    std::lock_guard<std::mutex> lock(mu_);
    return calls_;
  }
  absl::Status status() const {
    std::lock_guard<std::mutex> lock(mu_);
    return status_;
  }
  std::vector<SequenceResult> results() const {
    std::lock_guard<std::mutex> lock(mu_);
    return results_;
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  int calls_ = 0;
  absl::Status status_ = absl::UnknownError("not completed");
  std::vector<SequenceResult> results_;
};

// Counts on_dropped and on_batch calls.
class ObserverLog {
 public:
  BatcherObserver Observer() {
    BatcherObserver observer;
    observer.on_dropped = [this](const char* reason, int64_t n) {
      std::lock_guard<std::mutex> lock(mu_);
      dropped_[reason] += n;
    };
    observer.on_batch = [this](const BatchStats&) { ++batches_; };
    return observer;
  }
  int64_t dropped(const std::string& reason) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = dropped_.find(reason);
    return it == dropped_.end() ? 0 : it->second;
  }
  int64_t batches() const { return batches_; }

 private:
  mutable std::mutex mu_;
  std::map<std::string, int64_t> dropped_;
  std::atomic<int64_t> batches_{0};
};

std::vector<int64_t> Tokens(int64_t first, int64_t length) {
  std::vector<int64_t> tokens(length, 1);
  tokens[0] = first;
  return tokens;
}

// A request of sequences given as (first token, length) pairs.
std::shared_ptr<Request> MakeRequest(
    const std::vector<std::pair<int64_t, int64_t>>& sequences, Done* done) {
  auto request = std::make_shared<Request>();
  for (const auto& [first, length] : sequences) {
    SequenceSpec spec;
    spec.token_ids = Tokens(first, length);
    request->sequences.push_back(std::move(spec));
  }
  request->done = done->Callback();
  return request;
}

void ExpectEcho(const SequenceResult& result, int64_t first, int64_t length) {
  ASSERT_EQ(result.pooled.size(), 3u);
  EXPECT_EQ(result.pooled[0], static_cast<float>(first));
  EXPECT_EQ(result.pooled[1], static_cast<float>(length));
  EXPECT_EQ(result.num_tokens, length);
}

BatchOptions Options(int64_t max_sequences = 32, int64_t max_tokens = 16384) {
  BatchOptions options;
  options.max_batch_sequences = max_sequences;
  options.max_batch_tokens = max_tokens;
  return options;
}

std::vector<int64_t> FirstTokens(const std::vector<FakeRunner::Seen>& batch) {
  std::vector<int64_t> tokens;
  for (const auto& s : batch) tokens.push_back(s.first_token);
  return tokens;
}

TEST(BatcherTest, ResultsComeBackInRequestOrder) {
  FakeRunner runner;
  Done done;
  Batcher batcher(&runner, Options(/*max_sequences=*/2));
  ASSERT_TRUE(
      batcher
          .Submit(MakeRequest(
              {{100, 9}, {101, 1}, {102, 8}, {103, 2}, {104, 7}}, &done))
          .ok());
  ASSERT_TRUE(done.Wait());
  ASSERT_TRUE(done.status().ok()) << done.status();
  const auto results = done.results();
  ASSERT_EQ(results.size(), 5u);
  ExpectEcho(results[0], 100, 9);
  ExpectEcho(results[1], 101, 1);
  ExpectEcho(results[2], 102, 8);
  ExpectEcho(results[3], 103, 2);
  ExpectEcho(results[4], 104, 7);
  // Grouping by length reordered the work across batches.
  const auto batches = runner.batches();
  ASSERT_EQ(batches.size(), 3u);
  EXPECT_THAT(FirstTokens(batches[0]), ElementsAre(100, 102));
  EXPECT_THAT(FirstTokens(batches[1]), ElementsAre(101, 103));
  EXPECT_THAT(FirstTokens(batches[2]), ElementsAre(104));
  EXPECT_EQ(results[2].batch.batch_size, 2);
  EXPECT_EQ(results[2].batch.padded_tokens, 18);
  EXPECT_EQ(results[2].batch.real_tokens, 17);
  EXPECT_EQ(done.calls(), 1);
}

TEST(BatcherTest, ConcurrentRequestsShareABatch) {
  FakeRunner runner;
  std::vector<Done> done(5);
  Batcher batcher(&runner, Options());
  runner.Hold();
  ASSERT_TRUE(batcher.Submit(MakeRequest({{1000, 2}}, &done[0])).ok());
  ASSERT_TRUE(runner.WaitForBatches(1));
  for (int i = 1; i < 5; ++i) {
    ASSERT_TRUE(
        batcher.Submit(MakeRequest({{1000 + i, 2 + i}}, &done[i])).ok());
  }
  EXPECT_EQ(batcher.queued_sequences(), 4);
  runner.Release();
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(done[i].Wait());
    ASSERT_TRUE(done[i].status().ok()) << done[i].status();
    ASSERT_EQ(done[i].results().size(), 1u);
    ExpectEcho(done[i].results()[0], 1000 + i, 2 + i);
  }
  const auto batches = runner.batches();
  ASSERT_EQ(batches.size(), 2u);
  EXPECT_EQ(batches[1].size(), 4u);
  const BatchStats stats = done[3].results()[0].batch;
  EXPECT_EQ(stats.batch_size, 4);
  EXPECT_EQ(stats.padded_tokens, 6 * 4);
  EXPECT_EQ(stats.real_tokens, 3 + 4 + 5 + 6);
  EXPECT_GE(stats.queue_seconds, 0.0);
  EXPECT_GE(stats.inference_seconds, 0.0);
}

TEST(BatcherTest, LimitsRespectedInEveryBatch) {
  constexpr int64_t kMaxSequences = 3;
  constexpr int64_t kMaxTokens = 20;
  FakeRunner runner;
  std::vector<Done> done(32);
  std::vector<int64_t> lengths = {1};
  for (int i = 1; i < 31; ++i) lengths.push_back(1 + (i * 7) % 10);
  lengths.push_back(25);  // longer than max_batch_tokens: runs alone
  Batcher batcher(&runner, Options(kMaxSequences, kMaxTokens));
  runner.Hold();
  ASSERT_TRUE(batcher.Submit(MakeRequest({{0, lengths[0]}}, &done[0])).ok());
  ASSERT_TRUE(runner.WaitForBatches(1));
  for (int i = 1; i < 32; ++i) {
    ASSERT_TRUE(batcher.Submit(MakeRequest({{i, lengths[i]}}, &done[i])).ok());
  }
  runner.Release();
  for (int i = 0; i < 32; ++i) {
    ASSERT_TRUE(done[i].Wait());
    ASSERT_TRUE(done[i].status().ok()) << done[i].status();
    ExpectEcho(done[i].results()[0], i, lengths[i]);
  }
  size_t seen = 0;
  size_t largest = 0;
  for (const auto& batch : runner.batches()) {
    int64_t longest = 0;
    for (const auto& s : batch) longest = std::max(longest, s.length);
    EXPECT_LE(batch.size(), static_cast<size_t>(kMaxSequences));
    if (batch.size() > 1) {
      EXPECT_LE(longest * static_cast<int64_t>(batch.size()), kMaxTokens);
    }
    seen += batch.size();
    largest = std::max(largest, batch.size());
  }
  EXPECT_EQ(seen, 32u);
  EXPECT_GT(largest, 1u);
}

TEST(BatcherTest, LoneSequenceWaitsForQueueDelay) {
  const absl::Duration kDelay = absl::Milliseconds(100);
  FakeRunner runner;
  Done done;
  BatchOptions options = Options();
  options.max_queue_delay = kDelay;
  Batcher batcher(&runner, options);
  const absl::Time start = absl::Now();
  ASSERT_TRUE(batcher.Submit(MakeRequest({{7, 3}}, &done)).ok());
  ASSERT_TRUE(done.Wait());
  EXPECT_GE(absl::Now() - start, kDelay);
  ASSERT_TRUE(done.status().ok());
  EXPECT_GE(done.results()[0].batch.queue_seconds,
            absl::ToDoubleSeconds(kDelay));
}

TEST(BatcherTest, FullBatchDoesNotWaitForQueueDelay) {
  FakeRunner runner;
  Done done;
  BatchOptions options = Options(/*max_sequences=*/2);
  options.max_queue_delay = absl::Hours(1);
  Batcher batcher(&runner, options);
  ASSERT_TRUE(batcher.Submit(MakeRequest({{1, 3}, {2, 4}}, &done)).ok());
  ASSERT_TRUE(done.Wait());
  EXPECT_TRUE(done.status().ok());
}

TEST(BatcherTest, DeadlinePassedIsDroppedBeforeCompute) {
  FakeRunner runner;
  ObserverLog log;
  Done late, fine;
  Batcher batcher(&runner, Options(/*max_sequences=*/1), log.Observer());
  auto request = MakeRequest({{500, 3}, {501, 3}}, &late);
  request->deadline = absl::Now() - absl::Seconds(1);
  ASSERT_TRUE(batcher.Submit(request).ok());
  ASSERT_TRUE(batcher.Submit(MakeRequest({{600, 3}}, &fine)).ok());
  ASSERT_TRUE(late.Wait());
  ASSERT_TRUE(fine.Wait());
  EXPECT_EQ(late.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(late.results(), IsEmpty());
  EXPECT_TRUE(fine.status().ok());
  EXPECT_FALSE(runner.SawToken(500));
  EXPECT_FALSE(runner.SawToken(501));
  EXPECT_EQ(log.dropped("deadline"), 2);
  EXPECT_EQ(late.calls(), 1);
  EXPECT_EQ(batcher.queued_sequences(), 0);
}

TEST(BatcherTest, CancelledIsDroppedBeforeCompute) {
  FakeRunner runner;
  ObserverLog log;
  Done cancelled;
  Batcher batcher(&runner, Options(), log.Observer());
  auto request = MakeRequest({{500, 3}}, &cancelled);
  request->is_cancelled = [] { return true; };
  ASSERT_TRUE(batcher.Submit(request).ok());
  ASSERT_TRUE(cancelled.Wait());
  EXPECT_EQ(cancelled.status().code(), absl::StatusCode::kCancelled);
  EXPECT_FALSE(runner.SawToken(500));
  EXPECT_EQ(log.dropped("cancelled"), 1);
  EXPECT_EQ(cancelled.calls(), 1);
}

TEST(BatcherTest, CancellationStopsTheRestOfARequest) {
  FakeRunner runner;
  ObserverLog log;
  Done cancelled, after;
  std::atomic<bool> cancel{false};
  Batcher batcher(&runner, Options(/*max_sequences=*/1), log.Observer());
  auto request = MakeRequest({{700, 3}, {701, 3}, {702, 3}}, &cancelled);
  request->is_cancelled = [&cancel] { return cancel.load(); };
  runner.Hold();
  ASSERT_TRUE(batcher.Submit(request).ok());
  ASSERT_TRUE(runner.WaitForBatches(1));
  cancel = true;
  runner.Release();
  ASSERT_TRUE(cancelled.Wait());
  EXPECT_EQ(cancelled.status().code(), absl::StatusCode::kCancelled);
  ASSERT_TRUE(batcher.Submit(MakeRequest({{800, 2}}, &after)).ok());
  ASSERT_TRUE(after.Wait());
  EXPECT_TRUE(after.status().ok());
  EXPECT_TRUE(runner.SawToken(700));
  EXPECT_FALSE(runner.SawToken(701));
  EXPECT_FALSE(runner.SawToken(702));
  EXPECT_EQ(log.dropped("cancelled"), 2);
  EXPECT_EQ(cancelled.calls(), 1);
}

TEST(BatcherTest, QueueFullIsRejectedAtOnce) {
  FakeRunner runner;
  ObserverLog log;
  Done running, queued, rejected, fits;
  BatchOptions options = Options();
  options.max_queued_sequences = 4;
  Batcher batcher(&runner, options, log.Observer());
  runner.Hold();
  ASSERT_TRUE(batcher.Submit(MakeRequest({{1, 2}}, &running)).ok());
  ASSERT_TRUE(runner.WaitForBatches(1));
  ASSERT_TRUE(
      batcher.Submit(MakeRequest({{2, 2}, {3, 2}, {4, 2}}, &queued)).ok());
  const absl::Status status =
      batcher.Submit(MakeRequest({{5, 2}, {6, 2}}, &rejected));
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(status.message(), HasSubstr("3 sequences queued + 2 requested"));
  EXPECT_THAT(status.message(), HasSubstr("--max-queued-sequences=4"));
  EXPECT_EQ(log.dropped("overload"), 2);
  ASSERT_TRUE(batcher.Submit(MakeRequest({{7, 2}}, &fits)).ok());
  runner.Release();
  for (Done* d : {&running, &queued, &fits}) {
    ASSERT_TRUE(d->Wait());
    EXPECT_TRUE(d->status().ok()) << d->status();
    EXPECT_EQ(d->calls(), 1);
  }
  EXPECT_EQ(queued.results().size(), 3u);
  EXPECT_EQ(rejected.calls(), 0);
  EXPECT_FALSE(runner.SawToken(5));
}

TEST(BatcherTest, RunnerFailureFailsEveryRequestInTheBatch) {
  FakeRunner runner;
  Done first, a, b, c, next;
  Batcher batcher(&runner, Options());
  runner.Hold();
  ASSERT_TRUE(batcher.Submit(MakeRequest({{1, 2}}, &first)).ok());
  ASSERT_TRUE(runner.WaitForBatches(1));
  ASSERT_TRUE(batcher.Submit(MakeRequest({{10, 2}}, &a)).ok());
  ASSERT_TRUE(batcher.Submit(MakeRequest({{kFailToken, 2}}, &b)).ok());
  ASSERT_TRUE(batcher.Submit(MakeRequest({{20, 2}, {21, 2}}, &c)).ok());
  runner.Release();
  ASSERT_TRUE(first.Wait());
  EXPECT_TRUE(first.status().ok());
  for (Done* d : {&a, &b, &c}) {
    ASSERT_TRUE(d->Wait());
    EXPECT_EQ(d->status().code(), absl::StatusCode::kAborted);
    EXPECT_EQ(d->status().message(), "injected failure");
    EXPECT_THAT(d->results(), IsEmpty());
  }
  ASSERT_EQ(runner.batches().size(), 2u);
  EXPECT_EQ(runner.batches()[1].size(), 4u);
  ASSERT_TRUE(batcher.Submit(MakeRequest({{30, 2}}, &next)).ok());
  ASSERT_TRUE(next.Wait());
  EXPECT_TRUE(next.status().ok());
  for (Done* d : {&first, &a, &b, &c, &next}) EXPECT_EQ(d->calls(), 1);
}

TEST(BatcherTest, RunnerExceptionBecomesInternalAndWorkerSurvives) {
  FakeRunner runner;
  Done thrown, next;
  Batcher batcher(&runner, Options());
  ASSERT_TRUE(batcher.Submit(MakeRequest({{kThrowToken, 2}}, &thrown)).ok());
  ASSERT_TRUE(thrown.Wait());
  EXPECT_EQ(thrown.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(thrown.status().message(), HasSubstr("injected exception"));
  ASSERT_TRUE(batcher.Submit(MakeRequest({{5, 2}}, &next)).ok());
  ASSERT_TRUE(next.Wait());
  ASSERT_TRUE(next.status().ok());
  ExpectEcho(next.results()[0], 5, 2);
}

TEST(BatcherTest, WrongResultCountBecomesInternal) {
  FakeRunner runner;
  Done done;
  Batcher batcher(&runner, Options());
  ASSERT_TRUE(batcher.Submit(MakeRequest({{kShortToken, 2}}, &done)).ok());
  ASSERT_TRUE(done.Wait());
  EXPECT_EQ(done.status().code(), absl::StatusCode::kInternal);
}

TEST(BatcherTest, InvalidRequestsAreRejected) {
  FakeRunner runner;
  Done empty, no_done;
  Batcher batcher(&runner, Options());
  EXPECT_EQ(batcher.Submit(nullptr).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(batcher.Submit(MakeRequest({}, &empty)).code(),
            absl::StatusCode::kInvalidArgument);
  auto request = MakeRequest({{1, 2}}, &no_done);
  request->done = nullptr;
  EXPECT_EQ(batcher.Submit(request).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(empty.calls(), 0);
  EXPECT_EQ(batcher.queued_sequences(), 0);
}

TEST(BatcherTest, DrainCompletesAcceptedWorkThenRejects) {
  FakeRunner runner;
  Done a, b, c, late;
  Batcher batcher(&runner, Options());
  runner.Hold();
  ASSERT_TRUE(batcher.Submit(MakeRequest({{1, 2}}, &a)).ok());
  ASSERT_TRUE(runner.WaitForBatches(1));
  ASSERT_TRUE(batcher.Submit(MakeRequest({{2, 2}}, &b)).ok());
  ASSERT_TRUE(batcher.Submit(MakeRequest({{3, 2}, {4, 5}}, &c)).ok());
  // The runner is held, so nothing can complete before this deadline.
  EXPECT_FALSE(batcher.Drain(absl::Now() + absl::Milliseconds(20)));
  const absl::Status status = batcher.Submit(MakeRequest({{5, 2}}, &late));
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(status.message(), HasSubstr("shutting down"));
  runner.Release();
  EXPECT_TRUE(batcher.Drain(absl::Now() + kPatience));
  for (Done* d : {&a, &b, &c}) {
    EXPECT_EQ(d->calls(), 1);
    EXPECT_TRUE(d->status().ok()) << d->status();
  }
  EXPECT_EQ(c.results().size(), 2u);
  EXPECT_EQ(late.calls(), 0);
  EXPECT_FALSE(runner.SawToken(5));
}

TEST(BatcherTest, DrainDoesNotWaitForQueueDelay) {
  FakeRunner runner;
  Done done;
  BatchOptions options = Options();
  options.max_queue_delay = absl::Hours(1);
  Batcher batcher(&runner, options);
  ASSERT_TRUE(batcher.Submit(MakeRequest({{1, 2}}, &done)).ok());
  EXPECT_TRUE(batcher.Drain(absl::Now() + kPatience));
  EXPECT_TRUE(done.status().ok());
}

TEST(BatcherTest, DestructorFailsQueuedWorkWithUnavailable) {
  FakeRunner runner;
  ObserverLog log;
  Done a, b;
  {
    BatchOptions options = Options();
    options.max_queue_delay = absl::Hours(1);  // nothing starts on its own
    Batcher batcher(&runner, options, log.Observer());
    ASSERT_TRUE(batcher.Submit(MakeRequest({{1, 2}}, &a)).ok());
    ASSERT_TRUE(batcher.Submit(MakeRequest({{2, 2}, {3, 2}}, &b)).ok());
  }
  for (Done* d : {&a, &b}) {
    EXPECT_EQ(d->calls(), 1);
    EXPECT_EQ(d->status().code(), absl::StatusCode::kUnavailable);
  }
  EXPECT_TRUE(runner.batches().empty());
  EXPECT_EQ(log.dropped("shutdown"), 3);
}

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
                                 std::vector<SequenceResult> results) {
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
  // batch 3 is computed and its worker waits for room, so 4 and 5 stay
  // queued however long the callback takes.
  ASSERT_TRUE(runner.WaitForBatches(4));
  absl::SleepFor(absl::Milliseconds(200));
  EXPECT_EQ(runner.batches().size(), 4u);
  EXPECT_EQ(batcher.queued_sequences(), 2);
  gate.Open();
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
  Done small, big;
  Batcher batcher(&runner, Options());
  auto with_thread = [](Done* done, std::thread::id* where) {
    auto record = done->Callback();
    return [record, where](absl::Status status,
                           std::vector<SequenceResult> results) {
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
  EXPECT_EQ(small_thread, runner.run_thread());
  EXPECT_NE(big_thread, runner.run_thread());
  EXPECT_NE(big_thread, std::this_thread::get_id());
  EXPECT_EQ(big.results()[0].tokens.size(), 32768u);
}

TEST(BatcherTest, ManyThreadsSubmitConcurrently) {
  constexpr int kThreads = 8;
  constexpr int kRequestsPerThread = 50;
  FakeRunner runner;
  ObserverLog log;
  std::vector<Done> done(kThreads * kRequestsPerThread);
  auto sequences_of = [](int t, int i) {
    std::vector<std::pair<int64_t, int64_t>> sequences;
    for (int s = 0; s <= i % 3; ++s) {
      sequences.push_back({t * 100000 + i * 10 + s, 1 + (i + s) % 7});
    }
    return sequences;
  };
  Batcher batcher(&runner, Options(/*max_sequences=*/8), log.Observer());
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kRequestsPerThread; ++i) {
        Done* d = &done[t * kRequestsPerThread + i];
        EXPECT_TRUE(batcher.Submit(MakeRequest(sequences_of(t, i), d)).ok());
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  ASSERT_TRUE(batcher.Drain(absl::Now() + kPatience));

  size_t total = 0;
  for (int t = 0; t < kThreads; ++t) {
    for (int i = 0; i < kRequestsPerThread; ++i) {
      const Done& d = done[t * kRequestsPerThread + i];
      ASSERT_EQ(d.calls(), 1);
      ASSERT_TRUE(d.status().ok()) << d.status();
      const auto expected = sequences_of(t, i);
      const auto results = d.results();
      ASSERT_EQ(results.size(), expected.size());
      for (size_t s = 0; s < expected.size(); ++s) {
        ExpectEcho(results[s], expected[s].first, expected[s].second);
      }
      total += expected.size();
    }
  }
  size_t seen = 0;
  const auto batches = runner.batches();
  for (const auto& batch : batches) {
    EXPECT_LE(batch.size(), 8u);
    seen += batch.size();
  }
  EXPECT_EQ(seen, total);
  EXPECT_EQ(log.batches(), static_cast<int64_t>(batches.size()));
}

}  // namespace
}  // namespace encoder::batching
