// A single worker thread with a bounded FIFO of tasks.
#ifndef ENCODER_SERVER_SERVICE_WORK_QUEUE_H_
#define ENCODER_SERVER_SERVICE_WORK_QUEUE_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace encoder::service {

class WorkQueue {
 public:
  explicit WorkQueue(int64_t max_pending);
  // Runs every task already queued, then joins.
  ~WorkQueue();

  // Returns false (and drops the task) when max_pending tasks wait already.
  bool TrySubmit(std::function<void()> task) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Loop() ABSL_LOCKS_EXCLUDED(mu_);

  const int64_t max_pending_;
  absl::Mutex mu_;
  absl::CondVar cv_;  // a task arrived or stopping
  std::deque<std::function<void()>> tasks_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread worker_;
};

}  // namespace encoder::service

#endif  // ENCODER_SERVER_SERVICE_WORK_QUEUE_H_
