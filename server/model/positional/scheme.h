// A positional scheme's configuration: which scheme (SchemeType) and the
// parameters of each. Plain data; what each scheme implies is asked of its
// traits (traits.h), never by switching on the type outside
// server/model/positional/.
#ifndef ENCODER_SERVER_MODEL_POSITIONAL_SCHEME_H_
#define ENCODER_SERVER_MODEL_POSITIONAL_SCHEME_H_

#include <cstdint>
#include <vector>

namespace encoder::model {

enum class SchemeType {
  kNone,
  kSinusoidal,
  kLearned,
  kRope,
  kAlibi,
  kRelative,
  // A learned table at the input plus T5 relative buckets on the logits,
  // one bias table shared by every layer (MPNet).
  kLearnedRelative,
  // DeBERTa-v2/v3 disentangled attention: content-to-position and
  // position-to-content scores against relative position embeddings
  // (log-bucketed), projected by each layer; optionally a learned table at
  // the input too.
  kDisentangled
};

enum class SinusoidalLayout { kInterleaved, kConcat };
// Denominator of the frequency exponent: w_i = base^(-2i/D) (kModelDim, the
// Vaswani form) or w_i = base^(-i/(D/2-1)) (kHalfMinusOne, tensor2tensor).
enum class SinusoidalDenominator { kModelDim, kHalfMinusOne };
enum class RopeLayout { kInterleaved, kHalf };

// How a checkpoint scales its rotary frequencies (transformers'
// rope_scaling / rope_parameters, computed as its rope initialization
// functions compute them; docs/positional-encodings.md has the formulas).
// dynamic and longrope depend on the sequence's extent (1 + its largest
// position): served per sequence, so a text's vectors do not depend on
// what it was batched with.
enum class RopeScalingType {
  kNone,          // theta_i = base^(-2i/d)
  kLinear,        // theta_i / factor (position interpolation)
  kYarn,          // a ramp between theta_i / factor and theta_i, and mscale
  kLlama3,        // theta_i / factor past the low-frequency wavelength
  kDynamic,       // NTK-aware: the base grown with the extent past context
  kLongrope,      // theta_i / short or long factor_i, chosen by the extent
  kProportional,  // theta_i / factor (transformers' "proportional")
};
struct RopeScaling {
  RopeScalingType type = RopeScalingType::kNone;
  double factor = 1.0;
  // The context the unscaled model was trained on (yarn, llama3,
  // longrope); dynamic: the length past which the base grows
  // (max_position_embeddings).
  int64_t original_max_positions = 0;
  double beta_fast = 32.0, beta_slow = 1.0;  // yarn: the ramp's rotations
  bool truncate = true;  // yarn: the ramp's ends rounded to whole dims
  double low_freq_factor = 1.0, high_freq_factor = 4.0;  // llama3
  // longrope: one divisor per frequency, for extents up to the original
  // context (short) and past it (long).
  std::vector<double> short_factor, long_factor;
  // cos and sin are multiplied by it (yarn's and longrope's attention
  // factor; 1 else).
  double attention_factor = 1.0;
  // Set at load by the model's entry (--rope-scaling, "rope_scaling"),
  // not by the checkpoint's config.json.
  bool overridden = false;

  // Whether the frequencies depend on the sequence's extent.
  bool depends_on_length() const {
    return type == RopeScalingType::kDynamic ||
           type == RopeScalingType::kLongrope;
  }
};
// "none", "linear", "yarn", "llama3", "dynamic", "longrope",
// "proportional".
const char* RopeScalingName(RopeScalingType type);

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
  RopeScaling rope_scaling;  // rope
  // relative and learned_relative (T5 buckets, bidirectional).
  int64_t num_buckets = 32;
  int64_t max_distance = 128;
  // disentangled: relative distances i - j, log-bucketed into
  // position_buckets (0: not bucketed, clamped to max_relative_positions);
  // the embedding table has 2 x span rows, span = position_buckets or
  // max_relative_positions.
  int64_t position_buckets = 256;
  int64_t max_relative_positions = 512;
  // The layer's own query/key projections make the position keys and
  // queries (share_att_key), else pos_key_proj / pos_query_proj per layer.
  bool share_att_key = true;
  bool c2p = true;  // content-to-position term
  bool p2c = true;  // position-to-content term
  // A LayerNorm over the relative embeddings (norm_rel_ebd "layer_norm").
  bool relative_norm = true;
  // Also a learned absolute table at the input (position_biased_input).
  bool absolute_input = false;
  int64_t relative_span() const {
    return position_buckets > 0 ? position_buckets : max_relative_positions;
  }
};

}  // namespace encoder::model

#endif  // ENCODER_SERVER_MODEL_POSITIONAL_SCHEME_H_
