// AnalyzeReach: the extrapolation limits that follow from a scheme's
// parameters (docs/positional-encodings.md#extrapolation).
#include "server/diagnostics/scheme_reach.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/model/pe_math.h"

namespace encoder::diagnostics {
namespace {

constexpr double kTwoPi = 6.283185307179586;

// Wavelengths 2 pi / w of angular frequencies, ascending.
std::vector<double> Wavelengths(const std::vector<double>& frequencies) {
  std::vector<double> out;
  out.reserve(frequencies.size());
  for (double w : frequencies) out.push_back(kTwoPi / w);
  std::sort(out.begin(), out.end());
  return out;
}

// The smallest distance d > 0 whose bucket (in either direction) is the
// last one of that direction. Every bucket saturates by max_distance.
int64_t BucketSaturation(int64_t num_buckets, int64_t max_distance) {
  const int64_t far = std::max<int64_t>(max_distance, 1) * 4;
  const int64_t last_before =
      model::RelativeBucket(-far, num_buckets, max_distance);
  const int64_t last_after =
      model::RelativeBucket(far, num_buckets, max_distance);
  for (int64_t d = 1; d <= far; ++d) {
    if (model::RelativeBucket(-d, num_buckets, max_distance) == last_before &&
        model::RelativeBucket(d, num_buckets, max_distance) == last_after) {
      return d;
    }
  }
  return far;
}

}  // namespace

SchemeReach AnalyzeReach(const model::ModelConfig& config) {
  const model::PositionalConfig& p = config.positional;
  SchemeReach r;
  r.trained_length = config.max_positions;
  if (config.rejects_beyond_max_positions()) {
    r.trained_length = config.max_positions - config.first_position();
    r.max_length = r.trained_length;
  }
  switch (p.type) {
    case model::SchemeType::kAlibi:
      for (double m : model::AlibiSlopes(config.num_heads)) {
        r.alibi_windows.push_back(-std::log(kAlibiNegligibleFactor) / m);
      }
      r.distance_only_reason = "ALiBi's bias grows linearly with distance";
      break;
    case model::SchemeType::kRelative:
    case model::SchemeType::kLearnedRelative:
      r.num_buckets = p.num_buckets;
      r.max_distance = p.max_distance;
      r.bucket_saturation_distance =
          BucketSaturation(p.num_buckets, p.max_distance);
      // MPNet's also has a learned table at the input, which bounds it.
      if (p.type == model::SchemeType::kRelative) {
        r.distance_only_reason =
            absl::StrCat("relative buckets saturate from distance ",
                         r.bucket_saturation_distance);
      }
      break;
    case model::SchemeType::kDisentangled:
      // idx = clamp(bucket(i - j) + span, 0, 2 span - 1) stops changing
      // once bucket(r) reaches span - 1, at r = max_relative_positions - 1
      // (both with and without log buckets).
      if (!p.absolute_input) {
        r.bucket_saturation_distance = p.max_relative_positions - 1;
        if (r.bucket_saturation_distance < config.max_length()) {
          r.distance_only_reason = absl::StrCat(
              "disentangled attention's relative positions saturate from "
              "distance ",
              r.bucket_saturation_distance);
        }
      }
      break;
    case model::SchemeType::kRope:
      r.wavelengths = Wavelengths(
          model::RopeFrequencies(config.head_dim(), p.base, p.rope_scaling));
      break;
    case model::SchemeType::kSinusoidal:
      r.wavelengths = Wavelengths(model::SinusoidalFrequencies(
          config.d_model, p.base, p.sinusoidal_denominator));
      break;
    default:
      break;
  }
  r.pairs_beyond_trained = std::count_if(
      r.wavelengths.begin(), r.wavelengths.end(),
      [&](double w) { return w > static_cast<double>(r.trained_length); });
  return r;
}

}  // namespace encoder::diagnostics
