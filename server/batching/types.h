// The unit of work of the batcher: one sequence, with what the caller wants
// computed for it, and its result. Plain C++ types: no protobuf, no LibTorch.
#ifndef ENCODER_SERVER_BATCHING_TYPES_H_
#define ENCODER_SERVER_BATCHING_TYPES_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/status.h"
#include "server/common/attention_stats.h"

namespace encoder::batching {

// kFirst: the first token; kLastToken: the last real token; kWeightedMean:
// token t (from 1) weighted by t.
enum class PoolingMode { kMean, kFirst, kMax, kLastToken, kWeightedMean };

// The memory a sequence needs while it runs, as the model runner prices it:
// per_token * L + per_token_pair * L^2 bytes when padded to length L (the
// L^2 term is attention: scores, probabilities, kept maps).
struct SequenceCost {
  int64_t per_token = 0;
  int64_t per_token_pair = 0;

  // Saturates at INT64_MAX instead of overflowing.
  int64_t At(int64_t length) const;
};

// What to compute for one sequence. Validated by the caller (ids in the
// vocabulary, layer/head indices in range) before it reaches the batcher.
struct SequenceSpec {
  std::vector<int64_t> token_ids;
  PoolingMode pooling = PoolingMode::kMean;
  bool normalize = false;
  bool want_tokens = false;               // per-token embeddings
  std::vector<int64_t> attention_layers;  // attention maps of these layers
  std::vector<int64_t> attention_heads;   // empty: all heads
  bool average_heads = false;             // maps averaged over the heads
  bool want_attention_stats = false;      // per layer x head statistics
  // Hidden states after these many layers (0 .. num_layers; 0 is the
  // embedding output), pooled with `pooling` when pool_hidden is set.
  std::vector<int64_t> hidden_layers;
  bool pool_hidden = false;
  SequenceCost cost;  // priced by the runner; zero: free (tests)
  // Set: this item is a job of the model's own (Diagnose's probes), not a
  // sequence to embed. It waits in the same queue under the same limits,
  // is dropped on deadline or cancellation and drained like a sequence of
  // token_ids.size() tokens and `cost`, but runs alone, in a batch of its
  // own: the worker calls it instead of the runner, holding its cost of
  // the memory budget, and its result carries only BatchStats. Must not
  // throw.
  std::function<absl::Status()> run_alone;
};

// Which batch a sequence ran in and how long it took.
struct BatchStats {
  int64_t batch_size = 0;     // sequences in the forward pass
  int64_t padded_tokens = 0;  // longest x batch_size
  int64_t real_tokens = 0;    // sum of lengths
  double queue_seconds = 0;   // from submission to the start of the batch
  double inference_seconds = 0;
};

struct SequenceResult {
  std::vector<float> pooled;     // [pooled_dim]
  std::vector<float> tokens;     // [seq, D], when wanted
  std::vector<float> attention;  // see attention_shape
  // [layers, heads, seq, seq], or [layers, seq, seq] when averaged.
  std::vector<int64_t> attention_shape;
  std::vector<AttentionHeadStats> attention_stats;  // layer-major
  // [layers, seq, D], or [layers, D] when pooled.
  std::vector<float> hidden;
  std::vector<int64_t> hidden_shape;
  int64_t num_tokens = 0;
  int64_t dim = 0;         // token embedding width
  int64_t pooled_dim = 0;  // pooled width (differs after dense layers)
  BatchStats batch;
};

}  // namespace encoder::batching

#endif  // ENCODER_SERVER_BATCHING_TYPES_H_
