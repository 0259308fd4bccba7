#include "server/batching/batcher.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <iterator>
#include <string>
#include <unordered_map>
#include <utility>

#include "server/batching/memory_budget.h"
#include "server/common/thread_name.h"

#include "absl/strings/str_cat.h"

namespace encoder::batching {
namespace {

// BatchStats::id: batches are numbered across every batcher of the process.
uint64_t NextBatchId() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

constexpr char kDeadline[] = "deadline";
constexpr char kCancelled[] = "cancelled";
constexpr char kOverload[] = "overload";
constexpr char kShutdown[] = "shutdown";

}  // namespace

// Sequences dropped by the worker in one round, reported once per reason.
struct Batcher::DropCounts {
  int64_t deadline = 0;
  int64_t cancelled = 0;

  void Add(const char* reason, int64_t n) {
    if (reason == kDeadline) deadline += n;
    if (reason == kCancelled) cancelled += n;
  }
  void Report(const BatcherObserver& observer) const {
    if (!observer.on_dropped) return;
    if (deadline > 0) observer.on_dropped(kDeadline, deadline);
    if (cancelled > 0) observer.on_dropped(kCancelled, cancelled);
  }
};

Batcher::Batcher(ModelRunner* runner, BatchOptions options,
                 BatcherObserver observer)
    : runner_(runner),
      options_(std::move(options)),
      observer_(std::move(observer)),
      work_rate_(std::max(0.0, options_.work_per_second)) {
  // A class's time per unit of compute, from its scale at the start-up
  // rate; unknown (0) without a rate, until one of its batches has run.
  const double rate = work_rate_.load();
  for (int c = 0; c < kComputeClasses; ++c) {
    unit_seconds_[c].store(c == kPlainCompute || rate <= 0
                               ? 0.0
                               : std::max(0.0, options_.compute_scale[c]) /
                                     rate);
  }
  responder_ = std::thread(&Batcher::ResponderLoop, this);
  const int executions = std::max(1, options_.executions);
  for (int i = 0; i < executions; ++i) {
    executors_.emplace_back(&Batcher::ExecutorLoop, this);
  }
  worker_ = std::thread(&Batcher::WorkerLoop, this);
}

Batcher::~Batcher() {
  {
    MutexLock lock(&mu_);
    accepting_ = false;
    stopping_ = true;
  }
  cv_.SignalAll();
  worker_.join();  // its last round is handed over by then
  {
    MutexLock lock(&respond_mu_);
    worker_exited_ = true;
  }
  respond_cv_.SignalAll();
  responder_.join();
}

absl::Status Batcher::Submit(std::shared_ptr<Request> request) {
  if (request == nullptr || request->sequences.empty()) {
    return absl::InvalidArgumentError("request has no sequences");
  }
  if (!request->done) {
    return absl::InvalidArgumentError("request has no completion callback");
  }
  const int64_t count = static_cast<int64_t>(request->sequences.size());
  auto state = std::make_shared<RequestState>();
  state->request = std::move(request);
  state->submitted = absl::Now();
  state->results.resize(count);
  state->remaining = count;

  int64_t queued = 0;
  bool full = false;
  {
    MutexLock lock(&mu_);
    if (!accepting_) return absl::UnavailableError("server is shutting down");
    queued = static_cast<int64_t>(queue_.size());
    full = queued + count > options_.max_queued_sequences;
    if (!full) {
      state->share = virtual_time_;
      for (int64_t i = 0; i < count; ++i) {
        queue_.push_back(Pending{state, static_cast<size_t>(i)});
      }
      ++in_flight_requests_;
    }
  }
  if (full) {
    if (observer_.on_dropped) observer_.on_dropped(kOverload, count);
    return absl::ResourceExhaustedError(absl::StrCat(
        "queue full: ", queued, " sequences queued + ", count,
        " requested > --max-queued-sequences=", options_.max_queued_sequences,
        "; retry with backoff"));
  }
  cv_.Signal();
  return absl::OkStatus();
}

bool Batcher::Drain(absl::Time deadline) {
  MutexLock lock(&mu_);
  if (accepting_) {
    accepting_ = false;
    cv_.Signal();  // the worker stops waiting for company
  }
  while (in_flight_requests_ > 0) {
    if (absl::Now() >= deadline) return false;
    idle_cv_.WaitWithDeadline(&mu_, deadline);
  }
  return true;
}

int64_t Batcher::queued_sequences() const {
  MutexLock lock(&mu_);
  return static_cast<int64_t>(queue_.size());
}

void Batcher::WorkerLoop() {
  NameThisThread("batch-plan");
  // Once draining, nothing new can arrive, so a batch never waits for one.
  BatchOptions serve_options = options_;
  if (options_.memory_budget != nullptr) {
    const int64_t capacity = options_.memory_budget->capacity();
    if (serve_options.max_batch_cost_bytes <= 0 ||
        serve_options.max_batch_cost_bytes > capacity) {
      serve_options.max_batch_cost_bytes = capacity;
    }
  }
  BatchOptions flush_options = serve_options;
  flush_options.max_queue_delay = absl::ZeroDuration();
  const int executions = static_cast<int>(executors_.size());
  std::unordered_map<const RequestState*, int64_t> ranks;

  std::vector<QueuedSequence> view;
  int64_t reported_depth = -1;
  int64_t reported_running = -1;
  absl::Time next_poll = absl::InfinitePast();
  mu_.Lock();
  for (;;) {
    const int64_t depth = static_cast<int64_t>(queue_.size());
    if (depth != reported_depth && observer_.on_queue_depth) {
      reported_depth = depth;
      mu_.Unlock();
      observer_.on_queue_depth(depth);
      mu_.Lock();
      continue;  // the queue may have changed meanwhile
    }
    if (running_ != reported_running && observer_.on_running) {
      reported_running = running_;
      mu_.Unlock();
      observer_.on_running(reported_running);
      mu_.Lock();
      continue;
    }
    // A free executor gets the next batch before finished ones are filed,
    // so that compute resumes first; but not while more finished batches
    // wait than there are executors, so that a fast runner cannot keep the
    // worker dispatching while results pile up unfiled.
    absl::Time wake_at = absl::InfiniteFuture();
    if (!stopping_ && running_ < executions && !queue_.empty() &&
        static_cast<int>(finished_.size()) <= executions) {
      view.clear();
      ranks.clear();
      BatchOptions& decide_options = accepting_ ? serve_options : flush_options;
      decide_options.work_per_second = work_rate_.load();
      for (int c = 0; c < kComputeClasses; ++c) {
        decide_options.compute_scale[c] =
            compute_scale(static_cast<ComputeClass>(c));
      }
      for (const Pending& pending : queue_) {
        const BatchItem& item =
            pending.state->request->sequences[pending.index];
        view.push_back(QueuedSequence{
            item.length, pending.state->submitted, item.cost,
            ranks[pending.state.get()]++, pending.state->share,
            static_cast<bool>(item.run_alone),
            ScaleCost(item.compute,
                      decide_options.compute_scale[item.compute_class])});
      }
      RunningBatches running{running_, running_sequences_, running_long_};
      if (!running_ends_.empty()) running.soonest_end = *running_ends_.begin();
      // Beside running batches a small one waits for one of them to
      // finish; the executor's hand-back wakes this loop.
      const BatchDecision decision =
          DecideNextBatch(view, decide_options, absl::Now(), running);
      if (!decision.take.empty()) {
        std::vector<Pending> batch = PopLocked(decision);
        mu_.Unlock();
        StartBatch(std::move(batch), decide_options);
        mu_.Lock();
        continue;
      }
      wake_at = decision.wake_at;
    }
    if (!finished_.empty()) {
      std::deque<Job> finished;
      finished.swap(finished_);
      mu_.Unlock();
      for (Job& job : finished) FinishJob(std::move(job));
      mu_.Lock();
      continue;
    }
    if (stopping_ && running_ == 0) break;
    if (running_ > 0) {
      // A running batch's requests may give up meanwhile.
      if (absl::Now() >= next_poll) {
        mu_.Unlock();
        PollRunning();
        mu_.Lock();
        next_poll = absl::Now() + kPollInterval;
        continue;
      }
      wake_at = std::min(wake_at, next_poll);
    }
    // Early (spurious) wake-ups are harmless: the loop decides again.
    cv_.WaitWithDeadline(&mu_, wake_at);
  }
  executors_stop_ = true;
  mu_.Unlock();
  job_cv_.SignalAll();
  for (std::thread& executor : executors_) executor.join();
  FailQueued();
}

std::vector<Batcher::Pending> Batcher::PopLocked(
    const BatchDecision& decision) {
  const std::vector<size_t>& take = decision.take;
  virtual_time_ = std::max(virtual_time_, queue_[decision.anchor].state->share);
  for (size_t i : take) ++queue_[i].state->share;
  std::vector<Pending> batch;
  batch.reserve(take.size());
  std::deque<Pending> rest;
  size_t next = 0;
  for (size_t i = 0; i < queue_.size(); ++i) {
    if (next < take.size() && take[next] == i) {
      batch.push_back(std::move(queue_[i]));
      ++next;
    } else {
      rest.push_back(std::move(queue_[i]));
    }
  }
  queue_.swap(rest);
  return batch;
}

void Batcher::StartBatch(std::vector<Pending> batch,
                         const BatchOptions& options) {
  std::vector<Completion> completions;
  DropCounts drops;
  std::vector<Pending> run =
      TakeRunnable(std::move(batch), &completions, &drops);
  if (!run.empty()) {
    Job job;
    job.items.reserve(run.size());
    int64_t longest = 0;
    for (const Pending& pending : run) {
      job.items.push_back(&pending.state->request->sequences[pending.index]);
      const int64_t length = job.items.back()->length;
      longest = std::max(longest, length);
      job.stats.real_tokens += length;
      if (pending.state->request->traced) ++job.stats.traced;
    }
    job.stats.id = NextBatchId();
    job.stats.batch_size = static_cast<int64_t>(run.size());
    job.stats.padded_tokens = longest * job.stats.batch_size;
    // The batch's memory, held from before the forward pass until its
    // tensors are gone (results are plain vectors by then).
    for (const BatchItem* item : job.items) {
      job.cost = AddSaturating(job.cost, item->cost.At(longest));
      const int64_t priced = item->compute.At(longest);
      job.class_work[item->compute_class] =
          AddSaturating(job.class_work[item->compute_class], priced);
      job.work = AddSaturating(
          job.work,
          ScaleCost(item->compute, options.compute_scale[item->compute_class])
              .At(longest));
    }
    job.long_batch = IsLongBatch(job.work, options);
    if (options.work_per_second > 0) {
      job.expected_end = absl::Now() + ExpectedTime(job.work, options);
    }
    job.run = std::move(run);
    for (const Pending& pending : job.run) {
      if (pending.state->running_batches++ == 0) {
        running_requests_.push_back(pending.state);
      }
    }
    {
      MutexLock lock(&mu_);
      running_sequences_ += static_cast<int64_t>(job.run.size());
      running_long_ += job.long_batch ? 1 : 0;
      running_ends_.insert(job.expected_end);
      jobs_.push_back(std::move(job));
      ++running_;
    }
    job_cv_.Signal();
  }
  Settle(std::move(completions), drops);
}

void Batcher::ExecutorLoop() {
  NameThisThread("batch-run");
  mu_.Lock();
  for (;;) {
    while (jobs_.empty() && !executors_stop_) job_cv_.Wait(&mu_);
    if (jobs_.empty()) break;
    Job job = std::move(jobs_.front());
    jobs_.pop_front();
    mu_.Unlock();
    Execute(&job);
    mu_.Lock();
    running_sequences_ -= static_cast<int64_t>(job.run.size());
    running_long_ -= job.long_batch ? 1 : 0;
    running_ends_.erase(running_ends_.find(job.expected_end));
    finished_.push_back(std::move(job));
    --running_;
    cv_.Signal();
  }
  mu_.Unlock();
}

absl::Status Batcher::StillWanted(const Job& job) {
  const absl::Time now = absl::Now();
  bool deadline_passed = false;
  for (const Pending& pending : job.run) {
    const RequestState& state = *pending.state;
    if (state.abandoned.load(std::memory_order_relaxed)) continue;
    if (state.request->deadline <= now) {
      deadline_passed = true;
      continue;
    }
    return absl::OkStatus();
  }
  if (deadline_passed) {
    return absl::DeadlineExceededError(
        "deadline passed while the request was computed");
  }
  return absl::CancelledError(
      "every request of the batch was cancelled or had failed");
}

void Batcher::Execute(Job* job) {
  MemoryBudget* budget = options_.memory_budget;
  if (budget != nullptr) budget->Acquire(job->cost);
  job->start = absl::Now();
  RunContext context;
  context.should_stop = [job] { return StillWanted(*job); };
  // Requests may have given up while the batch waited for an executor.
  job->status = context.Check();
  if (job->status.ok()) {
    job->status = RunGuarded(job->items, &job->results, context);
  }
  job->stats.inference_seconds =
      absl::ToDoubleSeconds(absl::Now() - job->start);
  if (budget != nullptr) budget->Release(job->cost);
  if (job->status.ok() && job->results.size() != job->run.size()) {
    job->status = absl::InternalError(
        absl::StrCat("model runner returned ", job->results.size(),
                     " results for ", job->run.size(), " sequences"));
  }
}

void Batcher::Settle(std::vector<Completion> completions, DropCounts drops) {
  if (!completions.empty()) {
    for (const Pending& pending : PurgeFailed()) {
      drops.Add(pending.state->drop_reason, 1);
    }
  }
  drops.Report(observer_);
  HandOver(std::move(completions));
}

namespace {

// The bytes of results a round of completions carries.
int64_t ResultBytes(const std::vector<ItemResult>& results) {
  int64_t bytes = 0;
  for (const ItemResult& r : results) bytes += r.bytes;
  return bytes;
}

}  // namespace

void Batcher::HandOver(std::vector<Completion> completions) {
  if (completions.empty()) return;
  int64_t bytes = 0;
  for (const Completion& c : completions) {
    bytes += ResultBytes(c.state->results);
  }
  bool here = false;
  {
    MutexLock lock(&respond_mu_);
    // Small results with nothing before them are completed here: packing
    // them costs less than waking the responder, and since only the worker
    // adds rounds, an idle responder stays idle, so the order holds.
    here = bytes <= kInlineCompletionBytes && waiting_rounds_.empty() &&
           !responder_busy_;
    if (!here) {
      while (waiting_rounds_.size() >= kMaxWaitingRounds) {
        room_cv_.Wait(&respond_mu_);
      }
      waiting_rounds_.push_back(std::move(completions));
    }
  }
  if (here) {
    Complete(std::move(completions));
  } else {
    respond_cv_.Signal();
  }
}

void Batcher::ResponderLoop() {
  NameThisThread("batch-reply");
  for (;;) {
    std::vector<Completion> round;
    {
      MutexLock lock(&respond_mu_);
      while (waiting_rounds_.empty() && !worker_exited_) {
        respond_cv_.Wait(&respond_mu_);
      }
      if (waiting_rounds_.empty()) return;  // the worker exited: all done
      round = std::move(waiting_rounds_.front());
      waiting_rounds_.pop_front();
      responder_busy_ = true;
    }
    room_cv_.Signal();
    Complete(std::move(round));
    MutexLock lock(&respond_mu_);
    responder_busy_ = false;
  }
}

void Batcher::Fail(const std::shared_ptr<RequestState>& state,
                   absl::Status status, const char* drop_reason,
                   std::vector<Completion>* completions) {
  state->failed = true;
  state->abandoned.store(true, std::memory_order_relaxed);
  state->drop_reason = drop_reason;
  state->results.clear();
  completions->push_back(Completion{state, std::move(status)});
}

const char* Batcher::FailIfGaveUp(const std::shared_ptr<RequestState>& state,
                                  absl::Time now, const char* when,
                                  std::vector<Completion>* completions) {
  const Request& request = *state->request;
  if (request.deadline <= now) {
    Fail(state,
         absl::DeadlineExceededError(absl::StrCat("deadline passed ", when)),
         kDeadline, completions);
    return kDeadline;
  }
  if (request.is_cancelled && request.is_cancelled()) {
    Fail(state, absl::CancelledError("request was cancelled"), kCancelled,
         completions);
    return kCancelled;
  }
  return nullptr;
}

std::vector<Batcher::Pending> Batcher::TakeRunnable(
    std::vector<Pending> batch, std::vector<Completion>* completions,
    DropCounts* drops) {
  const absl::Time now = absl::Now();
  std::vector<Pending> run;
  for (Pending& pending : batch) {
    const RequestState& state = *pending.state;
    if (state.failed) {
      drops->Add(state.drop_reason, 1);
    } else if (const char* reason = FailIfGaveUp(
                   pending.state, now, "before the sequence was computed",
                   completions)) {
      drops->Add(reason, 1);
    } else {
      run.push_back(std::move(pending));
    }
  }
  return run;
}

void Batcher::PollRunning() {
  const absl::Time now = absl::Now();
  std::vector<Completion> completions;
  for (const std::shared_ptr<RequestState>& state : running_requests_) {
    if (state->failed) continue;
    FailIfGaveUp(state, now, "while the request was computed", &completions);
  }
  Settle(std::move(completions), DropCounts{});
}

void Batcher::LearnRates(const Job& job) {
  // Longer batches weigh more: a short one's time is mostly overhead.
  const double seconds = job.stats.inference_seconds;
  const double weight = std::clamp(seconds / (seconds + 0.5), 0.05, 0.5);
  const auto move = [weight](std::atomic<double>& value, double sample) {
    const double old = value.load();
    value.store(old <= 0 ? sample : old + weight * (sample - old));
  };
  const double plain = static_cast<double>(job.class_work[kPlainCompute]);
  double other = 0;
  for (int c = 1; c < kComputeClasses; ++c) {
    other += static_cast<double>(job.class_work[c]);
  }
  const double rate = work_rate_.load();
  if (other <= 0) {
    // A plain batch: its rate defines the units.
    move(work_rate_, plain / seconds);
    return;
  }
  if (plain > 0 && rate <= 0) return;
  // The batch's plain part takes its time at the plain rate; what is left
  // is the other classes' (one at a time so far: kComputeClasses is 2),
  // learnt as their own time per unit, so that the plain rate (which
  // 1-token batches, mostly overhead, keep moving) does not move it.
  const double rest = plain > 0 ? seconds - plain / rate : seconds;
  if (rest <= 0) return;
  for (int c = 1; c < kComputeClasses; ++c) {
    if (job.class_work[c] > 0) move(unit_seconds_[c], rest / other);
  }
}

double Batcher::compute_scale(ComputeClass c) const {
  const double unit = unit_seconds_[c].load();
  const double rate = work_rate_.load();
  return c == kPlainCompute || unit <= 0 || rate <= 0 ? 1.0 : unit * rate;
}

void Batcher::FinishJob(Job job) {
  BatchStats& stats = job.stats;
  for (const Pending& pending : job.run) {
    if (--pending.state->running_batches == 0) {
      running_requests_.erase(std::find(
          running_requests_.begin(), running_requests_.end(), pending.state));
    }
  }
  if (job.status.ok() && job.work > 0 && stats.inference_seconds > 0) {
    LearnRates(job);
  }
  // A batch stopped because its requests gave up drops their sequences.
  const char* stop_reason =
      job.status.code() == absl::StatusCode::kDeadlineExceeded ? kDeadline
      : job.status.code() == absl::StatusCode::kCancelled      ? kCancelled
                                                               : nullptr;
  absl::Time oldest = absl::InfiniteFuture();
  for (const Pending& pending : job.run) {
    oldest = std::min(oldest, pending.state->submitted);
  }
  stats.queue_seconds = absl::ToDoubleSeconds(job.start - oldest);
  stats.start = job.start;
  if (observer_.on_batch) observer_.on_batch(stats);

  std::vector<Completion> completions;
  for (size_t i = 0; i < job.run.size(); ++i) {
    const std::shared_ptr<RequestState>& state = job.run[i].state;
    // A request fails once; a later poll, or another batch, may have failed
    // it after an earlier sequence of it was taken into this batch.
    if (state->failed) continue;
    if (!job.status.ok()) {
      Fail(state, job.status, stop_reason, &completions);
      continue;
    }
    ItemResult& result = state->results[job.run[i].index];
    result = std::move(job.results[i]);
    result.batch = stats;
    result.batch.queue_seconds =
        absl::ToDoubleSeconds(job.start - state->submitted);
    if (--state->remaining == 0) {
      completions.push_back(Completion{state, absl::OkStatus()});
    }
  }
  Settle(std::move(completions), DropCounts{});
}

absl::Status Batcher::RunGuarded(const std::vector<const BatchItem*>& items,
                                 std::vector<ItemResult>* results,
                                 const RunContext& context) {
  try {
    if (items.size() == 1 && items[0]->run_alone) {
      results->assign(1, ItemResult{});
      return items[0]->run_alone();
    }
    return runner_->Run(items, results, context);
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("model runner threw: ", e.what()));
  } catch (...) {
    return absl::InternalError("model runner threw a non-standard exception");
  }
}

