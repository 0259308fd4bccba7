// The front-neutral Classify and Rerank: a model's classification head on
// texts or text pairs (a cross-encoder scores a query with each document
// as one sequence). Plain C++ in (ScoreQuery) and out (ScoreAnswer), as
// Embed's; PrepareScore does every check that can fail the call before
// anything runs.
#ifndef ENCODER_SERVER_CORE_SCORE_REQUEST_H_
#define ENCODER_SERVER_CORE_SCORE_REQUEST_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/api/embed_types.h"
#include "server/api/served_model.h"
#include "server/core/embed_request.h"
#include "server/model/config.h"
#include "server/tokenizer/tokenizer.h"

namespace encoder::core {

// One sequence to score: a text, or a pair (first, second) encoded
// together with the model's pair template ([CLS] a [SEP] b [SEP]).
struct ScoreItem {
  std::string text;
  std::optional<std::string> pair;
};

struct ScoreQuery {
  enum class Task { kClassify, kRerank };
  // kRerank needs a one-logit head (a cross-encoder); kClassify any head.
  Task task = Task::kClassify;
  std::string model;  // empty: the default model
  std::string request_id;
  std::vector<ScoreItem> items;
  // How messages name items[i] ("texts", "documents").
  std::string item_field = "inputs";
  // true: cut a sequence over the model's length (a pair loses tokens from
  // its longer text first, as transformers' longest_first); false: refuse
  // it. Unset: cut when the model's long-input default
  // (ConfiguredLongInput) is truncate, else refuse.
  std::optional<bool> truncate;
  tokenizer::TruncationSide truncation_side = tokenizer::TruncationSide::kRight;
  // Explain each pair's score: the attention of these layers (none when
  // empty) and heads (all when empty, or averaged) from the first text's
  // tokens to the second's (ScoredItem::pair_attention).
  std::vector<int64_t> attention_layers;
  std::vector<int64_t> attention_heads;
  bool average_heads = false;
  // Positional probes of each pair (ScoredItem::probes): the pair scored
  // again with its two texts swapped, and with the second text's tokens
  // in reverse order. Each costs a sequence of the pair's length.
  bool positional_probes = false;
  // Rerank on a late-interaction model (ModelDescription::
  // late_interaction: BGE-M3's heads): the query and each document run
  // as sequences of their own, and a document's score is FlagEmbedding's
  // compute_score from their outputs, (dense w_d + sparse w_s + colbert
  // w_c) / (w_d + w_s + w_c): dense the pooled vectors' product, sparse
  // the lexical weights' overlap (sum of products over the ids both
  // keep), colbert the mean over the query's token vectors of each one's
  // largest product with a document vector. Unset: 1, 1, 1 (FlagEmbedding's
  // default; sparse 0 on a model without a sparse head). Each finite and
  // >= 0, their sum > 0; sparse > 0 needs a sparse head. attention_layers
  // set (any) asks for each document's token similarities instead of
  // attention (ScoreAnswer::token_similarity); positional probes are
  // refused (there is no pair sequence).
  struct LateWeights {
    float dense = 1, sparse = 1, colbert = 1;
  };
  std::optional<LateWeights> late_weights;
  // Rerank on a model with a rerank template (ModelDescription::
  // rerank_template: an instruction-following reranker): the template's
  // {instruction}; unset: the template's own. Refused on other models.
  std::optional<std::string> instruction;
};

// A pair's scores under the positional probes (ScoreQuery::
// positional_probes), as logits: swapped, the second text first (does
// the model read which text is the query?); reversed, the second text's
// tokens in reverse order, everything else in place (does it read the
// document's word order?).
struct PairProbes {
  std::vector<float> swapped_logits;
  std::vector<float> reversed_logits;
};

struct ScoredItem {
  std::vector<float> logits;  // one per label
  int64_t tokens = 0;
  bool truncated = false;
  int64_t truncated_tokens = 0;  // tokens truncation dropped
  // With ScoreQuery::attention_layers, for a pair: the attention from the
  // first text's tokens (rows) to the second's (columns), [layers, heads,
  // first, second] ([layers, first, second] averaged over the heads), and
  // those tokens as the tokenizer names them.
  std::vector<float> pair_attention;
  std::vector<int64_t> pair_attention_shape;
  std::vector<std::string> first_tokens;
  std::vector<std::string> second_tokens;
  std::optional<PairProbes> probes;  // pairs, with positional_probes
};

struct ScoreAnswer {
  std::string model;
  std::string request_id;
  std::vector<std::string> labels;
  model::ScoreActivation activation = model::ScoreActivation::kSigmoid;
  std::vector<ScoredItem> items;  // in the query's order
  // The items' pair_attention holds a late-interaction model's token
  // similarities (query token vectors by document token vectors), not
  // attention.
  bool token_similarity = false;
  int64_t total_tokens = 0;
  int64_t truncated_tokens = 0;  // summed over the items
  double tokenization_ms = 0;    // as EmbedAnswer's
  double queue_ms = 0;
  double inference_ms = 0;
  double total_ms = 0;
};

struct PreparedScore {
  const api::ServedModel* model = nullptr;
  // One per item, in order; then the probes' sequences.
  std::vector<api::EmbedSpec> sequences;
  size_t items = 0;
  // Per item with positional probes: the indices in `sequences` of its
  // swapped and reversed sequences; empty without probes.
  struct Probes {
    int64_t swapped = -1, reversed = -1;
  };
  std::vector<Probes> probes;
  std::vector<int64_t> truncated_tokens;  // per item; 0: not cut
  int64_t total_tokens = 0;
  // Per item when its attention is explained: the positions of the first
  // and the second text's tokens in the sequence, and the tokens.
  struct Sides {
    std::vector<int64_t> first, second;
    std::vector<std::string> first_tokens, second_tokens;
  };
  std::vector<Sides> sides;  // empty unless explained
  // Late interaction (ScoreQuery::late_weights): the documents' sequences
  // come first, one per item, then the query's; `weights` as resolved.
  // Explained (ScoreQuery::attention_layers set), `sides` holds per item
  // the query's tokens after the first (first_tokens) and the
  // document's (second_tokens), whose similarities the answer carries.
  bool late = false;
  ScoreQuery::LateWeights weights;
  // A PyLate ColBERT model (ModelDescription::colbert): the score is the
  // sum, not the mean, over the query's vectors, and per document which
  // of its token vectors are scored (its skiplist tokens are not).
  bool colbert = false;
  std::vector<std::vector<bool>> scored_rows;
};

// NOT_FOUND for an unknown model; FAILED_PRECONDITION for a model without
// the task (naming the tasks it has) or without a tokenizer;
// INVALID_ARGUMENT for late-interaction weights on a model that does not
// score that way, or weights out of range;
// INVALID_ARGUMENT for no items, more than max_inputs_per_request, an
// empty text, invalid UTF-8, or a sequence over the model's length without
// truncate; RESOURCE_EXHAUSTED (too large) for one over the batch memory
// budget.
absl::StatusOr<PreparedScore> PrepareScore(const ScoreQuery& query,
                                           const api::ModelCatalog& host,
                                           const ServiceLimits& limits);

// Upper estimate of the response's size in bytes.
int64_t EstimateScoreResponseBytes(const PreparedScore& prepared);

ScoreAnswer BuildScoreAnswer(std::string request_id,
                             const PreparedScore& prepared,
                             std::vector<api::EmbedResult> results,
                             double total_ms);

// `logits` through `activation` (a softmax over all of them).
std::vector<float> ActivateScores(const std::vector<float>& logits,
                                  model::ScoreActivation activation);

// Item indices by their first score, highest first (ties by index), at
// most `top_n` of them (0: all). `raw`: logits rather than the model's
// activation.
struct RankedItem {
  int64_t index = 0;
  float score = 0;
};
std::vector<RankedItem> RankItems(const ScoreAnswer& answer, bool raw,
                                  int64_t top_n);

// One item's labels with their scores, highest first (ties by label
// index).
struct LabelScore {
  std::string label;
  int64_t index = 0;
  float score = 0;
};
std::vector<LabelScore> LabelScores(const ScoreAnswer& answer, size_t item,
                                    bool raw);

}  // namespace encoder::core

#endif  // ENCODER_SERVER_CORE_SCORE_REQUEST_H_
