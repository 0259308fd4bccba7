// The Transformer encoder (docs/positional-encodings.md#the-base-encoder):
// token embedding, a positional scheme, N encoder layers (post- or pre-norm),
// and pooling. LibTorch only; no RPC types.
#ifndef ENCODER_SERVER_MODEL_ENCODER_H_
#define ENCODER_SERVER_MODEL_ENCODER_H_

#include <ATen/ATen.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/model/config.h"
#include "server/model/kernels/int8_linear.h"
#include "server/model/kernels/packed_linear.h"
#include "server/model/positional/positional.h"

namespace encoder::model {

// One encoder layer's weights, in nn.TransformerEncoderLayer's layout.
// A = heads x head_dim (D unless the config sets head_dim); F' = F, or 2F
// for a gated feed-forward. Biases are undefined when the architecture has
// none; norm1 is undefined where a layer has no attention norm.
// With grouped-query attention the key and value rows are K = kv_heads x
// head_dim wide (K = A otherwise).
struct LayerWeights {
  at::Tensor in_proj_weight;   // [A + 2K, D], rows [W_q; W_k; W_v]
  at::Tensor in_proj_bias;     // [A + 2K]
  at::Tensor out_proj_weight;  // [D, A]
  at::Tensor out_proj_bias;    // [D]
  at::Tensor linear1_weight;   // [F', D]
  at::Tensor linear1_bias;     // [F']
  at::Tensor linear2_weight;   // [D, F]
  at::Tensor linear2_bias;     // [D]
  at::Tensor norm1_weight, norm1_bias, norm2_weight, norm2_bias;  // [D]
  // ArchOptions::sandwich_norm: after attention and after the feed-forward.
  at::Tensor norm3_weight, norm4_weight;  // [D]
  // Per-head RMSNorm gains of queries and keys (ArchOptions::qk_norm).
  at::Tensor q_norm_weight, k_norm_weight;  // [head_dim]
  // The four projections in int8, once Encoder::QuantizeInt8 has run.
  std::optional<Int8Linear> in_proj_q, out_proj_q, linear1_q, linear2_q;
  // The four projections with oneDNN-packed float32 weights beside the
  // plain ones, once Encoder::PrepackWeights has run.
  std::optional<PackedLinear> in_proj_p, out_proj_p, linear1_p, linear2_p;
};

// A dense layer applied to the pooled embedding (sentence-transformers'
// Dense module, a classification head's layers): y = act(x W^T + b), then
// LayerNorm(y) when norm_weight is defined (ModernBERT's head). Without a
// weight the layer is the LayerNorm alone (sentence-transformers' LayerNorm
// module).
struct DenseLayer {
  enum class Act { kIdentity, kTanh, kRelu, kGelu, kSigmoid };
  at::Tensor weight;  // [out, in], or undefined: no linear
  // The width the layer gives.
  int64_t out_features() const {
    return weight.defined() ? weight.size(0) : norm_weight.size(0);
  }
  at::Tensor bias;  // [out] or undefined
  Act act = Act::kIdentity;
  at::Tensor norm_weight;  // [out] or undefined
  at::Tensor norm_bias;    // [out] or undefined
  double norm_eps = 1e-5;
};

// A sequence classification head (transformers' *ForSequenceClassification,
// sentence-transformers' CrossEncoder): the tokens pooled with `pooling`,
// then `layers`, the last of which gives one logit per label.
struct ScoreHead {
  Pooling pooling = Pooling::kFirst;
  std::vector<DenseLayer> layers;
  std::vector<std::string> labels;  // one per logit (id2label)
  ScoreActivation activation = ScoreActivation::kSigmoid;
  // Last-token heads of causal models (transformers' rule): the last token
  // that is not this id is scored; -1: the last token.
  int64_t pad_id = -1;
  int64_t num_labels() const { return static_cast<int64_t>(labels.size()); }
};

// The masked-language-model head that makes SPLADE's sparse vectors
// (transformers' *ForMaskedLM, sentence-transformers' SpladePooling): each
// token's state through `layers` (the transform, then the decoder onto the
// vocabulary) gives logits [tokens, vocab]; log(1 + relu(logits)) (twice
// with double_log: the log1p_relu variant), pooled over the sequence's
// tokens by max or sum, is the input's weight of every vocabulary entry.
//
// kTokenWeight is BGE-M3's lexical head instead (FlagEmbedding's
// sparse_linear): `layers` is one projection onto a single value whose
// relu is the token's weight, given to the token's own id (the largest
// when an id repeats) in a vector `token_vocab` wide; `dropped_ids` (the
// tokenizer's cls, eos, pad and unk tokens) weigh nothing.
struct SparseHead {
  enum class Pool { kMax, kSum };
  enum class Kind { kMaskedLm, kTokenWeight };
  Kind kind = Kind::kMaskedLm;
  // The last layer is the decoder; an undefined weight there is tied to
  // the token embedding table (Encoder::set_sparse_head fills it).
  std::vector<DenseLayer> layers;
  Pool pooling = Pool::kMax;
  bool double_log = false;
  int64_t token_vocab = 0;           // kTokenWeight
  std::vector<int64_t> dropped_ids;  // kTokenWeight
  int64_t vocab() const {
    if (kind == Kind::kTokenWeight) return token_vocab;
    return layers.empty() || !layers.back().weight.defined()
               ? 0
               : layers.back().weight.size(0);
  }
};

// Encoder::QuantizeInt8's float32 channels per projection by default. On
// all-MiniLM-L6-v2's real weights without VNNI, served mean cosine against
// float32 0.9965 with none and 0.9990 with 8, for about 15% of int8's
// throughput (8 multiply-adds per output; docs/benchmarks-history.md,
// "int8 quality").
inline constexpr int64_t kDefaultInt8FloatChannels = 8;
// The calibration pass: this many sequences of this many seeded random ids
// (at most the model's length limit).
inline constexpr int64_t kInt8CalibrationSequences = 4;
inline constexpr int64_t kInt8CalibrationTokens = 128;

struct EncoderInput {
  at::Tensor ids;        // [batch, seq] int64, padded with any valid id
  at::Tensor mask;       // [batch, seq] bool, true for real tokens
  at::Tensor positions;  // [batch, seq] int64; undefined -> 0..seq-1
  // [batch, seq] int64 rows of the token-type table (a sentence pair's
  // second text); undefined -> 0. Ignored by a model without the table.
  at::Tensor types;
  // [batch, seq] bool: the real tokens others may attend to; undefined ->
  // mask. A real token left out here is computed (its own output) but no
  // position attends to it: ColBERT's query expansion tokens on a model
  // that does not attend to them. Must be false wherever mask is.
  at::Tensor keys;
};

// ForwardOptions::skip_padding_min_share by default: measured on the
// built-in shape (docs/benchmarks-history.md, "Skipping padded
// positions"), gathering pays from about this share of padding on.
inline constexpr double kDefaultSkipPaddingMinShare = 0.1;
// The gathered rows are padded up to a multiple of this (with padded
// positions): at batch 8 x 16 tokens, a forward on 122 gathered rows took
// about 12% longer than one on the full grid of 128 rows, and on 128
// gathered rows 3% longer.
inline constexpr int64_t kPackedRowAlignment = 8;

struct ForwardOptions {
  // Layers whose attention probabilities to return (any order, no repeats).
  std::vector<int64_t> attention_layers;
  // Hidden states to return, by the number of layers run before them:
  // 0 is the embedding output, num_layers the last layer's output (after
  // a pre-norm model's final norm, as transformers returns it: the same
  // tensor as the token embeddings). Any order, no repeats.
  std::vector<int64_t> hidden_layers;
  // An int8 model runs its float32 weights, exactly as before quantization
  // (diagnostics: their tolerances are far below int8 rounding).
  bool full_precision = false;
  // When at least this share of the padded [batch, seq] grid is padding,
  // the token-wise work (projections, feed-forward, norms) runs on the real
  // tokens' rows alone, gathered into [rows, D], and attention on the
  // padded grid, or on the CPU with prefix masks per sequence on its own
  // length (ExactLengths). Below it (and at 1, which no batch reaches) every
  // padded position is computed too: gathering costs more than a few
  // padded rows save. Real tokens' results agree either way within float
  // rounding.
  double skip_padding_min_share = kDefaultSkipPaddingMinShare;
  // Layers whose attention probabilities are not returned run through the
  // fused scaled_dot_product_attention kernel (FusedAttention), with the
  // scheme's bias and the padding as its additive mask. False: every layer
  // runs the explicit products.
  bool fused_attention = true;
  // Asked before every layer; a non-OK status ends the pass with it (a
  // batch whose callers have all given up). May be empty.
  std::function<absl::Status()> should_stop;
};

struct EncoderOutput {
  at::Tensor tokens;  // [batch, seq, D]; padded rows are unspecified
  // Attention probabilities [batch, heads, seq, seq] for each requested
  // layer, keyed by layer index. Padded keys have probability 0.
  std::map<int64_t, at::Tensor> attention;
  // Hidden states [batch, seq, D] for each requested index.
  std::map<int64_t, at::Tensor> hidden;
};

class Encoder {
 public:
  // Builds from a state_dict: the native names (embedding.weight,
  // encoder.layers.{i}.self_attn.in_proj_weight, ...) plus, where the
  // config's ArchOptions ask for them, token_type_embedding.weight and
  // embedding_norm.weight/.bias. Checks every tensor's
  // presence and shape, rejects unexpected names, converts to `dtype` and
  // moves to `device` once. Errors name the tensor.
  static absl::StatusOr<std::unique_ptr<Encoder>> Create(
      const ModelConfig& config,
      const std::map<std::string, at::Tensor>& state_dict, at::Device device,
      at::ScalarType dtype = at::kFloat);

