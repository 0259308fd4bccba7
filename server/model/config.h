// Model configuration: architecture, positional scheme and limits.
//
// A config is parsed from JSON (see ParseModelConfig for the schema) or built
// in code. All fields have defaults here and nowhere else.
#ifndef ENCODER_SERVER_MODEL_CONFIG_H_
#define ENCODER_SERVER_MODEL_CONFIG_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/model/positional/scheme.h"

namespace encoder::model {

// The feed-forward activations of transformers' ACT2FN, each computed as
// activations.py computes it: kGelu the exact erf form ("gelu"); kGeluTanh
// torch's tanh approximation ("gelu_pytorch_tanh"); kGeluNew and kGeluFast
// the same approximation written out ("gelu_new": 0.5 x (1 + tanh(sqrt(2 /
// pi) (x + 0.044715 x^3))); "gelu_fast": 0.5 x (1 + tanh(0.7978845608 x (1 +
// 0.044715 x^2)))); kQuickGelu x sigmoid(1.702 x); kSilu ("silu",
// "swish"); kMish x tanh(softplus(x)).
enum class Activation {
  kRelu,
  kGelu,
  kGeluTanh,
  kSilu,
  kGeluNew,
  kGeluFast,
  kQuickGelu,
  kMish
};
// The floating-point types a model's weights are held in (--dtype), and
// what its layers' products run in: the dtype, or int8 (--quantize=int8 on
// a float32 model). Flags, metrics and every front spell them with
// DtypeName / PrecisionName below.
enum class Dtype { kFloat32, kFloat16, kBfloat16 };
enum class Precision { kFloat32, kFloat16, kBfloat16, kInt8 };
// kFirst is the first token ([CLS]); kLastToken the last real token;
// kWeightedMean weighs token t (from 1) by t (sentence-transformers);
// kMeanSqrtLen is the sum over the n tokens divided by sqrt(n)
// (sentence-transformers' mean_sqrt_len_tokens).
enum class Pooling {
  kMean,
  kFirst,
  kMax,
  kLastToken,
  kWeightedMean,
  kMeanSqrtLen
};
// How a classification head's logits become scores by default: as they
// are, each through a sigmoid, or a softmax over the labels.
enum class ScoreActivation { kIdentity, kSigmoid, kSoftmax };
enum class NormKind { kLayerNorm, kRmsNorm };
// How default position ids are numbered: 0..S-1, or (RoBERTa) from
// padding_idx + 1, counting only tokens that are not padding_idx (padding
// tokens get padding_idx itself).
enum class PositionIdRule { kFromZero, kAfterPadding };
// Architecture variations used by imported checkpoint families. The defaults
// are the native architecture (nn.TransformerEncoderLayer), so a config that
// leaves them alone runs exactly the same operations as before they existed.
struct ArchOptions {
  NormKind norm = NormKind::kLayerNorm;
  bool norm_bias = true;       // LayerNorm has a bias (RMSNorm never does)
  bool attention_bias = true;  // q/k/v and output projections have biases
  bool ffn_in_bias = true;     // the feed-forward input projection has one
  bool ffn_out_bias = true;    // the feed-forward output projection has one
  // Feed-forward input projection is [2F, D]: act(first F) * (second F).
  bool gated_ffn = false;
  bool attention_scale = true;        // divide scores by sqrt(head_dim)
  int64_t head_dim = 0;               // 0: d_model / num_heads
  bool embedding_norm = false;        // a norm after the embedding sum (BERT)
  bool token_type_embedding = false;  // add row 0 of a token-type table
  int64_t type_vocab_size = 0;        // rows of that table
  bool first_layer_attention_norm = true;  // ModernBERT: layer 0 has none
  // Per layer: attend only to keys with |i - j| <= window (0: global).
  // Empty: every layer global.
  std::vector<int64_t> layer_window;
  // Per layer rotary base (rope only); empty: positional.base everywhere.
  std::vector<double> layer_rope_base;
  PositionIdRule position_ids = PositionIdRule::kFromZero;
  int64_t padding_idx = 0;  // for kAfterPadding
  // Key and value heads (grouped-query attention): query head j reads
  // key/value head j / (num_heads / num_kv_heads). 0: num_heads.
  int64_t num_kv_heads = 0;
  // Queries and keys go through a per-head RMSNorm (gain [head_dim]) before
  // the rotary codes (Qwen3).
  bool qk_norm = false;
  // Token i attends to the tokens at and before it only (decoder-style
  // embedders): the order is seen even without positions.
  bool causal = false;
  // With attention_bias: whether the output projection has one too (Qwen2
  // biases q, k and v only).
  bool attention_out_bias = true;
  // Pre-norm layers also normalize the attention and feed-forward outputs
  // before each residual sum (Gemma's norm3 and norm4).
  bool sandwich_norm = false;
  // The scores are divided by sqrt(score_dim) (Gemma's
  // query_pre_attn_scalar); 0: the head width.
  int64_t score_dim = 0;
  // Per layer rotary scaling (rope only); empty: positional.rope_scaling
  // everywhere.
  std::vector<RopeScaling> layer_rope_scaling;
};

struct ModelConfig {
  int64_t vocab_size = 10000;
  int64_t d_model = 512;
  int64_t num_heads = 8;
  int64_t num_layers = 4;
  int64_t d_ff = 2048;
  Activation activation = Activation::kRelu;
  bool norm_first = false;  // pre-norm when true (adds a final LayerNorm)
  double layer_norm_eps = 1e-5;
  // Size of the learned position table; for other schemes, informational
  // (they extrapolate to any length up to max_input_tokens).
  int64_t max_positions = 512;
  // Hard limit on tokens per input, for every scheme.
  int64_t max_input_tokens = 2048;
  Pooling pooling = Pooling::kMean;
  bool normalize = false;        // default L2 normalization of pooled output
  bool embedding_scale = false;  // multiply token embeddings by sqrt(d_model)
  PositionalConfig positional;
  ArchOptions arch;

