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
#include "tests/batching/batcher_fakes.h"

namespace encoder::batching {
namespace {

using namespace fakes;  // NOLINT(build/namespaces): the test doubles

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

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
