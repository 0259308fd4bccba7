// What the encoder runner computes for one sequence, and what it returns:
// the payload of a batching::BatchItem and of its ItemResult. Plain C++ (no
// LibTorch), so that the RPC layer can build and read them.
#ifndef ENCODER_SERVER_API_EMBED_TYPES_H_
#define ENCODER_SERVER_API_EMBED_TYPES_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "server/batching/types.h"
#include "server/common/attention_stats.h"
#include "server/model/config.h"

namespace encoder::api {

// What to compute for one sequence. Validated by the caller (ids in the
// vocabulary, layer/head indices in range) before it is queued.
struct EmbedSpec {
  std::vector<int64_t> token_ids;
  // Token-type ids, one per token (a sentence pair's second text is 1 for
  // BERT-style models); empty: all 0.
  std::vector<int64_t> type_ids;
  // Only the first attended_tokens tokens are attended to (0: all): the
  // rest are computed, each attending to those, but no token attends to
  // them (ColBERT's query expansion on a model that does not attend to its
  // expansion tokens).
  int64_t attended_tokens = 0;
  // Also run the model's classification head on the tokens pooled with
  // `pooling` (the head's), into EmbedResult::scores.
  bool want_scores = false;
  // Also the model's sparse (SPLADE) vector into EmbedResult::sparse_*:
  // its entries above sparse_threshold, the sparse_top_k largest of them
  // (0: all), in index order. Requires the model's sparse head.
  bool want_sparse = false;
  int64_t sparse_top_k = 0;
  float sparse_threshold = 0;
  model::Pooling pooling = model::Pooling::kMean;  // see model/config.h
  bool normalize = false;
  bool want_tokens = false;  // per-token embeddings
  // ... through the model's token projection (its width in
  // EmbedResult::dim). Requires one.
  bool project_tokens = false;
  std::vector<int64_t> attention_layers;  // attention maps of these layers
  std::vector<int64_t> attention_heads;   // empty: all heads
  bool average_heads = false;             // maps averaged over the heads
  bool want_attention_stats = false;      // per layer x head statistics
  // Hidden states after these many layers (0 .. num_layers; 0 is the
  // embedding output), pooled with `pooling` when pool_hidden is set.
  std::vector<int64_t> hidden_layers;
  bool pool_hidden = false;
  // Leading tokens left out of the pooling (a prompt the model pools
  // without; sentence-transformers' include_prompt false): mean, max and
  // weighted mean skip them, first-token pooling takes the token after
  // them. Less than the sequence's length.
  int64_t pool_skip = 0;
  // Spans [begin, end) of the sequence's positions, each pooled on its own
  // with `pooling` (and the model's dense layers, never normalized) into
  // EmbedResult::span_pooled: late chunking, whose chunks see the whole
  // sequence's context. First-token and last-token pooling take the span's
  // first and last token.
  std::vector<std::pair<int64_t, int64_t>> pool_spans;
  batching::SequenceCost cost;  // ServedModel::Price; zero: free (tests)
};

struct EmbedResult {
  std::vector<float> pooled;       // [pooled_dim]
  std::vector<float> span_pooled;  // [spans, pooled_dim] (pool_spans)
  std::vector<float> scores;       // the head's logits (want_scores)
  // want_sparse: vocabulary indices (ascending) and their weights.
  std::vector<int32_t> sparse_indices;
  std::vector<float> sparse_values;
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
  batching::BatchStats batch;

  // Bytes of values it carries.
  int64_t ValueBytes() const {
    return static_cast<int64_t>((pooled.size() + span_pooled.size() +
                                 scores.size() + sparse_indices.size() +
                                 sparse_values.size() + tokens.size() +
                                 attention.size() + hidden.size()) *
                                sizeof(float));
  }
};

// A sequence as a batch item (length and cost from `spec`).
inline batching::BatchItem ToBatchItem(EmbedSpec spec) {
  batching::BatchItem item;
  item.length = static_cast<int64_t>(spec.token_ids.size());
  item.cost = spec.cost;
  item.work = std::move(spec);
  return item;
}

}  // namespace encoder::api

#endif  // ENCODER_SERVER_API_EMBED_TYPES_H_