  // A deterministic random state_dict for `config` (same seed, same weights,
  // on any machine): normal(0, 0.02) matrices, unit LayerNorm gains.
  static std::map<std::string, at::Tensor> RandomStateDict(
      const ModelConfig& config, uint64_t seed);

  // The expected state_dict names and shapes for a config.
  static std::map<std::string, std::vector<int64_t>> ExpectedShapes(
      const ModelConfig& config);

  // Runs the encoder under inference mode. Thread-safe (const, no state).
  // Library errors (c10::Error) come back as Internal statuses; shape errors
  // in the input come back as InvalidArgument.
  absl::StatusOr<EncoderOutput> Forward(const EncoderInput& input,
                                        const ForwardOptions& options) const;

  // Dense layers run on pooled embeddings (before normalization), moved to
  // the encoder's device and dtype. Set once, before serving.
  void set_output_dense(std::vector<DenseLayer> dense);
  // Pooled [batch, D] -> [batch, output_dim()] through the dense layers.
  at::Tensor ProjectPooled(const at::Tensor& pooled) const;
  int64_t output_dim() const;

  // Dense layers run on each token's embedding (a multi-vector model's
  // projection), then an L2 normalization of each token when `normalize`;
  // moved to the encoder's device and dtype. With `skip_first`, the first
  // token (BGE-M3's CLS, which its ColBERT vectors leave out) is not
  // projected. Set once, before serving.
  void set_token_dense(std::vector<DenseLayer> dense, bool normalize,
                       bool skip_first = false);
  // One sequence's token embeddings [n, D] -> [n, token_output_dim()]
  // ([n - 1, ...] when the first is skipped).
  at::Tensor ProjectTokens(const at::Tensor& tokens) const;
  bool token_projection_skips_first() const { return skip_first_token_; }
  bool has_token_projection() const {
    return !token_dense_.empty() || normalize_tokens_;
  }
  // The projected width (D without token dense layers).
  int64_t token_output_dim() const {
    return token_dense_.empty() ? config_.d_model
                                : token_dense_.back().out_features();
  }
  bool normalize_tokens() const { return normalize_tokens_; }

