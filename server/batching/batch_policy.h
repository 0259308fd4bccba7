// The batch-forming decision as a pure function of (queue, options, now), so
// it can be tested without threads or clocks.
#ifndef ENCODER_SERVER_BATCHING_BATCH_POLICY_H_
#define ENCODER_SERVER_BATCHING_BATCH_POLICY_H_

#include <array>
#include <cstdint>
#include <vector>

#include "absl/time/time.h"
#include "server/batching/types.h"

namespace encoder::batching {

class MemoryBudget;

// What a model's throughput profile found at one padded length: batches of
// more than `max_sequences` sequences of this length ran fewer sequences
// per second than a batch of `max_sequences` (MeasureBatchProfile).
struct LengthCap {
  int64_t length = 0;
  int64_t max_sequences = 0;
};

// The most sequences a batch padded to `length` may take under `caps`
// (sorted by length): the tokens per batch the caps allow (length x
// max_sequences), interpolated on a log scale of length between the two
// measured lengths around `length` and held flat beyond the first and
// last, divided by `length`; at least 1. INT64_MAX when `caps` is empty.
int64_t SequenceCapAt(const std::vector<LengthCap>& caps, int64_t length);

struct BatchOptions {
  int64_t max_batch_sequences = 32;
  // Upper bound on longest_length x sequences in one batch.
  int64_t max_batch_tokens = 16384;
  // How long the oldest queued sequence may wait for company. Zero: a batch
  // starts as soon as the worker is free (sequences that arrived while it
  // was busy still batch together).
  absl::Duration max_queue_delay = absl::ZeroDuration();
  // Queued (not yet running) sequences beyond which Submit fails at once.
  int64_t max_queued_sequences = 4096;
  // Pick sequences of similar length to the oldest one to cut padding.
  bool group_by_length = true;
  // Upper bound on the summed SequenceCost of one batch at its padded
  // length, in bytes; 0: none. A sequence over it alone still runs alone
  // (admission refuses such sequences before they are queued).
  int64_t max_batch_cost_bytes = 0;
  // Interleave requests (start-time fair queuing by sequences served): a
  // batch is built around the oldest sequence of the least-served request,
  // and takes the oldest sequence of every other queued request before any
  // further one, so a small request waits about one batch behind a large
  // one, not all of it. Off: built around the oldest queued sequence.
  // group_by_length applies within each tier.
  bool fair_share = true;
  // Measured throughput caps by padded length (sorted; empty: none): a
  // batch whose longest member has length L takes at most
  // SequenceCapAt(length_caps, L) sequences, besides the limits above.
  std::vector<LengthCap> length_caps;
  // Shared by every model's batcher (not owned; may be null): a batch
  // acquires its cost before it runs, and no batch costs more than its
  // capacity.
  MemoryBudget* memory_budget = nullptr;
  // Batches of this model that may run at once, each on a thread of its
  // own (below 1: 1). With more than one, a batch is formed whenever an
  // execution is free, so while one batch computes the next can start
  // beside it instead of waiting for it.
  int executions = 1;
  // Upper bound on a batch's expected compute time (its members' compute
  // at the padded length over work_per_second), so that a small call
  // waits at most about this long for a running batch of a large request
  // to end, and deadlines and cancellations take effect between batches.
  // A single sequence over it still runs, alone. Zero: no bound.
  absl::Duration max_batch_time = absl::Milliseconds(250);
  // The model's measured compute rate, in the units of
  // QueuedSequence::compute per second of one execution; 0: not known yet
  // (no batch is bounded by time). The batcher sets it as it measures.
  double work_per_second = 0;
  // Per ComputeClass, how many times its priced compute a class's work
  // takes at work_per_second (the plain forward's rate, which defines the
  // units): the compute of a sequence of class c counts compute_scale[c]
  // times in every bound above. Measured at start-up (the host times a
  // probe of each class, MeasureComputeScale); the Batcher then keeps each
  // class's own time per unit of compute, learnt from its batches, and
  // gives the policy that time times the current rate; 1: as priced.
  std::array<double, kComputeClasses> compute_scale = {1.0, 1.0};
};

// A batch expected to run longer than this many times max_batch_time is
// long: only one sequence too long to share a batch, of a request far
// larger than the rest. With several executions, long batches never take a
// model's last free execution, which stays for everything else.
inline constexpr int64_t kLongBatchFactor = 4;

// The expected time of `work` (compute units) under options'
// work_per_second; zero when the rate is unknown.
absl::Duration ExpectedTime(int64_t work, const BatchOptions& options);
// Whether a batch of `work` is long (kLongBatchFactor x max_batch_time);
// never without a rate or a bound.
bool IsLongBatch(int64_t work, const BatchOptions& options);

// A queued sequence as the policy sees it. The queue is in arrival order.
struct QueuedSequence {
  int64_t length = 0;
  absl::Time enqueued;
  SequenceCost cost;
  // Its place among the queued sequences of its own request (0: that
  // request's oldest), and how many sequences its request has been served
  // in the batcher's virtual time (new requests start at the current one);
  // used by fair_share.
  int64_t rank = 0;
  int64_t share = 0;
  // Runs in a batch of its own (BatchItem::run_alone).
  bool alone = false;
  // Its compute at a padded length (BatchItem::compute).
  SequenceCost compute;
};

struct BatchDecision {
  // Indices into the queue to run now, oldest first; empty: wait.
  std::vector<size_t> take;
  // The member the batch was built around (an index into the queue).
  size_t anchor = 0;
  // When to decide again if nothing arrives (InfiniteFuture: only on
  // arrival). Meaningful when `take` is empty.
  absl::Time wake_at = absl::InfiniteFuture();
};

// The anchor always goes into the next batch: the oldest sequence, or with
// fair_share the oldest sequence of the least-served request (no
// starvation: a request's share only grows when it is served, and new
// requests start at the current virtual time). A batch is formed when the
// oldest has waited max_queue_delay, or when the queue alone can fill a
// batch to one of its limits. Members are offered the other requests'
// oldest sequences first when fair_share, then by closeness of length to
// the anchor when group_by_length, then by arrival, and taken while every
// limit holds (sequences, padded tokens, cost, the length cap at the
// batch's padded length, the expected time). A single sequence over a
// limit still runs, alone.
BatchDecision DecideBatch(const std::vector<QueuedSequence>& queue,
                          const BatchOptions& options, absl::Time now);

// Whether `decision`'s batch should start while other batches of the model
// run (options.executions > 1), or is large enough to split a burst into:
// when it reaches 1/executions of a limit
// (sequences, padded tokens, cost, the length cap at its padded length), or
// runs alone. A smaller batch waits for a running one to finish instead,
// as it would with one execution, and gathers company meanwhile: starting
// it at once would split a steady load into one large batch and a train
// of small ones, each streaming the weights for a few sequences.
bool WorthAnotherExecution(const std::vector<QueuedSequence>& queue,
                           const BatchDecision& decision,
                           const BatchOptions& options);

// What of the model is computing while a free execution asks for work.
struct RunningBatches {
  int batches = 0;
  int64_t sequences = 0;  // in those batches
  int long_batches = 0;   // of those batches, the long ones (IsLongBatch)
  // When the first of them is expected to end (InfiniteFuture: unknown).
  absl::Time soonest_end = absl::InfiniteFuture();
};

// The batch a free execution should start, with several executions
// (options.executions > 1; with one, DecideBatch's). DecideBatch's batch is
// cut to an even share of the work in the model, ceil((queued + running
// sequences) / executions), when that share is still worth an execution:
// a burst on an idle model splits among the executors instead of one large
// batch beside an idle one, and a large batch beside a small one evens out.
// Beside running batches, a batch that is not worth an execution is not
// started unless every running batch is expected to run on for more than
// max_batch_time (waiting for one would keep a small call waiting longer
// than a batch may take): otherwise `take` is empty and wake_at
// InfiniteFuture (a running batch's end is the next event). A long batch
// does not start when it would leave no execution free of long batches;
// the batch is then formed from the sequences that are not long alone,
// or not at all.
BatchDecision DecideNextBatch(const std::vector<QueuedSequence>& queue,
                              const BatchOptions& options, absl::Time now,
                              const RunningBatches& running);

}  // namespace encoder::batching

#endif  // ENCODER_SERVER_BATCHING_BATCH_POLICY_H_
