#include "server/batching/batch_policy.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <numeric>

namespace encoder::batching {
namespace {

// The sequence a batch is built around: the oldest, or with fair_share the
// oldest head (rank 0) of the requests that have been served least.
size_t Anchor(const std::vector<QueuedSequence>& queue,
              const BatchOptions& options) {
  if (!options.fair_share) return 0;
  size_t best = 0;  // the oldest queued sequence is its request's head
  for (size_t i = 1; i < queue.size(); ++i) {
    if (queue[i].rank != 0) continue;
    if (queue[i].share < queue[best].share) best = i;
  }
  return best;
}

// Order in which sequences are offered to the batch after the anchor: the
// oldest sequence of every other request first (fair_share), then by
// closeness of length to the anchor (group_by_length), then by arrival.
std::vector<size_t> CandidateOrder(const std::vector<QueuedSequence>& queue,
                                   size_t anchor, const BatchOptions& options) {
  std::vector<size_t> order;
  order.reserve(queue.size() - 1);
  for (size_t i = 0; i < queue.size(); ++i) {
    if (i != anchor) order.push_back(i);
  }
  const int64_t length = queue[anchor].length;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const bool head_a = queue[a].rank == 0, head_b = queue[b].rank == 0;
    if (options.fair_share && head_a != head_b) return head_a;
    return options.group_by_length && std::llabs(queue[a].length - length) <
                                          std::llabs(queue[b].length - length);
  });
  return order;
}

// The members' summed cost when padded to `length`, saturating.
int64_t BatchCost(const std::vector<QueuedSequence>& queue,
                  const std::vector<size_t>& members, int64_t length) {
  int64_t total = 0;
  for (size_t i : members)
    total = AddSaturating(total, queue[i].cost.At(length));
  return total;
}

// The members' summed compute when padded to `length`, saturating.
int64_t BatchWork(const std::vector<QueuedSequence>& queue,
                  const std::vector<size_t>& members, int64_t length) {
  int64_t total = 0;
  for (size_t i : members) {
    total = AddSaturating(total, queue[i].compute.At(length));
  }
  return total;
}

int64_t LongestOf(const std::vector<QueuedSequence>& queue,
                  const std::vector<size_t>& members) {
  int64_t longest = 0;
  for (size_t i : members) longest = std::max(longest, queue[i].length);
  return longest;
}

// Whether `work` is expected to take longer than max_batch_time.
bool OverTime(int64_t work, const BatchOptions& options) {
  return options.max_batch_time > absl::ZeroDuration() &&
         ExpectedTime(work, options) > options.max_batch_time;
}

}  // namespace

absl::Duration ExpectedTime(int64_t work, const BatchOptions& options) {
  if (options.work_per_second <= 0 || work <= 0) return absl::ZeroDuration();
  return absl::Seconds(static_cast<double>(work) / options.work_per_second);
}

bool IsLongBatch(int64_t work, const BatchOptions& options) {
  return options.max_batch_time > absl::ZeroDuration() &&
         ExpectedTime(work, options) >
             kLongBatchFactor * options.max_batch_time;
}

int64_t SequenceCapAt(const std::vector<LengthCap>& caps, int64_t length) {
  if (caps.empty()) return INT64_MAX;
  length = std::max<int64_t>(length, 1);
  auto tokens = [](const LengthCap& cap) {
    return static_cast<double>(cap.length) *
           static_cast<double>(std::max<int64_t>(cap.max_sequences, 1));
  };
  double allowed;
  if (length <= caps.front().length) {
    allowed = tokens(caps.front());
  } else if (length >= caps.back().length) {
    allowed = tokens(caps.back());
  } else {
    size_t hi = 1;
    while (caps[hi].length < length) ++hi;
    const LengthCap& a = caps[hi - 1];
    const LengthCap& b = caps[hi];
    const double t = std::log(static_cast<double>(length) / a.length) /
                     std::log(static_cast<double>(b.length) / a.length);
    allowed = tokens(a) + t * (tokens(b) - tokens(a));
  }
  const double sequences = std::floor(allowed / static_cast<double>(length));
  if (sequences >= static_cast<double>(INT64_MAX)) return INT64_MAX;
  return std::max<int64_t>(static_cast<int64_t>(sequences), 1);
}

