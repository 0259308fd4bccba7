// A model's throughput by batch size and length, measured once at start-up,
// and the batch-size caps it implies (BatchOptions::length_caps).
//
// Bigger batches are not always faster per sequence: on a CPU, once a
// batch's activations and attention scores outgrow the buffer cache they
// are mapped and faulted in afresh every batch (the built-in shape at 512
// tokens runs batches of 16 a third slower per sequence than batches of
// 8). Fixed caps cannot know where that happens for a given model and
// machine; the profile measures it.
#ifndef ENCODER_SERVER_BATCHING_BATCH_PROFILE_H_
#define ENCODER_SERVER_BATCHING_BATCH_PROFILE_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "server/batching/batch_policy.h"
#include "server/batching/model_runner.h"

namespace encoder::batching {

struct BatchProfileOptions {
  // Wall time the whole profile may take; a run that would pass it is not
  // started, and lengths not measured to the end give no cap.
  absl::Duration budget = absl::Seconds(2);
  // Padded lengths to measure, ascending; those over max_length are
  // skipped (max_length itself is measured when all are over it).
  std::vector<int64_t> lengths = {32, 128, 512};
  int64_t max_length = 512;  // the model's longest input
  // Batch sizes tried: powers of two up to max_batch_sequences, and that
  // size itself, while size x length <= max_batch_tokens (and the cost
  // bound below holds).
  int64_t max_batch_sequences = 32;
  int64_t max_batch_tokens = 16384;
  // Batches whose cost (sequence_cost at the length, times the size)
  // passes max_batch_cost_bytes are not tried; 0: no bound.
  SequenceCost sequence_cost;
  int64_t max_batch_cost_bytes = 0;
  // Required: the runner's probe item `index` of a batch whose items are
  // all `length` tokens long.
  std::function<BatchItem(int64_t index, int64_t length)> probe_item;
  // Each point is the fastest of this many runs (a shared host's
  // interference only ever slows a run down).
  int runs_per_point = 2;
  // A length's cap is the largest batch measured within this fraction of
  // that length's best sequences/s.
  double keep_fraction = 0.9;
  // Bigger batches of a length are not tried once one runs below this
  // fraction of the best so far (the curve only falls from there).
  double stop_fraction = 0.8;
  std::function<absl::Time()> now = [] { return absl::Now(); };
};

struct ProfilePoint {
  int64_t length = 0;
  int64_t batch = 0;
  double sequences_per_s = 0;
};

struct BatchProfile {
  std::vector<ProfilePoint> points;  // in measuring order
  // Lengths measured to the end (every batch size tried, or the decline
  // seen); only these give caps.
  std::vector<int64_t> complete_lengths;
  std::vector<LengthCap> caps;  // for BatchOptions::length_caps
  absl::Duration took;
  bool budget_ran_out = false;
};

// Runs probe batches (o.probe_item's) on `runner` and derives the caps.
// Fails when the runner fails, or without probe_item.
absl::StatusOr<BatchProfile> MeasureBatchProfile(
    ModelRunner* runner, const BatchProfileOptions& options);

// The caps the points of the lengths in `complete_lengths` imply: per
// length, the largest batch whose sequences/s is at least keep_fraction of
// that length's best.
std::vector<LengthCap> CapsFromPoints(
    const std::vector<ProfilePoint>& points,
    const std::vector<int64_t>& complete_lengths, double keep_fraction);

// How many times its priced compute a batch of `probe` takes at
// work_per_second (BatchOptions::compute_scale for the probe's class): the
// fastest of `runs` runs, in seconds, times work_per_second, over the
// probe's compute at its longest length. InvalidArgument for an empty
// probe, one without compute or a rate that is not positive; the runner's
// error when it fails.
absl::StatusOr<double> MeasureComputeScale(
    ModelRunner* runner, const std::vector<BatchItem>& probe,
    double work_per_second, int runs = 2,
    const std::function<absl::Time()>& now = [] { return absl::Now(); });

// One line for the log: "32 tokens: 1:128.1 2:180.0 ... seq/s -> cap 32;
// 128 tokens: ... (1.72 s)".
std::string DescribeProfile(const BatchProfile& profile);

}  // namespace encoder::batching

#endif  // ENCODER_SERVER_BATCHING_BATCH_PROFILE_H_
