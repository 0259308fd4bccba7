// Bytes of responses that the server owes its clients and they have not yet
// taken: a caller that never reads (or reads slowly) leaves its responses
// in the server's memory, where HTTP/2 flow control stops them. This ledger
// counts them per connection and in total, from admission (an Embed call
// reserves its estimated response size) through serialization (the actual
// size) until gRPC reports the call, or the stream's write, done. New work
// is refused while a connection or the whole server would hold more than
// its limit.
//
// A response is never dropped for the limits: they are checked when a call
// is admitted. A call is always admitted when its connection (or the
// server) holds nothing, so one response larger than a limit still runs.
#ifndef ENCODER_SERVER_CORE_UNREAD_RESPONSES_H_
#define ENCODER_SERVER_CORE_UNREAD_RESPONSES_H_

#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace encoder::core {

struct UnreadLimits {
  int64_t total_bytes = int64_t{1} << 30;  // all connections
  int64_t per_connection_bytes = int64_t{256} << 20;
};

class UnreadResponses {
 public:
  // Called with the new total after every change (for a gauge).
  using Observer = std::function<void(int64_t total_bytes)>;

  explicit UnreadResponses(UnreadLimits limits, Observer observer = nullptr);

  // A count of `bytes` held for `connection` until destroyed (or Reset).
  class Hold {
   public:
    Hold() = default;
    Hold(Hold&& other) noexcept;
    Hold& operator=(Hold&& other) noexcept;
    Hold(const Hold&) = delete;
    Hold& operator=(const Hold&) = delete;
    ~Hold() { Reset(); }
    void Reset();

   private:
    friend class UnreadResponses;
    UnreadResponses* owner_ = nullptr;
    std::string connection_;
    int64_t bytes_ = 0;
  };

  // Counts `bytes` for `connection` (gRPC's peer string: one per client
  // connection) unless the connection or the server already holds bytes
  // and would go over its limit with these; then RESOURCE_EXHAUSTED naming
  // the held bytes and the limit's flag.
  absl::StatusOr<Hold> Reserve(const std::string& connection, int64_t bytes)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Reserve with 0 bytes: fails only when a limit is already exceeded.
  absl::Status Admit(const std::string& connection);

  // Counts `bytes` whatever the limits (a response already produced).
  Hold Add(const std::string& connection, int64_t bytes)
      ABSL_LOCKS_EXCLUDED(mu_);

  int64_t total_bytes() const;
  int64_t connection_bytes(const std::string& connection) const;
  const UnreadLimits& limits() const { return limits_; }

 private:
  void Release(const std::string& connection, int64_t bytes)
      ABSL_LOCKS_EXCLUDED(mu_);

  const UnreadLimits limits_;
  const Observer observer_;  // called without mu_
  mutable absl::Mutex mu_;
  std::unordered_map<std::string, int64_t> by_connection_ ABSL_GUARDED_BY(mu_);
  int64_t total_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace encoder::core

#endif  // ENCODER_SERVER_CORE_UNREAD_RESPONSES_H_
