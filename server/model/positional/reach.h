// How far a positional scheme reaches, from its parameters alone
// (docs/positional-encodings.md#extrapolation): the longest input it can
// represent, ALiBi's effective window per head, where T5 buckets saturate,
// and the wavelengths of rotary and sinusoidal frequencies. Plain data;
// each scheme fills its part (SchemeTraits::reach).
#ifndef ENCODER_SERVER_MODEL_POSITIONAL_REACH_H_
#define ENCODER_SERVER_MODEL_POSITIONAL_REACH_H_

#include <cstdint>
#include <string>
#include <vector>

namespace encoder::model {

struct ModelConfig;

// ALiBi's window: the distance d at which the bias -m d scales a weight by
// 1e-3 relative to distance 0, i.e. m d = ln(1000).
inline constexpr double kAlibiNegligibleFactor = 1e-3;

struct SchemeReach {
  // The length the model was trained for: the learned table's rows past the
  // first position id, else max_positions (max_position_embeddings or
  // n_positions of a checkpoint).
  int64_t trained_length = 0;
  // The longest input the scheme can represent; 0: no limit.
  int64_t max_length = 0;
  // alibi: ln(1000) / m_h per head.
  std::vector<double> alibi_windows;
  // relative: the smallest distance that falls in the last (shared) bucket;
  // every distance from there on gets the same bias.
  int64_t bucket_saturation_distance = 0;
  int64_t num_buckets = 0;
  int64_t max_distance = 0;
  // rope: 2 pi base^(2i/d) for i = 0..d/2-1 (d the head width); sinusoidal:
  // 2 pi / w_i of its frequencies. Ascending.
  std::vector<double> wavelengths;
  // rope and sinusoidal: pairs whose wavelength exceeds trained_length,
  // i.e. angles past it were never seen in training.
  int64_t pairs_beyond_trained = 0;
  // Why no position past the model's length is new to it, as a phrase,
  // where its position enters only as a bias of the distance that stops
  // changing with it: ALiBi's linear penalty, relative buckets (or
  // disentangled attention's relative positions) that saturate within the
  // model's length. Empty for every other scheme. The long-input policy
  // auto runs such inputs whole (core/long_input.h).
  std::string distance_only_reason;
  // rope with a scaling that stretches the codes (factor > 1): the length
  // it was scaled to reach, factor x the original context, and what said
  // so as a phrase. The long-input policy auto runs inputs up to it whole.
  int64_t scaled_length = 0;
  std::string scaled_reason;
};

// The reach of `config`'s scheme: the table bound, the scheme's own part
// (its traits), and the pairs past the trained length.
SchemeReach AnalyzeReach(const ModelConfig& config);

// Wavelengths 2 pi / w of angular frequencies, ascending.
std::vector<double> Wavelengths(const std::vector<double>& frequencies);

// The smallest distance d > 0 whose T5 bucket (in either direction) is the
// last one of that direction. Every bucket saturates by max_distance.
int64_t BucketSaturation(int64_t num_buckets, int64_t max_distance);

}  // namespace encoder::model

#endif  // ENCODER_SERVER_MODEL_POSITIONAL_REACH_H_
