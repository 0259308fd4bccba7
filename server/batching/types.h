// The unit of work of the batcher: an item with a length and a cost, and a
// payload that belongs to the model runner, which the batcher never reads;
// and its result. Plain C++: no protobuf, no LibTorch, nothing of the model.
#ifndef ENCODER_SERVER_BATCHING_TYPES_H_
#define ENCODER_SERVER_BATCHING_TYPES_H_

#include <any>
#include <cstdint>
#include <functional>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace encoder::batching {

// The memory an item needs while it runs, as the model runner prices it:
// per_token * L + per_token_pair * L^2 bytes when padded to length L (the
// L^2 term is attention: scores, probabilities, kept maps).
struct SequenceCost {
  int64_t per_token = 0;
  int64_t per_token_pair = 0;

  // Saturates at INT64_MAX instead of overflowing.
  int64_t At(int64_t length) const;
};

// `cost` with both terms times `scale` (>= 0), saturating at INT64_MAX.
SequenceCost ScaleCost(const SequenceCost& cost, double scale);

// Kinds of compute whose speed the batcher measures apart, because the
// runner's estimate prices them at fixed ratios that the CPU decides in
// truth: a forward pass, and one that also computes attention statistics
// (per token pair, several times a forward's work, at a rate of its own).
enum ComputeClass : int { kPlainCompute = 0, kStatisticsCompute = 1 };
inline constexpr int kComputeClasses = 2;

// a + b for non-negative a and b, saturating at INT64_MAX (sums of
// SequenceCost::At over a batch).
inline int64_t AddSaturating(int64_t a, int64_t b) {
  return b > INT64_MAX - a ? INT64_MAX : a + b;
}

// One unit of work: what the batcher weighs it by, and what the runner
// computes. A batch's size is the sum of its items' lengths padded to the
// longest, its memory the sum of their costs at that length.
struct BatchItem {
  int64_t length = 0;  // tokens
  SequenceCost cost;   // priced by the runner; zero: free (tests)
  // The compute it takes, in floating-point operations when padded to
  // length L (per_token * L + per_token_pair * L^2), as the runner
  // estimates it; with the batcher's measured rate it bounds a batch's
  // time (BatchOptions::max_batch_time). Zero: unknown, never bounds.
  SequenceCost compute;
  // Which of the measured rates its compute runs at (ComputeClass).
  ComputeClass compute_class = kPlainCompute;
  // The runner's description of the work (api::EmbedSpec for the
  // encoder runner). Opaque here; the runner checks its type.
  std::any work;
  // Set: a job of the model's own (Diagnose's probes) instead of work for
  // the runner. It waits in the same queue under the same limits, is
  // dropped on deadline or cancellation and drained like any item, but
  // runs alone, in a batch of its own: the worker calls it instead of the
  // runner, holding its cost of the memory budget, and its result carries
  // only BatchStats. Must not throw.
  std::function<absl::Status()> run_alone;
};

// Which batch an item ran in and how long it took.
struct BatchStats {
  uint64_t id = 0;            // unique in the process, from 1
  absl::Time start;           // when the forward pass began
  int64_t batch_size = 0;     // items in the forward pass
  int64_t padded_tokens = 0;  // longest x batch_size
  int64_t real_tokens = 0;    // sum of lengths
  double queue_seconds = 0;   // from submission to the start of the batch
  double inference_seconds = 0;
  // Items of requests whose calls are traced (Request::traced): the
  // batch's own span is recorded when there is one.
  int64_t traced = 0;
};

struct ItemResult {
  std::any output;    // the runner's result (api::EmbedResult), opaque
  int64_t bytes = 0;  // its size, which decides who completes it
  BatchStats batch;   // filled in by the batcher
};

}  // namespace encoder::batching

#endif  // ENCODER_SERVER_BATCHING_TYPES_H_
