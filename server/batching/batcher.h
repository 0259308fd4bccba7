// Dynamic batcher: one per model. Callers submit requests of one or more
// sequences; one worker thread forms batches with DecideBatch and hands each
// to one of BatchOptions::executions executor threads, which run it on the
// ModelRunner; the worker forms the next batch as soon as an executor is
// free (with several, an even share of the work, and beside a running
// batch only one WorthAnotherExecution) and files each finished batch's
// results. A further thread, the responder, completes each request through
// its callback once all of its sequences are done, so that packing a large
// response overlaps the next forward pass (small ones the worker completes
// itself). No thread waits per request.
#ifndef ENCODER_SERVER_BATCHING_BATCHER_H_
#define ENCODER_SERVER_BATCHING_BATCHER_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <set>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "server/batching/batch_policy.h"
#include "server/batching/model_runner.h"
#include "server/batching/types.h"
#include "server/common/mutex.h"

namespace encoder::batching {

// Hooks the batcher calls for metrics; all optional. They are called on the
// worker thread (on_batch once the batch has finished), except
// on_dropped("overload") which is called inside a failing Submit on the
// submitting thread, so on_dropped may run concurrently with itself and must be
// thread-safe. Never called with the batcher's lock held; a hook may call
// Submit but must neither call Drain nor destroy the batcher (the worker would
// wait for itself).
struct BatcherObserver {
  // Once per forward pass; queue_seconds is that of the oldest member.
  std::function<void(const BatchStats&)> on_batch;
  // Sequences discarded without compute. reason: "deadline", "cancelled",
  // "overload" (Submit rejected them), "shutdown" (queued at destruction).
  std::function<void(const char* reason, int64_t sequences)> on_dropped;
  // The number of queued (not running) sequences, when the worker sees it
  // change.
  std::function<void(int64_t queued_sequences)> on_queue_depth;
  // The number of batches computing (handed to an executor and not yet
  // finished), when the worker sees it change.
  std::function<void(int64_t running_batches)> on_running;
};

// One caller's unit of submission. The batcher shares ownership from Submit
// until `done` has returned and no batch still runs any of its sequences
// (when one of its batches fails, the others may still be running); the
// caller must not modify it in between.
struct Request {
  std::vector<BatchItem> sequences;
  // Sequences not started by then are dropped and the request fails with
  // DEADLINE_EXCEEDED at once, also while a batch of it runs: that batch
  // stops at its next step (RunContext) unless another request in it is
  // still waiting for it.
  absl::Time deadline = absl::InfiniteFuture();
  // Polled on the worker thread before a sequence's batch is handed to an
  // executor, and every kPollInterval while a batch of the request runs
  // (CANCELLED as above); may be empty. Never called once `done` has been
  // called. Must be thread-safe and must not throw.
  std::function<bool()> is_cancelled;
  // Required. Called exactly once per accepted request, on the batcher's
  // responder thread, or on the worker for results of a few KiB while the
  // responder is idle (either way in the order the requests' last
  // sequences finished), with results in the order of
  // `sequences` when OK; on error the vector is empty. Never called when
  // Submit fails. Must not block for long, must not throw, must neither
  // call Drain nor destroy the batcher.
  std::function<void(absl::Status, std::vector<ItemResult>)> done;
  // The call is traced: its batches count it in BatchStats::traced.
  bool traced = false;
};

class Batcher {
 public:
  // `runner` is not owned, must not be null and must outlive the batcher.
  // Starts the worker, executor and responder threads.
  Batcher(ModelRunner* runner, BatchOptions options,
          BatcherObserver observer = {});
  // Stops accepting, lets running batches finish, fails queued work with
  // UNAVAILABLE (each `done` called as described at Request::done), joins
  // every thread once every `done` has returned.
  ~Batcher();

  Batcher(const Batcher&) = delete;
  Batcher& operator=(const Batcher&) = delete;

  // Queues a request. On INVALID_ARGUMENT (null request, no sequences or no
  // `done`), RESOURCE_EXHAUSTED (queue full; message names the limit) or
  // UNAVAILABLE (draining), nothing is queued and `done` is NOT called: the
  // status is returned to the caller instead. Thread-safe.
  absl::Status Submit(std::shared_ptr<Request> request)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Stops accepting new requests (Submit -> UNAVAILABLE) and waits until
  // every accepted request has completed or `deadline` passes; returns
  // whether all completed. While draining, batches start without waiting
  // for max_queue_delay (no company can arrive). Remaining work is failed
  // with UNAVAILABLE on destruction. Thread-safe.
  bool Drain(absl::Time deadline) ABSL_LOCKS_EXCLUDED(mu_);