int64_t SequenceCost::At(int64_t length) const {
  const __int128 bytes =
      static_cast<__int128>(per_token) * length +
      static_cast<__int128>(per_token_pair) * length * length;
  return bytes > INT64_MAX ? INT64_MAX : static_cast<int64_t>(bytes);
}

SequenceCost ScaleCost(const SequenceCost& cost, double scale) {
  const auto times = [scale](int64_t v) {
    const double scaled = static_cast<double>(v) * std::max(0.0, scale);
    return scaled >= 9.2e18 ? INT64_MAX : static_cast<int64_t>(scaled);
  };
  return SequenceCost{times(cost.per_token), times(cost.per_token_pair)};
}

BatchDecision DecideBatch(const std::vector<QueuedSequence>& queue,
                          const BatchOptions& options, absl::Time now) {
  BatchDecision decision;
  if (queue.empty()) return decision;

  // Non-positive limits degrade to "the oldest runs alone" rather than to
  // "nothing ever runs".
  const int64_t max_sequences =
      std::max<int64_t>(options.max_batch_sequences, 1);
  const int64_t max_tokens = options.max_batch_tokens;

  // The anchor is always a member, even when it alone exceeds a limit.
  const size_t anchor = Anchor(queue, options);
  if (queue[anchor].alone) {
    // No company may join it, so waiting would only delay it.
    decision.anchor = anchor;
    decision.take = {anchor};
    return decision;
  }
  std::vector<size_t> take = {anchor};
  int64_t longest = queue[anchor].length;
  // A batch is full when it reached a limit, or when a queued sequence was
  // left out by the token limit: the queue then holds more than one batch,
  // so waiting for company would only delay work that is already queued.
  bool full = false;

  const int64_t max_cost = options.max_batch_cost_bytes;
  for (size_t index : CandidateOrder(queue, anchor, options)) {
    const int64_t count = static_cast<int64_t>(take.size());
    if (count >= max_sequences) break;
    if (queue[index].alone) {
      full = true;  // it is due next or later: the queue holds more work
      continue;
    }
    const int64_t new_longest = std::max(longest, queue[index].length);
    if (new_longest * (count + 1) > max_tokens ||
        count + 1 > SequenceCapAt(options.length_caps, new_longest) ||
        (max_cost > 0 &&
         AddSaturating(BatchCost(queue, take, new_longest),
                       queue[index].cost.At(new_longest)) > max_cost) ||
        OverTime(AddSaturating(BatchWork(queue, take, new_longest),
                               queue[index].compute.At(new_longest)),
                 options)) {
      // A shorter or cheaper sequence further down the order may still fit.
      full = true;
      continue;
    }
    take.push_back(index);
    longest = new_longest;
  }
  const int64_t count = static_cast<int64_t>(take.size());
  if (count >= max_sequences || longest * count >= max_tokens ||
      count >= SequenceCapAt(options.length_caps, longest) ||
      OverTime(BatchWork(queue, take, longest), options)) {
    full = true;
  }

  const absl::Time deadline = queue.front().enqueued + options.max_queue_delay;
  if (!full && now < deadline) {
    decision.wake_at = deadline;
    return decision;
  }
  decision.anchor = anchor;
  std::sort(take.begin(), take.end());
  decision.take = std::move(take);
  return decision;
}

