// What the core and the fronts see of the hosted models: a handle per model
// (its description, tokenizer, pricing, Embed and Diagnose) and the catalog
// that finds them. Plain C++, no LibTorch: the library of these types
// (server/api) sits below the core; the runner implements them, and no
// front reaches an encoder, runner or batcher (docs/ARCHITECTURE.md).
#ifndef ENCODER_SERVER_API_SERVED_MODEL_H_
#define ENCODER_SERVER_API_SERVED_MODEL_H_

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/api/diagnose_report.h"
#include "server/api/embed_types.h"
#include "server/batching/batch_policy.h"
#include "server/batching/batch_profile.h"
#include "server/batching/types.h"
#include "server/common/long_input_policy.h"
#include "server/model/colbert_framing.h"
#include "server/model/config.h"
#include "server/model/kernels/kernel_trace.h"
#include "server/model/positional/description.h"
#include "server/model/positional/reach.h"
#include "server/model/rerank_template.h"
#include "server/tokenizer/tokenizer.h"

namespace encoder::api {

// What a model can be asked for, and the one table of their names
// (ListModels, /info, /v1/models and messages say them).
enum class Task { kEmbed, kClassify, kRerank, kSparse, kMultiVector };
inline constexpr std::array<std::pair<Task, std::string_view>, 5> kTaskNames = {
    {{Task::kEmbed, "embed"},
     {Task::kClassify, "classify"},
     {Task::kRerank, "rerank"},
     {Task::kSparse, "sparse"},
     {Task::kMultiVector, "multi_vector"}}};

// How attention without maps runs: kFused (scaled_dot_product_attention),
// kExplicit (the products that maps and diagnostics always use) or
// kBfloat16 (Bf16Attention: an int8 model's, --int8-attention, or a
// bfloat16 CPU model's, --bf16-attention).
enum class AttentionKernel { kExplicit, kFused, kBfloat16 };
inline constexpr std::array<std::pair<AttentionKernel, std::string_view>, 3>
    kAttentionKernelNames = {{{AttentionKernel::kExplicit, "explicit"},
                              {AttentionKernel::kFused, "fused"},
                              {AttentionKernel::kBfloat16, "bfloat16"}}};
// How the layers' projections run: kPacked (weights laid out once at load
// for oneDNN, --pack-weights; float32, and bfloat16 where the CPU has it
// natively) or kPlain (the BLAS on the weights as loaded; also every
// float16, int8 or GPU model).
enum class LinearKernel { kPlain, kPacked };
inline constexpr std::array<std::pair<LinearKernel, std::string_view>, 2>
    kLinearKernelNames = {
        {{LinearKernel::kPlain, "plain"}, {LinearKernel::kPacked, "packed"}}};

// The name of `value` in `table` (one of the tables above).
template <typename Enum, size_t N>
std::string NameIn(
    const std::array<std::pair<Enum, std::string_view>, N>& table, Enum value) {
  for (const auto& [v, name] : table) {
    if (v == value) return std::string(name);
  }
  return "?";
}
inline std::string TaskName(Task t) { return NameIn(kTaskNames, t); }
inline std::string AttentionKernelName(AttentionKernel k) {
  return NameIn(kAttentionKernelNames, k);
}
inline std::string LinearKernelName(LinearKernel k) {
  return NameIn(kLinearKernelNames, k);
}

// A classification head as served (model::ScoreHead without its weights).
struct HeadDescription {
  std::vector<std::string> labels;  // one per logit; empty: no head
  model::Pooling pooling = model::Pooling::kFirst;
  model::ScoreActivation activation = model::ScoreActivation::kSigmoid;
  int64_t pad_id = -1;  // model::ScoreHead::pad_id
};

// A sparse head as served (model::SparseHead without weights).
struct SparseDescription {
  int64_t vocab = 0;  // the sparse vectors' width; 0: no sparse head
  // "masked_lm" (SPLADE: log1p of the vocabulary logits, pooled) or
  // "token_weight" (BGE-M3: relu of one weight per token, at its own id).
  std::string kind;
  std::string pooling;     // "max" or "sum"
  std::string activation;  // "relu" or "log1p_relu" (before the log1p)
};

// How far the model's pooled vector holds past its length, measured at
// load for the long-input policy auto
// (docs/long-inputs.md#the-default-policy): one
// seeded random period of n = max(1, T / 4) tokens (T the model's length)
// repeated to each length of a grid, run whole as served, and the pooled
// vector (its pooling and dense layers, before normalization) compared
// with the one at the reference length 4n <= T.
struct MeasuredReach {
  // The pooled drift up to which an input runs whole (--long-input-drift).
  double max_drift = 0;
  int64_t reference_length = 0;
  // The extrapolation limit the grid stops at.
  int64_t limit = 0;
  std::vector<int64_t> source;   // one period
  std::vector<int64_t> lengths;  // as run, increasing; stops at the first
                                 // length that breaks
  // |p_L - p_ref| / |p_ref| at each length.
  std::vector<double> drifts;
  // The longest length up to which every length held (reference_length
  // when none past it did), and the first that broke (0: none did).
  int64_t holds_up_to = 0;
  int64_t breaks_at = 0;
  double seconds = 0;  // what the measurement took
};

// A model as loaded: plain data, fixed once the model is served.
struct ModelDescription {
  std::string name;
  std::string family;  // "native" or the checkpoint's family
  model::ModelConfig config;
  model::SchemeDescription scheme;
  // What the scheme implies, as its traits say at load: how far it
  // reaches, and the longest input the model accepts (config.max_length()).
  model::SchemeReach reach;
  int64_t max_length = 0;
  int64_t output_dim = 0;  // pooled width
  int64_t parameter_count = 0;
  std::string device;                           // "cpu", "cuda:0"
  model::Dtype dtype = model::Dtype::kFloat32;  // the weights' dtype
  // What the products run in: int8 when quantized, else the dtype.
  model::Precision precision = model::Precision::kFloat32;
  // Where the weights came from, for display: a checkpoint directory's or
  // file's base name, or "seed:N" for random weights.
  std::string weights;
  // The tokenizer's kind ("byte", "wordpiece", ...) and file base name;
  // both empty when the model takes token ids only (no_tokenizer_reason
  // says why).
  std::string tokenizer_kind;
  std::string tokenizer_file;
  std::string no_tokenizer_reason;
  std::map<std::string, std::string> prompts;
  std::string default_prompt_name;
  bool include_prompt = true;
  // Texts lose their leading and trailing whitespace before tokenizing,
  // as sentence-transformers up to 5.3 did (--strip-text, or the
  // repository entry's strip_text).
  bool strip_text = false;
  int64_t max_extrapolation_tokens = 0;  // 0: the server's default
  // The repository entry's long-input policy; unset: the server's.
  std::optional<LongInputPolicy> long_input;
  // Measured when the long-input policy is auto and the scheme can run
  // past the model's length (runner::MeasureLongInputReach).
  std::optional<MeasuredReach> measured_reach;
  // Padding share from which the token-wise work skips padded positions.
  double skip_padding_min_share = 0;
  AttentionKernel attention_kernel = AttentionKernel::kExplicit;
  LinearKernel linear_kernel = LinearKernel::kPlain;
  // Packed: larger products use the BLAS, 0 none. Plain: 0.
  int64_t packed_max_rows = 0;
  // Packed: weights of fewer elements stay plain. Plain: 0.
  int64_t packed_min_elements = 0;
  // What the warm-up and an 8 x 128-token batch ran (oneDNN's and MKL's
  // traces; CPU only): the instruction sets the libraries dispatch to and
  // each product kernel with its rows.
  model::KernelTrace kernels;
  batching::BatchOptions batching;       // effective, caps included
  batching::BatchProfile batch_profile;  // empty when not measured
  HeadDescription head;
  SparseDescription sparse;
  // A multi-vector model's projected token width (its token-level Dense
  // and Normalize modules); 0: none.
  int64_t token_dim = 0;
  bool normalize_tokens = false;
  // The first token (CLS) has no projected vector (BGE-M3's ColBERT
  // vectors): projected token embeddings have one row fewer than tokens.
  bool token_skips_first = false;
  // Rerank scores a query against each document from their own outputs
  // (BGE-M3's dense, sparse and ColBERT scores, as FlagEmbedding's
  // compute_score) instead of a cross-encoder's head.
  bool late_interaction = false;
  // A PyLate ColBERT model (late_interaction, token projection): how its
  // queries and documents are framed, and its score the sum over the
  // query's vectors of the largest product with a document vector.
  std::optional<model::ColbertFraming> colbert;
  // Rerank reads a query and a document through this prompt (an
  // instruction-following reranker; ScoreQuery::instruction) instead of
  // the tokenizer's pair template; unset: the pair template.
  std::optional<model::RerankTemplate> rerank_template;
  // Rows of the token-type table (0: the model has none): a sentence
  // pair's type ids reach the model only where it has more than one.
  int64_t type_vocab_size = 0;

