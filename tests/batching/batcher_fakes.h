// Test doubles shared by the batcher's tests: an echo ModelRunner that
// records its batches and can be held, a completion recorder, an observer
// log, and request helpers.
#ifndef ENCODER_TESTS_BATCHING_BATCHER_FAKES_H_
#define ENCODER_TESTS_BATCHING_BATCHER_FAKES_H_

#include <any>
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

#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "server/batching/batcher.h"

namespace encoder::batching::fakes {

// First-token commands understood by FakeRunner.
inline constexpr int64_t kFailToken = -1;   // the batch fails with ABORTED
inline constexpr int64_t kThrowToken = -2;  // Run throws std::runtime_error
inline constexpr int64_t kShortToken = -3;  // Run returns one result too few
inline constexpr int64_t kBigToken =
    -4;  // the result carries 128 KiB of tokens

// Generous bound for waits that succeed at once unless the code is broken.
inline constexpr absl::Duration kPatience = absl::Seconds(30);

// The fake runner's work: a command or tag in the first token's place.
struct FakeWork {
  int64_t first_token = 0;
};

// What the fake runner returns for one item.
struct Echo {
  std::vector<float> pooled;
  std::vector<float> tokens;
  int64_t num_tokens = 0;
};

// Echo model: pooled = {first token id, length, position in the batch}.
// Records every batch it sees; Hold() makes each Run block (after recording
// its batch) until Release().
class FakeRunner : public ModelRunner {
 public:
  struct Seen {
    int64_t first_token;
    int64_t length;
  };

  absl::Status Run(const std::vector<const BatchItem*>& batch,
                   std::vector<ItemResult>* results,
                   const RunContext& context) override {
    std::vector<Seen> seen;
    for (const BatchItem* item : batch) {
      const auto* work = std::any_cast<FakeWork>(&item->work);
      if (work == nullptr) {
        return absl::InvalidArgumentError("not a FakeWork item");
      }
      seen.push_back({work->first_token, item->length});
    }
    {
      std::unique_lock<std::mutex> lock(mu_);
      run_thread_ = std::this_thread::get_id();
      batches_.push_back(seen);
      cv_.notify_all();
      // A held batch asks, as a long forward pass does between its layers,
      // whether it is still wanted.
      while (held_) {
        cv_.wait_for(lock, std::chrono::milliseconds(2));
        lock.unlock();
        absl::Status stop = context.Check();
        lock.lock();
        if (!stop.ok()) {
          ++stopped_;
          cv_.notify_all();
          return stop;
        }
      }
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
      Echo echo;
      echo.pooled = {static_cast<float>(seen[i].first_token),
                     static_cast<float>(seen[i].length), static_cast<float>(i)};
      echo.num_tokens = seen[i].length;
      if (seen[i].first_token == kBigToken) echo.tokens.resize(32768);
      (*results)[i].bytes = static_cast<int64_t>(
          (echo.pooled.size() + echo.tokens.size()) * sizeof(float));
      (*results)[i].output = std::move(echo);
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
  // Batches that stopped early because their context said so.
  int stopped() const {
    std::lock_guard<std::mutex> lock(mu_);
    return stopped_;
  }
  // Waits until `n` batches have stopped early.
  bool WaitForStopped(int n) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, absl::ToChronoSeconds(kPatience),
                        [&] { return stopped_ >= n; });
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
  int stopped_ = 0;
  std::vector<std::vector<Seen>> batches_;
  std::thread::id run_thread_;
};

// Collects the completion of one request.
class Done {
 public:
  std::function<void(absl::Status, std::vector<ItemResult>)> Callback() {
    return [this](absl::Status status, std::vector<ItemResult> results) {
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
  std::vector<ItemResult> results() const {
    std::lock_guard<std::mutex> lock(mu_);
    return results_;
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  int calls_ = 0;
  absl::Status status_ = absl::UnknownError("not completed");
  std::vector<ItemResult> results_;
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

// A request of sequences given as (first token, length) pairs.
inline std::shared_ptr<Request> MakeRequest(
    const std::vector<std::pair<int64_t, int64_t>>& sequences, Done* done) {
  auto request = std::make_shared<Request>();
  for (const auto& [first, length] : sequences) {
    BatchItem item;
    item.length = length;
    item.work = FakeWork{first};
    request->sequences.push_back(std::move(item));
  }
  request->done = done->Callback();
  return request;
}

// The echo in `result`; null (and a test failure) when it carries none.
inline const Echo* EchoOf(const ItemResult& result) {
  const Echo* echo = std::any_cast<Echo>(&result.output);
  EXPECT_NE(echo, nullptr) << "the result carries no Echo";
  return echo;
}

inline void ExpectEcho(const ItemResult& result, int64_t first,
                       int64_t length) {
  const Echo* echo = EchoOf(result);
  ASSERT_NE(echo, nullptr);
  ASSERT_EQ(echo->pooled.size(), 3u);
  EXPECT_EQ(echo->pooled[0], static_cast<float>(first));
  EXPECT_EQ(echo->pooled[1], static_cast<float>(length));
  EXPECT_EQ(echo->num_tokens, length);
}

inline BatchOptions Options(int64_t max_sequences = 32,
                            int64_t max_tokens = 16384) {
  BatchOptions options;
  options.max_batch_sequences = max_sequences;
  options.max_batch_tokens = max_tokens;
  return options;
}

inline std::vector<int64_t> FirstTokens(
    const std::vector<FakeRunner::Seen>& batch) {
  std::vector<int64_t> tokens;
  for (const auto& s : batch) tokens.push_back(s.first_token);
  return tokens;
}

}  // namespace encoder::batching::fakes

#endif  // ENCODER_TESTS_BATCHING_BATCHER_FAKES_H_