  int64_t head_dim() const {
    return arch.head_dim > 0 ? arch.head_dim : d_model / num_heads;
  }
  // Width of the concatenated heads (d_model unless head_dim is set).
  int64_t attention_dim() const { return head_dim() * num_heads; }
  int64_t kv_heads() const {
    return arch.num_kv_heads > 0 ? arch.num_kv_heads : num_heads;
  }
  // Width of the concatenated key (or value) heads.
  int64_t kv_dim() const { return head_dim() * kv_heads(); }
  // The first default position id (padding_idx + 1 for kAfterPadding).
  int64_t first_position() const {
    return arch.position_ids == PositionIdRule::kAfterPadding
               ? arch.padding_idx + 1
               : 0;
  }
  // What the scheme's traits say (positional/traits.h):
  // True when inputs longer than max_positions cannot be represented (a
  // learned table bounds them).
  bool rejects_beyond_max_positions() const;
  // The scores are divided by sqrt(head_dim x this): 1, or for disentangled
  // attention 1 + the number of position terms (DeBERTa's scale_factor).
  int64_t score_scale_factor() const;
  // True when the scheme adds a T5 bucket bias to the attention logits.
  bool has_relative_buckets() const;
  // Rows each query and key meets per position term of a content bias
  // (disentangled attention: 2 x span); 0: the scheme has none.
  int64_t content_bias_rows() const;
  // The longest input this model accepts.
  int64_t max_length() const;
};

// Checks internal consistency (divisibility, ranges, even dims for rotary and
// sinusoidal codes). Returns InvalidArgument naming the offending field.
absl::Status ValidateConfig(const ModelConfig& config);

// Parses a JSON object. Unknown keys are an error (typos must not pass
// silently). Schema (all optional, defaults above):
// {"vocab_size", "d_model", "num_heads", "num_layers", "d_ff",
//  "activation": "relu"|"gelu", "norm_first": bool, "layer_norm_eps",
//  "max_positions", "max_input_tokens", "pooling": "mean"|"first",
//  "normalize": bool, "embedding_scale": bool, "causal": bool,
//  "num_kv_heads" (0: num_heads),
//  "layer_window": [per layer: attend to keys with |i - j| <= w; 0: all],
//  "positional": {"type": "none"|"sinusoidal"|"learned"|"rope"|"alibi"|
//                         "relative"|"learned_relative",
//                 "base", "layout": "interleaved"|"concat"|"half",
//                 "denominator": "d_model"|"half_minus_one", "offset",
//                 "num_buckets", "max_distance",
//                 "position_buckets", "max_relative_positions",
//                 "absolute"}}
absl::StatusOr<ModelConfig> ParseModelConfig(const std::string& json_text);

std::string SchemeName(SchemeType type);
absl::StatusOr<SchemeType> ParseSchemeName(const std::string& name);
std::string ActivationName(Activation a);
std::string PoolingName(Pooling p);
// "identity", "sigmoid", "softmax".
std::string ScoreActivationName(ScoreActivation a);
absl::StatusOr<Pooling> ParsePoolingName(const std::string& name);
// "float32", "float16", "bfloat16" (and "int8" for a precision): the one
// table of their names.
std::string DtypeName(Dtype dtype);
std::string PrecisionName(Precision precision);
// InvalidArgument "must be float32, float16 or bfloat16, got NAME" for any
// other name (callers prefix the flag or variable that held it).
absl::StatusOr<Dtype> ParseDtypeName(const std::string& name);
// What a model held in `dtype` runs in, quantized to int8 or not.
Precision PrecisionOf(Dtype dtype, bool int8);

}  // namespace encoder::model

#endif  // ENCODER_SERVER_MODEL_CONFIG_H_
