// The batch-forming decision as a pure function of (queue, options, now), so
// it can be tested without threads or clocks.
#ifndef ENCODER_SERVER_BATCHING_BATCH_POLICY_H_
#define ENCODER_SERVER_BATCHING_BATCH_POLICY_H_

#include <cstdint>
#include <vector>

#include "absl/time/time.h"

namespace encoder::batching {

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
};

// A queued sequence as the policy sees it. The queue is in arrival order.
struct QueuedSequence {
  int64_t length = 0;
  absl::Time enqueued;
};

struct BatchDecision {
  // Indices into the queue to run now, oldest first; empty: wait.
  std::vector<size_t> take;
  // When to decide again if nothing arrives (InfiniteFuture: only on
  // arrival). Meaningful when `take` is empty.
  absl::Time wake_at = absl::InfiniteFuture();
};

// The oldest sequence always goes into the next batch (no starvation). A
// batch is formed when the oldest has waited max_queue_delay, or when the
// queue alone can fill a batch to max_batch_sequences or max_batch_tokens.
// Members are chosen by closeness of length to the oldest when
// group_by_length, else in arrival order, within both limits. A single
// sequence longer than max_batch_tokens still runs, alone.
BatchDecision DecideBatch(const std::vector<QueuedSequence>& queue,
                          const BatchOptions& options, absl::Time now);

}  // namespace encoder::batching

#endif  // ENCODER_SERVER_BATCHING_BATCH_POLICY_H_