  // What the model serves: kEmbed always; kClassify with a head; kRerank
  // with a one-logit head (a cross-encoder) or by late interaction;
  // kSparse with a sparse head;
  // kMultiVector with a token projection (not a ColBERT model's, whose
  // vectors are framed per query and document).
  bool serves(Task task) const {
    switch (task) {
      case Task::kEmbed:
        return true;
      case Task::kClassify:
        return !head.labels.empty();
      case Task::kRerank:
        return head.labels.size() == 1 || late_interaction;
      case Task::kSparse:
        return sparse.vocab > 0;
      case Task::kMultiVector:  // a ColBERT model's through Rerank only
        return token_dim > 0 && !colbert.has_value();
    }
    return false;
  }
  // Their names, in kTaskNames' order ("embed", "classify", ...).
  std::vector<std::string> tasks() const {
    std::vector<std::string> t;
    for (const auto& [task, name] : kTaskNames) {
      if (serves(task)) t.emplace_back(name);
    }
    return t;
  }
};

// One Embed call's sequences, validated and priced by the caller.
struct EmbedWork {
  std::vector<EmbedSpec> sequences;
  // Sequences not started by then are dropped (DEADLINE_EXCEEDED).
  absl::Time deadline = absl::InfiniteFuture();
  // Polled before each sequence starts; may be empty. Thread-safe, must
  // not throw.
  std::function<bool()> is_cancelled;
  // Required. Called exactly once unless Embed returns an error, on the
  // model's batcher threads: one result per sequence, in order, when OK;
  // none otherwise.
  std::function<void(absl::Status, std::vector<EmbedResult>)> done;
  // The call is traced (batching::Request::traced).
  bool traced = false;
};

// One Diagnose call, validated and priced by the caller.
struct DiagnoseWork {
  api::DiagnoseOptions options;
  // The tokens of its longest forward pass (the input, or the
  // extrapolation probe's longest run) and what it needs of the batch
  // memory budget at that length (Price of a sequence that asks for every
  // layer's statistics).
  int64_t length = 0;
  batching::SequenceCost cost;
  // Not started by then: DEADLINE_EXCEEDED.
  absl::Time deadline = absl::InfiniteFuture();
  // Polled before it starts; may be empty. Thread-safe, must not throw.
  std::function<bool()> is_cancelled;
  // Required. Called exactly once unless Diagnose returns an error, on the
  // model's batcher threads: the report or why there is none, and when it
  // ran (queue and run time; zeros when it never ran).
  std::function<void(absl::StatusOr<api::DiagnoseReport>,
                     const batching::BatchStats&)>
      done;
};

class ServedModel {
 public:
  virtual ~ServedModel() = default;