  // Sequences accepted and not yet taken into a batch. Thread-safe.
  int64_t queued_sequences() const ABSL_LOCKS_EXCLUDED(mu_);
  const BatchOptions& options() const { return options_; }
  // The compute rate the batcher measures (BatchOptions::work_per_second:
  // compute units per second of one execution); 0 until known.
  // Thread-safe.
  double work_per_second() const { return work_rate_.load(); }
  // The measured scale of a ComputeClass (BatchOptions::compute_scale)
  // as it stands now: the class's own measured time per unit of compute
  // times the plain rate; 1 (as priced) while either is unknown.
  // Thread-safe.
  double compute_scale(ComputeClass c) const;

  // How often the worker looks at the requests of running batches for a
  // passed deadline or a cancellation.
  static constexpr absl::Duration kPollInterval = absl::Milliseconds(100);

 private:
  // Progress of one accepted request. Created by Submit; afterwards read and
  // written only by the worker thread, so it needs no lock of its own.
  struct RequestState {
    std::shared_ptr<Request> request;
    absl::Time submitted;
    std::vector<ItemResult> results;  // indexed like request->sequences
    size_t remaining = 0;             // sequences without a result yet
    int64_t share = 0;    // sequences served, in virtual time; guarded by mu_
    bool failed = false;  // `done` already has its error
    // `failed`, for the executors, which read nothing else of the state:
    // a batch whose requests have all failed stops early.
    std::atomic<bool> abandoned{false};
    int running_batches = 0;  // batches of it handed out and not filed
    // Why a failed request's other sequences count as dropped; null when
    // the failure was not a drop (a runner error).
    const char* drop_reason = nullptr;
  };

  // One queued sequence: its request and its index in request->sequences.
  struct Pending {
    std::shared_ptr<RequestState> state;
    size_t index = 0;
  };

  // A request whose `done` is due, with its final status.
  struct Completion {
    std::shared_ptr<RequestState> state;
    absl::Status status;
  };

  struct DropCounts;  // sequences dropped in one round, by reason

  // One batch on its way through an executor. The worker fills the first
  // part, the executor the second; the executor reads only the items
  // (immutable since Submit), never the requests' states.
  struct Job {
    std::vector<Pending> run;
    std::vector<const BatchItem*> items;  // run's items, in order
    int64_t cost = 0;                     // of the memory budget
    int64_t work = 0;  // compute, as the items price it, times its scale
    // The items' compute by class, as priced (unscaled): what the batch's
    // time teaches about each class's scale (FinishJob).
    std::array<int64_t, kComputeClasses> class_work{};
    bool long_batch = false;  // IsLongBatch when it started
    absl::Time expected_end = absl::InfiniteFuture();
    BatchStats stats;  // sizes by the worker, seconds by the executor
    absl::Time start;  // when the executor began it
    absl::Status status;
    std::vector<ItemResult> results;
  };

  void WorkerLoop() ABSL_LOCKS_EXCLUDED(mu_);
  // Takes the queue entries the decision names and charges their requests'
  // shares.
  std::vector<Pending> PopLocked(const BatchDecision& decision)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Drops what of `batch` may not run and hands the rest to an executor;
  // `options` carry the rate it is timed by. Worker thread.
  void StartBatch(std::vector<Pending> batch, const BatchOptions& options)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Fails the requests of running batches whose deadline passed or that
  // were cancelled, so that their batches stop. Worker thread.
  void PollRunning() ABSL_LOCKS_EXCLUDED(mu_);
  // Whether a running batch of `job` is still wanted (RunContext). Any
  // thread.
  static absl::Status StillWanted(const Job& job);
  // An executor thread: runs jobs until the worker stops them.
  void ExecutorLoop() ABSL_LOCKS_EXCLUDED(mu_);
  // Moves the measured rate (a plain batch) or the time per unit of the
  // batch's other classes (the time its plain part leaves) toward what
  // `job`, just finished, took. Worker thread.
  void LearnRates(const Job& job);
  // Runs one job's items under its share of the memory budget. Executor.
  void Execute(Job* job);
  // Files a finished job's results or error in its requests. Worker thread.
  void FinishJob(Job job) ABSL_LOCKS_EXCLUDED(mu_);
  // After a round's failures and results: discards the queued sequences of
  // failed requests, reports the drops and hands the completions over.
  // Worker thread.
  void Settle(std::vector<Completion> completions, DropCounts drops)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Marks the request failed and schedules its `done` with `status`.
  static void Fail(const std::shared_ptr<RequestState>& state,
                   absl::Status status, const char* drop_reason,
                   std::vector<Completion>* completions);
  // Fails the request of `state` (not yet failed) when its deadline has
  // passed ("deadline passed " + `when`) or it was cancelled, and returns
  // the drop reason; null when it is still wanted. Worker thread.
  static const char* FailIfGaveUp(const std::shared_ptr<RequestState>& state,
                                  absl::Time now, const char* when,
                                  std::vector<Completion>* completions);
  // Returns the members of `batch` that may be computed; fails the requests
  // of the others (deadline passed, cancelled, already failed).
  std::vector<Pending> TakeRunnable(std::vector<Pending> batch,
                                    std::vector<Completion>* completions,
                                    DropCounts* drops);
  // Runs `items` on the runner (or the one item that runs alone, itself),
  // turning exceptions into INTERNAL.
  absl::Status RunGuarded(const std::vector<const BatchItem*>& items,
                          std::vector<ItemResult>* results,
                          const RunContext& context);
  // Removes the queued sequences of failed requests and returns them, so
  // that they are discarded without compute.
  std::vector<Pending> PurgeFailed() ABSL_LOCKS_EXCLUDED(mu_);
  // Passes completions to the responder. Worker thread; waits while
  // kMaxWaitingRounds rounds of them are still waiting, so that finished
  // results cannot pile up when packing them is slower than computing them.
  // Completes them itself instead when they carry at most
  // kInlineCompletionBytes of results and the responder is idle.
  void HandOver(std::vector<Completion> completions)
      ABSL_LOCKS_EXCLUDED(respond_mu_);
  // The responder thread: runs Complete on each handed-over round, in
  // order, until the worker has exited and nothing is left.
  void ResponderLoop() ABSL_LOCKS_EXCLUDED(respond_mu_);
  // Calls `done` for each completion, then updates in_flight_requests_.
  // Responder thread, or the worker for small rounds (HandOver).
  void Complete(std::vector<Completion> completions) ABSL_LOCKS_EXCLUDED(mu_);
  // Fails everything still queued with UNAVAILABLE. Worker thread, at exit.
  void FailQueued() ABSL_LOCKS_EXCLUDED(mu_);