  // The classification head, moved to the encoder's device and dtype. Set
  // once, before serving.
  void set_score_head(ScoreHead head);
  // Null without one.
  const ScoreHead* score_head() const {
    return score_head_.has_value() ? &*score_head_ : nullptr;
  }
  // Pooled [batch, D] (pooled with the head's pooling, no dense layers) ->
  // logits [batch, labels]. Requires a head.
  at::Tensor Score(const at::Tensor& pooled) const;

  // The masked-LM head for sparse vectors, moved to the encoder's device
  // and dtype; a decoder without a weight takes the token embedding table
  // (InvalidArgument when its width does not match). Set once, before
  // serving.
  absl::Status set_sparse_head(SparseHead head);
  // Null without one.
  const SparseHead* sparse_head() const {
    return sparse_head_.has_value() ? &*sparse_head_ : nullptr;
  }
  // One sequence's token states [n, D] (its real tokens) and their ids
  // -> its weight of every vocabulary entry [vocab], float32 on the
  // encoder's device. Requires a sparse head.
  at::Tensor SparseWeights(const at::Tensor& tokens,
                           const std::vector<int64_t>& ids) const;

  // Runs every layer's four projections with int8 weights (per output
  // channel) and per-token dynamic int8 activations (Int8Linear). In each
  // projection, the `float_channels` input channels that reach the
  // largest |x| on a calibration pass stay in float32 (0: none): the pass
  // runs the float32 model on seeded random token ids (no data needed;
  // the channels that run high are a property of the weights). CPU and
  // float32 only; FailedPrecondition otherwise or without the kernels;
  // InvalidArgument for a negative count. Call once, before serving.
  // `row_outliers`: in each layer's second feed-forward projection (its
  // input is the activation's output), each token's that many largest |x|
  // stay in float32 as well (Int8Linear::Create; at most the input width).
  absl::Status QuantizeInt8(int64_t float_channels = kDefaultInt8FloatChannels,
                            int64_t row_outliers = 0);
  // "none" or "int8".
  std::string quantization() const { return quantized_ ? "int8" : "none"; }