bool WorthAnotherExecution(const std::vector<QueuedSequence>& queue,
                           const BatchDecision& decision,
                           const BatchOptions& options) {
  if (decision.take.empty()) return false;
  const int64_t executions = std::max(options.executions, 1);
  if (executions == 1) return true;
  if (decision.take.size() == 1 && queue[decision.take[0]].alone) return true;
  const int64_t longest = LongestOf(queue, decision.take);
  const int64_t count = static_cast<int64_t>(decision.take.size());
  // count >= limit / executions, without rounding the limit down to 0.
  auto reaches = [&](int64_t amount, int64_t limit) {
    return limit > 0 && static_cast<__int128>(amount) * executions >=
                            static_cast<__int128>(limit);
  };
  if (reaches(count, std::max<int64_t>(options.max_batch_sequences, 1)) ||
      reaches(longest * count, options.max_batch_tokens) ||
      reaches(count, SequenceCapAt(options.length_caps, longest))) {
    return true;
  }
  if (options.max_batch_time > absl::ZeroDuration() &&
      ExpectedTime(BatchWork(queue, decision.take, longest), options) *
              executions >=
          options.max_batch_time) {
    return true;
  }
  return reaches(BatchCost(queue, decision.take, longest),
                 options.max_batch_cost_bytes);
}

namespace {

// DecideBatch on the sequences that are not long alone (IsLongBatch), with
// indices into the whole queue; empty when there are none.
BatchDecision DecideWithoutLong(const std::vector<QueuedSequence>& queue,
                                const BatchOptions& options, absl::Time now) {
  std::vector<QueuedSequence> short_ones;
  std::vector<size_t> index;
  for (size_t i = 0; i < queue.size(); ++i) {
    if (!IsLongBatch(queue[i].compute.At(queue[i].length), options)) {
      short_ones.push_back(queue[i]);
      index.push_back(i);
    }
  }
  if (short_ones.empty()) return BatchDecision{};
  BatchDecision decision = DecideBatch(short_ones, options, now);
  for (size_t& i : decision.take) i = index[i];
  decision.anchor = index[decision.anchor];
  return decision;
}

}  // namespace

BatchDecision DecideNextBatch(const std::vector<QueuedSequence>& queue,
                              const BatchOptions& options, absl::Time now,
                              const RunningBatches& running) {
  BatchDecision decision = DecideBatch(queue, options, now);
  const int64_t executions = std::max(options.executions, 1);
  if (decision.take.empty() || executions == 1) return decision;
  // The last execution free of long batches stays free for the rest.
  const bool without_long =
      running.long_batches >= executions - 1 &&
      IsLongBatch(
          BatchWork(queue, decision.take, LongestOf(queue, decision.take)),
          options);
  auto decide = [&](const BatchOptions& o) {
    return without_long ? DecideWithoutLong(queue, o, now)
                        : DecideBatch(queue, o, now);
  };
  if (without_long) {
    decision = decide(options);
    if (decision.take.empty()) return decision;
  }
  const int64_t even = (static_cast<int64_t>(queue.size()) + running.sequences +
                        executions - 1) /
                       executions;
  if (static_cast<int64_t>(decision.take.size()) > even) {
    BatchOptions split = options;
    split.max_batch_sequences = std::max<int64_t>(even, 1);
    BatchDecision part = decide(split);
    if (WorthAnotherExecution(queue, part, options)) return part;
  }
  if (running.batches > 0 && !WorthAnotherExecution(queue, decision, options)) {
    // Wait for a running batch to finish, unless that takes too long. A
    // batch already past its expected end may run on for any time (its
    // estimate was short), so it counts as long; and the wait ends at the
    // expected end, so that a late batch is seen as late then.
    const bool known_end = options.max_batch_time > absl::ZeroDuration() &&
                           running.soonest_end != absl::InfiniteFuture();
    const bool running_long =
        known_end && (running.soonest_end <= now ||
                      running.soonest_end - now > options.max_batch_time);
    if (!running_long) {
      BatchDecision wait;
      if (known_end) wait.wake_at = running.soonest_end;
      return wait;
    }
  }
  return decision;
}

}  // namespace encoder::batching