  // Rounds of completions (one per batch) that may wait for the responder.
  static constexpr size_t kMaxWaitingRounds = 2;
  // Results small enough that waking the responder would cost more than
  // packing them (a pooled embedding is 2-16 KiB).
  static constexpr int64_t kInlineCompletionBytes = int64_t{64} << 10;

  ModelRunner* runner_;
  const BatchOptions options_;
  BatcherObserver observer_;

  mutable Mutex mu_;
  CondVar cv_;                                      // worker: work or stopping
  CondVar idle_cv_;                                 // Drain: accepted work done
  std::deque<Pending> queue_ ABSL_GUARDED_BY(mu_);  // arrival order
  // Accepted requests whose `done` has not yet returned.
  int64_t in_flight_requests_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t virtual_time_ ABSL_GUARDED_BY(mu_) = 0;  // share of the last anchor
  bool accepting_ ABSL_GUARDED_BY(mu_) = true;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // Worker <-> executors: jobs waiting for an executor, and finished jobs
  // waiting for the worker; running_ counts jobs handed out and not yet
  // finished (at most options_.executions).
  CondVar job_cv_;  // executors: a job waits, or they stop
  std::deque<Job> jobs_ ABSL_GUARDED_BY(mu_);
  std::deque<Job> finished_ ABSL_GUARDED_BY(mu_);
  int running_ ABSL_GUARDED_BY(mu_) = 0;
  int running_long_ ABSL_GUARDED_BY(mu_) = 0;  // long batches among them
  // Their expected ends (InfiniteFuture where the rate was unknown).
  std::multiset<absl::Time> running_ends_ ABSL_GUARDED_BY(mu_);
  int64_t running_sequences_ ABSL_GUARDED_BY(mu_) = 0;  // in those jobs
  bool executors_stop_ ABSL_GUARDED_BY(mu_) = false;

  // Worker -> responder hand-over; its own lock, so that packing responses
  // never holds up Submit.
  Mutex respond_mu_;
  CondVar respond_cv_;  // responder: a round waits, or the worker exited
  CondVar room_cv_;     // worker: a waiting round was taken
  std::deque<std::vector<Completion>> waiting_rounds_
      ABSL_GUARDED_BY(respond_mu_);
  bool worker_exited_ ABSL_GUARDED_BY(respond_mu_) = false;
  bool responder_busy_ ABSL_GUARDED_BY(respond_mu_) = false;  // in Complete

  // Measured compute rate; written by the worker only.
  std::atomic<double> work_rate_{0};
  // Measured seconds per unit of compute of each ComputeClass but the
  // plain one (whose rate is work_rate_); 0: unknown. Written by the
  // worker only.
  std::array<std::atomic<double>, kComputeClasses> unit_seconds_;
  // Requests with a batch running, polled by PollRunning. Worker thread.
  std::vector<std::shared_ptr<RequestState>> running_requests_;

  std::thread worker_;
  std::thread responder_;
  std::vector<std::thread> executors_;  // joined by the worker as it exits
};

}  // namespace encoder::batching

#endif  // ENCODER_SERVER_BATCHING_BATCHER_H_