  // How an int8 model's attention products run in its int8 passes (maps
  // and full-precision passes keep float32): "float32" (as float32
  // models), "bfloat16" (Bf16Attention: bfloat16 products, float32 sums
  // and softmax; needs AVX-512 BF16 and a head size of 32, 64, 96 or 128,
  // FailedPrecondition otherwise) or "auto" (bfloat16 where it runs,
  // float32 elsewhere). InvalidArgument for another name,
  // FailedPrecondition before QuantizeInt8. Call before serving.
  absl::Status SetInt8Attention(const std::string& mode);
  // How a bfloat16 model's attention runs on the CPU (maps keep the
  // explicit products): "bfloat16" (Bf16Attention, reading the bfloat16
  // queries, keys and values as they are; needs AVX-512 BF16 and a head
  // size of 32, 64, 96 or 128, FailedPrecondition otherwise), "fused"
  // (LibTorch's fused kernel, on each sequence's own length) or "auto"
  // (bfloat16 where it runs, fused elsewhere), which a bfloat16 CPU model
  // starts with. InvalidArgument for another name, FailedPrecondition for
  // another dtype or device. Call before serving.
  absl::Status SetBf16Attention(const std::string& mode);
  // Whether int8 passes, or a bfloat16 model's passes, run Bf16Attention.
  bool bf16_attention() const { return bf16_attention_; }

