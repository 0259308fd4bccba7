// Model configuration: architecture, positional scheme and limits.
//
// A config is parsed from JSON (see ParseModelConfig for the schema) or built
// in code. All fields have defaults here and nowhere else.
#ifndef ENCODER_SERVER_MODEL_CONFIG_H_
#define ENCODER_SERVER_MODEL_CONFIG_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace encoder::model {

enum class SchemeType {
  kNone,
  kSinusoidal,
  kLearned,
  kRope,
  kAlibi,
  kRelative
};
enum class Activation { kRelu, kGelu };
enum class Pooling { kMean, kFirst };
enum class SinusoidalLayout { kInterleaved, kConcat };
// Denominator of the frequency exponent: w_i = base^(-2i/D) (kModelDim, the
// Vaswani form) or w_i = base^(-i/(D/2-1)) (kHalfMinusOne, tensor2tensor).
enum class SinusoidalDenominator { kModelDim, kHalfMinusOne };
enum class RopeLayout { kInterleaved, kHalf };

struct PositionalConfig {
  SchemeType type = SchemeType::kSinusoidal;
  // sinusoidal and rope: frequency base.
  double base = 10000.0;
  SinusoidalLayout sinusoidal_layout = SinusoidalLayout::kInterleaved;
  SinusoidalDenominator sinusoidal_denominator =
      SinusoidalDenominator::kModelDim;
  // sinusoidal: position of the first token (fairseq uses padding_idx + 1).
  int64_t sinusoidal_offset = 0;
  RopeLayout rope_layout = RopeLayout::kInterleaved;
  // relative (T5 buckets, bidirectional).
  int64_t num_buckets = 32;
  int64_t max_distance = 128;
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

  int64_t head_dim() const { return d_model / num_heads; }
  // True when inputs longer than max_positions cannot be represented.
  bool rejects_beyond_max_positions() const {
    return positional.type == SchemeType::kLearned;
  }
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
//  "normalize": bool, "embedding_scale": bool,
//  "positional": {"type": "none"|"sinusoidal"|"learned"|"rope"|"alibi"|
//                         "relative",
//                 "base", "layout": "interleaved"|"concat"|"half",
//                 "denominator": "d_model"|"half_minus_one", "offset",
//                 "num_buckets", "max_distance"}}
absl::StatusOr<ModelConfig> ParseModelConfig(const std::string& json_text);

std::string SchemeName(SchemeType type);
absl::StatusOr<SchemeType> ParseSchemeName(const std::string& name);
std::string ActivationName(Activation a);
std::string PoolingName(Pooling p);
absl::StatusOr<Pooling> ParsePoolingName(const std::string& name);

}  // namespace encoder::model

#endif  // ENCODER_SERVER_MODEL_CONFIG_H_