  virtual const ModelDescription& description() const = 0;
  const std::string& name() const { return description().name; }

  // Text -> ids; null when the model takes token ids only. Thread-safe.
  virtual const tokenizer::Tokenizer* tokenizer() const = 0;

  // The memory `spec` needs while it runs (see batching::SequenceCost).
  virtual batching::SequenceCost Price(const EmbedSpec& spec) const = 0;

  // Queues the sequences on the model's batcher, to be batched with other
  // calls'. INVALID_ARGUMENT without sequences or `done`; UNAVAILABLE
  // while draining; RESOURCE_EXHAUSTED when the queue is full (the message
  // names the limit). On error `work.done` is not called.
  virtual absl::Status Embed(EmbedWork work) const = 0;

  // Sequences accepted and not yet started.
  virtual int64_t queued_sequences() const = 0;

  // Queues the positional probes on the model's batcher as one item that
  // runs alone: the same queue, limits, memory budget, deadline,
  // cancellation and drain as Embed, so no forward pass of this model runs
  // beside them. Errors as Embed's, and then `work.done` is not called.
  virtual absl::Status Diagnose(DiagnoseWork work) const = 0;
};

// The served models by name. Thread-safe and fixed once built.
class ModelCatalog {
 public:
  virtual ~ModelCatalog() = default;

  // The model by name; an empty name gives the default. nullptr: unknown.
  virtual const ServedModel* Find(const std::string& name) const = 0;
  // In repository order.
  virtual std::vector<const ServedModel*> List() const = 0;
  virtual const std::string& default_model() const = 0;
  // Bytes the running batches of all models may hold at once.
  virtual int64_t batch_memory_budget_bytes() const = 0;
  // Stops accepting and waits for accepted work, up to `deadline`.
  // Returns whether everything completed.
  virtual bool DrainAll(absl::Time deadline) = 0;
};

}  // namespace encoder::api

#endif  // ENCODER_SERVER_API_SERVED_MODEL_H_
