#include "server/batching/batch_policy.h"

#include <algorithm>
#include <cstdlib>
#include <numeric>

namespace encoder::batching {
namespace {

// Order in which sequences are offered to the batch after the oldest: by
// closeness of length to the oldest (ties: older first) or by arrival.
std::vector<size_t> CandidateOrder(const std::vector<QueuedSequence>& queue,
                                   bool group_by_length) {
  std::vector<size_t> order(queue.size() - 1);
  std::iota(order.begin(), order.end(), size_t{1});
  if (group_by_length) {
    const int64_t anchor = queue.front().length;
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return std::llabs(queue[a].length - anchor) <
             std::llabs(queue[b].length - anchor);
    });
  }
  return order;
}

}  // namespace

BatchDecision DecideBatch(const std::vector<QueuedSequence>& queue,
                          const BatchOptions& options, absl::Time now) {
  BatchDecision decision;
  if (queue.empty()) return decision;

  // Non-positive limits degrade to "the oldest runs alone" rather than to
  // "nothing ever runs".
  const int64_t max_sequences =
      std::max<int64_t>(options.max_batch_sequences, 1);
  const int64_t max_tokens = options.max_batch_tokens;

  // The oldest is always a member, even when it alone exceeds max_tokens.
  std::vector<size_t> take = {0};
  int64_t longest = queue.front().length;
  // A batch is full when it reached a limit, or when a queued sequence was
  // left out by the token limit: the queue then holds more than one batch,
  // so waiting for company would only delay work that is already queued.
  bool full = false;

  for (size_t index : CandidateOrder(queue, options.group_by_length)) {
    const int64_t count = static_cast<int64_t>(take.size());
    if (count >= max_sequences) break;
    const int64_t new_longest = std::max(longest, queue[index].length);
    if (new_longest * (count + 1) > max_tokens) {
      // A shorter sequence further down the order may still fit.
      full = true;
      continue;
    }
    take.push_back(index);
    longest = new_longest;
  }
  const int64_t count = static_cast<int64_t>(take.size());
  if (count >= max_sequences || longest * count >= max_tokens) full = true;

  const absl::Time deadline = queue.front().enqueued + options.max_queue_delay;
  if (!full && now < deadline) {
    decision.wake_at = deadline;
    return decision;
  }
  std::sort(take.begin(), take.end());
  decision.take = std::move(take);
  return decision;
}

}  // namespace encoder::batching