  // Lays every layer's four float32 projection weights out once more in
  // oneDNN's blocked format (PackedLinear): products of up to `max_rows`
  // rows then run without the BLAS repacking each weight on every call,
  // larger ones on the plain weights as before, at the cost of one more
  // copy of those weights. max_rows PackedLinear::kEveryProduct (0): every
  // product runs packed and the layers drop their plain weights (their
  // shapes stay, for parameter_count; weights mapped from a file stay
  // mapped while the file's other tensors live); QuantizeInt8 then fails,
  // as it reads them. CPU and float32
  // only; FailedPrecondition otherwise or without the operator
  // (PackedLinearSupported); InvalidArgument for max_rows < 0. Weights
  // of fewer than `limits.min_elements` elements stay plain, and run every
  // product through the BLAS. Call once, before serving.
  absl::Status PrepackWeights(PackedLimits limits);
  absl::Status PrepackWeights(
      int64_t max_rows = PackedLinear::kDefaultPackedMaxRows) {
    return PrepackWeights(PackedLimits{max_rows, 0});
  }
  bool prepacked() const { return prepacked_; }
  // How many projection weights PrepackWeights packed (0 before it, or
  // when every weight was under its min_elements).
  int64_t packed_weights() const { return packed_weights_; }

  const ModelConfig& config() const { return config_; }
  const PositionalScheme& scheme() const { return *scheme_; }
  at::Device device() const { return device_; }
  at::ScalarType dtype() const { return dtype_; }
  int64_t parameter_count() const;

 private:
  Encoder(ModelConfig config, at::Device device, at::ScalarType dtype);

  // How one forward runs: each sequence's real length when attention runs
  // per sequence (ExactLengths; empty for the batched path), whether the
  // int8 projections are used, and the real tokens' rows when the
  // token-wise work skips padding.
  struct Pass {
    std::vector<int64_t> lengths;
    // Each sequence's extent (1 + its largest real position) when the
    // scheme's rotary angles depend on it; empty else.
    std::vector<int64_t> extents;
    bool int8 = false;
    // Layers without maps requested run Bf16Attention (int8 passes of a
    // model set to it).
    bool bf16_attention = false;
    // Layers without maps requested go through the fused kernel.
    bool fused = false;
    // The bias holds only the key padding mask: no scheme bias, no window.
    // Cut to one sequence's length, or for a batch without padding, it is
    // all zeros and the fused kernel runs with no mask.
    bool bias_only_padding = false;
    bool has_padding = false;
    int64_t batch = 0, seq = 0;
    // Indices in the flattened [batch * seq] grid of the rows the
    // token-wise work runs on: the real tokens, then padded positions up
    // to a multiple of kPackedRowAlignment. Undefined when the hidden state
    // stays on the padded grid.
    at::Tensor rows;
    // For each grid position, its index in `rows`, or rows.numel() (a zero
    // row) where it is not one of them.
    at::Tensor grid_rows;
    bool packed() const { return rows.defined(); }
    // While QuantizeInt8 calibrates: each projection's largest |x| per
    // input channel so far, keyed by its float32 weight's storage.
    std::map<const void*, at::Tensor>* input_max = nullptr;
    // [batch, seq, C] -> [tokens, C]; identity when not packed.
    at::Tensor Pack(const at::Tensor& grid) const;
    // [tokens, C] -> [batch, seq, C] with zero padding; identity when not
    // packed.
    at::Tensor Unpack(const at::Tensor& packed_rows) const;
  };
  at::Tensor Layer(int64_t index, const at::Tensor& x,
                   const at::Tensor& positions, const at::Tensor& bias,
                   const Pass& pass, at::Tensor* attention) const;
  at::Tensor Attention(int64_t index, const at::Tensor& x,
                       const at::Tensor& positions, const at::Tensor& bias,
                       const Pass& pass, at::Tensor* attention) const;
  // Scaled dot-product attention of q, k, v [B, H, S, d] -> [B, S, H*d]:
  // the explicit products when `attention` wants the probabilities or the
  // pass is not fused, else the fused kernel, given `bias` as its mask only
  // when `use_bias` (false: the bias is known to be all zeros).
  at::Tensor Mix(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                 const at::Tensor& bias, bool use_bias, bool fused,
                 at::Tensor* attention) const;
  // sqrt(d), or sqrt(d x (1 + position terms)) for disentangled attention.
  double ScoreRoot(int64_t head_dim) const;
  // The scores' scale: 1 / ScoreRoot, or 1 for a family that leaves its
  // scores unscaled.
  double ScoreScale(int64_t head_dim) const;
  // Mix on each sequence's first lengths[i] positions alone, so that its
  // products have the same shapes whatever it is batched with.
  at::Tensor MixEach(const at::Tensor& q, const at::Tensor& k,
                     const at::Tensor& v, const at::Tensor& bias,
                     const std::vector<int64_t>& lengths, const Pass& pass,
                     at::Tensor* attention) const;
  // Real lengths for per-sequence attention: always on the int8 and
  // bfloat16 paths, and on the CPU when the token-wise work skips padding
  // (`packed`); empty otherwise, or for masks that are not prefixes.
  std::vector<int64_t> ExactLengths(const at::Tensor& mask, bool int8,
                                    bool packed) const;
  // Each row's extent: 1 + its largest position among the real tokens.
  static std::vector<int64_t> Extents(const at::Tensor& positions,
                                      const at::Tensor& mask);
  at::Tensor FeedForward(const LayerWeights& w, const at::Tensor& x,
                         const Pass& pass) const;
  // x W^T + b, through `q` when the pass uses int8, else through `packed`
  // when the weights are packed; then `activation`, if any (in the packed
  // kernel's epilogue there).
  static at::Tensor Project(
      const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
      const std::optional<Int8Linear>& q,
      const std::optional<PackedLinear>& packed, const Pass& pass,
      std::optional<Activation> activation = std::nullopt);
  // LayerNorm or RMSNorm per the config; identity when `weight` is
  // undefined.
  at::Tensor Norm(const at::Tensor& x, const at::Tensor& weight,
                  const at::Tensor& bias) const;
  // Default position ids [batch, seq] per the config's PositionIdRule.
  at::Tensor DefaultPositions(const at::Tensor& tokens,
                              const at::Tensor& mask) const;
  // The additive attention bias of each layer (padding, scheme, window).
  std::vector<at::Tensor> LayerBiases(const at::Tensor& base,
                                      const at::Tensor& positions) const;

