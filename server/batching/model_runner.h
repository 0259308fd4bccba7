// What the batcher needs from a model: run a batch of items.
#ifndef ENCODER_SERVER_BATCHING_MODEL_RUNNER_H_
#define ENCODER_SERVER_BATCHING_MODEL_RUNNER_H_

#include <vector>

#include "absl/status/status.h"
#include "server/batching/types.h"

namespace encoder::batching {

class ModelRunner {
 public:
  virtual ~ModelRunner() = default;

  // Computes every item of `batch` in one forward pass and writes `results`
  // (resized to batch.size(), in order; BatchStats are filled in by the
  // batcher). A non-OK status fails the whole batch; so does an item whose
  // `work` is not the runner's type (INVALID_ARGUMENT). Called from up to
  // BatchOptions::executions threads at once, so it must be thread-safe.
  virtual absl::Status Run(const std::vector<const BatchItem*>& batch,
                           std::vector<ItemResult>* results) = 0;
};

}  // namespace encoder::batching

#endif  // ENCODER_SERVER_BATCHING_MODEL_RUNNER_H_
