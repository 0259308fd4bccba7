// A single worker thread with a bounded FIFO of tasks.
#ifndef ENCODER_SERVER_SERVICE_WORK_QUEUE_H_
#define ENCODER_SERVER_SERVICE_WORK_QUEUE_H_

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace encoder::service {

class WorkQueue {
 public:
  explicit WorkQueue(int64_t max_pending);
  // Runs every task already queued, then joins.
  ~WorkQueue();

  // Returns false (and drops the task) when max_pending tasks wait already.
  bool TrySubmit(std::function<void()> task);

 private:
  void Loop();

  const int64_t max_pending_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  bool stopping_ = false;
  std::thread worker_;
};

}  // namespace encoder::service

#endif  // ENCODER_SERVER_SERVICE_WORK_QUEUE_H_
