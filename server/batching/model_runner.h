// What the batcher needs from a model: run a batch of items.
#ifndef ENCODER_SERVER_BATCHING_MODEL_RUNNER_H_
#define ENCODER_SERVER_BATCHING_MODEL_RUNNER_H_

#include <functional>
#include <vector>

#include "absl/status/status.h"
#include "server/batching/types.h"

namespace encoder::batching {

// What the batcher tells a runner about the batch it hands over.
struct RunContext {
  // Called by the runner between the steps of a long batch (before each
  // layer, and between its parts): OK while the batch's work is still
  // wanted; otherwise the status the runner should stop with at once
  // (DEADLINE_EXCEEDED or CANCELLED: every request in the batch has given
  // up). Thread-safe and cheap; may be empty.
  std::function<absl::Status()> should_stop;

  absl::Status Check() const {
    return should_stop ? should_stop() : absl::OkStatus();
  }
};

class ModelRunner {
 public:
  virtual ~ModelRunner() = default;

  // Computes every item of `batch` in one forward pass and writes `results`
  // (resized to batch.size(), in order; BatchStats are filled in by the
  // batcher). A non-OK status fails the whole batch; so does an item whose
  // `work` is not the runner's type (INVALID_ARGUMENT). Called from up to
  // BatchOptions::executions threads at once, so it must be thread-safe.
  // `context` is valid for the call.
  virtual absl::Status Run(const std::vector<const BatchItem*>& batch,
                           std::vector<ItemResult>* results,
                           const RunContext& context) = 0;
};

}  // namespace encoder::batching

#endif  // ENCODER_SERVER_BATCHING_MODEL_RUNNER_H_
