// Test doubles shared by the batcher's tests: an echo ModelRunner that
// records its batches and can be held, a completion recorder, an observer
// log, and request helpers.
#ifndef ENCODER_TESTS_BATCHING_BATCHER_FAKES_H_
#define ENCODER_TESTS_BATCHING_BATCHER_FAKES_H_

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

inline std::vector<int64_t> Tokens(int64_t first, int64_t length) {
  std::vector<int64_t> tokens(length, 1);
  tokens[0] = first;
  return tokens;
}

// A request of sequences given as (first token, length) pairs.
inline std::shared_ptr<Request> MakeRequest(
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

inline void ExpectEcho(const SequenceResult& result, int64_t first,
                       int64_t length) {
  ASSERT_EQ(result.pooled.size(), 3u);
  EXPECT_EQ(result.pooled[0], static_cast<float>(first));
  EXPECT_EQ(result.pooled[1], static_cast<float>(length));
  EXPECT_EQ(result.num_tokens, length);
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