  ModelConfig config_;
  at::Device device_;
  at::ScalarType dtype_;
  at::Tensor embedding_;   // [vocab, D]
  at::Tensor token_type_;  // [types, D] or undefined
  at::Tensor embedding_norm_weight_, embedding_norm_bias_;  // or undefined
  std::vector<LayerWeights> layers_;
  at::Tensor final_norm_weight_, final_norm_bias_;  // pre-norm only
  std::unique_ptr<PositionalScheme> scheme_;
  std::vector<DenseLayer> dense_;
  std::vector<DenseLayer> token_dense_;
  bool normalize_tokens_ = false;
  bool skip_first_token_ = false;
  std::optional<ScoreHead> score_head_;
  std::optional<SparseHead> sparse_head_;
  bool quantized_ = false;
  // SetInt8Attention, SetBf16Attention; for a bfloat16 CPU model, set at
  // construction as SetBf16Attention("auto") would.
  bool bf16_attention_ = false;
  // Set only during QuantizeInt8's calibration pass (before serving).
  std::map<const void*, at::Tensor>* calibrating_ = nullptr;
  bool prepacked_ = false;
  int64_t packed_weights_ = 0;
  bool plain_released_ = false;  // PrepackWeights(kEveryProduct)
};

// Pools token embeddings [batch, seq, D] with mask [batch, seq] -> [batch, D].
// Real tokens are a prefix of each row (the mask is true then false).
at::Tensor Pool(const at::Tensor& tokens, const at::Tensor& mask,
                Pooling pooling, bool normalize);

}  // namespace encoder::model

#endif  // ENCODER_SERVER_MODEL_ENCODER_H_
