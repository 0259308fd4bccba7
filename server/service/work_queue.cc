#include "server/service/work_queue.h"

namespace encoder::service {

WorkQueue::WorkQueue(int64_t max_pending)
    : max_pending_(max_pending), worker_([this] { Loop(); }) {}

WorkQueue::~WorkQueue() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  cv_.SignalAll();
  worker_.join();
}

bool WorkQueue::TrySubmit(std::function<void()> task) {
  {
    absl::MutexLock lock(&mu_);
    if (static_cast<int64_t>(tasks_.size()) >= max_pending_) return false;
    tasks_.push_back(std::move(task));
  }
  cv_.Signal();
  return true;
}

void WorkQueue::Loop() {
  for (;;) {
    std::function<void()> task;
    {
      absl::MutexLock lock(&mu_);
      while (!stopping_ && tasks_.empty()) cv_.Wait(&mu_);
      if (tasks_.empty()) return;  // stopping and nothing left
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    task();
  }
}

}  // namespace encoder::service
