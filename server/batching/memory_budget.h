// The memory that running batches may hold at once, shared by every model's
// batcher, and the memory the process may use at all.
#ifndef ENCODER_SERVER_BATCHING_MEMORY_BUDGET_H_
#define ENCODER_SERVER_BATCHING_MEMORY_BUDGET_H_

#include <cstdint>
#include <string>

#include "absl/base/thread_annotations.h"
#include "server/common/mutex.h"

namespace encoder::batching {

// A counting budget in bytes. A batch acquires its cost before it runs and
// releases it after, so the batches of all models together stay within the
// capacity; a worker whose batch does not fit waits. Thread-safe.
class MemoryBudget {
 public:
  explicit MemoryBudget(int64_t capacity_bytes);

  MemoryBudget(const MemoryBudget&) = delete;
  MemoryBudget& operator=(const MemoryBudget&) = delete;

  int64_t capacity() const;
  int64_t held() const ABSL_LOCKS_EXCLUDED(mu_);

  // Waits until `bytes` fit beside what is held. A request larger than the
  // whole capacity waits until nothing else is held, then proceeds alone
  // (admission keeps such requests out; this only keeps progress).
  void Acquire(int64_t bytes) ABSL_LOCKS_EXCLUDED(mu_);
  void Release(int64_t bytes) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  const int64_t capacity_;
  mutable Mutex mu_;
  CondVar cv_;  // signalled on every Release
  int64_t held_ ABSL_GUARDED_BY(mu_) = 0;
};

// The memory this process may use, in bytes: the cgroup limit (v2
// memory.max, else v1 memory.limit_in_bytes) when there is one, else the
// machine's MemTotal. `source` (may be null) names where it came from.
int64_t DetectMemoryLimit(std::string* source);

}  // namespace encoder::batching

#endif  // ENCODER_SERVER_BATCHING_MEMORY_BUDGET_H_
