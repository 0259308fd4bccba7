// A mutex, scoped lock and condition variable with Abseil's interface and
// clang thread-safety annotations (ABSL_GUARDED_BY and friends), built on
// std::mutex and std::condition_variable.
//
// Why not absl::Mutex: the batcher's concurrency is checked with
// ThreadSanitizer (scripts/sanitize.sh), and TSan sees synchronization only
// in instrumented code or through the pthread calls it intercepts. The
// distribution's Abseil is not instrumented, so every absl::Mutex hand-off
// shows up as a data race; std::mutex ends in pthread_mutex_lock, which
// TSan understands. Code that TSan does not run (the gRPC service) uses
// absl::Mutex directly. The names match absl's, so either can replace the
// other by changing the type.
#ifndef ENCODER_SERVER_COMMON_MUTEX_H_
#define ENCODER_SERVER_COMMON_MUTEX_H_

#include <algorithm>
#include <condition_variable>
#include <mutex>

#include "absl/base/thread_annotations.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace encoder {

class ABSL_LOCKABLE Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  void Unlock() ABSL_UNLOCK_FUNCTION() { mu_.unlock(); }

 private:
  friend class CondVar;
  std::mutex mu_;
};

class ABSL_SCOPED_LOCKABLE MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) {
    mu_->Lock();
  }
  ~MutexLock() ABSL_UNLOCK_FUNCTION() { mu_->Unlock(); }

  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex* const mu_;
};

class CondVar {
 public:
  // Releases `mu` while waiting and holds it again on return. Wake-ups may
  // be spurious: callers re-check their condition in a loop.
  void Wait(Mutex* mu) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    cv_.wait(lock);
    lock.release();
  }
  // As Wait, returning by `deadline` at the latest (InfiniteFuture: no
  // deadline). Returns whether the deadline has passed.
  bool WaitWithDeadline(Mutex* mu, absl::Time deadline)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    if (deadline == absl::InfiniteFuture()) {
      Wait(mu);
      return false;
    }
    // Waits of at most kMaxWait at a time keep the chrono conversion in
    // range; the caller's loop waits again.
    constexpr absl::Duration kMaxWait = absl::Hours(1);
    const absl::Duration left =
        std::clamp(deadline - absl::Now(), absl::ZeroDuration(), kMaxWait);
    std::unique_lock<std::mutex> lock(mu->mu_, std::adopt_lock);
    cv_.wait_for(lock, absl::ToChronoNanoseconds(left));
    lock.release();
    return absl::Now() >= deadline;
  }
  void Signal() { cv_.notify_one(); }
  void SignalAll() { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
};

}  // namespace encoder

#endif  // ENCODER_SERVER_COMMON_MUTEX_H_