std::vector<Batcher::Pending> Batcher::PurgeFailed() {
  std::vector<Pending> removed;
  MutexLock lock(&mu_);
  auto kept = std::stable_partition(
      queue_.begin(), queue_.end(),
      [](const Pending& pending) { return !pending.state->failed; });
  std::move(kept, queue_.end(), std::back_inserter(removed));
  queue_.erase(kept, queue_.end());
  return removed;
}

void Batcher::Complete(std::vector<Completion> completions) {
  if (completions.empty()) return;
  for (Completion& completion : completions) {
    RequestState& state = *completion.state;
    std::vector<ItemResult> results;
    if (completion.status.ok()) results = std::move(state.results);
    state.request->done(std::move(completion.status), std::move(results));
  }
  MutexLock lock(&mu_);
  in_flight_requests_ -= static_cast<int64_t>(completions.size());
  if (in_flight_requests_ == 0) idle_cv_.SignalAll();
}

void Batcher::FailQueued() {
  std::deque<Pending> queued;
  {
    MutexLock lock(&mu_);
    queued.swap(queue_);
  }
  if (queued.empty()) return;
  std::vector<Completion> completions;
  for (const Pending& pending : queued) {
    RequestState& state = *pending.state;
    if (state.failed) continue;
    state.failed = true;
    state.abandoned.store(true, std::memory_order_relaxed);
    state.results.clear();
    completions.push_back(Completion{
        pending.state, absl::UnavailableError("server is shutting down")});
  }
  if (observer_.on_dropped) {
    observer_.on_dropped(kShutdown, static_cast<int64_t>(queued.size()));
  }
  HandOver(std::move(completions));
}

}  // namespace encoder::batching
