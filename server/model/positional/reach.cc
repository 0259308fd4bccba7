// AnalyzeReach: the extrapolation limits that follow from a scheme's
// parameters (docs/positional-encodings.md#extrapolation).
#include "server/model/positional/reach.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "server/model/config.h"
#include "server/model/positional/pe_math.h"
#include "server/model/positional/traits.h"

namespace encoder::model {
namespace {

constexpr double kTwoPi = 6.283185307179586;

}  // namespace

std::vector<double> Wavelengths(const std::vector<double>& frequencies) {
  std::vector<double> out;
  out.reserve(frequencies.size());
  for (double w : frequencies) out.push_back(kTwoPi / w);
  std::sort(out.begin(), out.end());
  return out;
}

int64_t BucketSaturation(int64_t num_buckets, int64_t max_distance) {
  const int64_t far = std::max<int64_t>(max_distance, 1) * 4;
  const int64_t last_before = RelativeBucket(-far, num_buckets, max_distance);
  const int64_t last_after = RelativeBucket(far, num_buckets, max_distance);
  for (int64_t d = 1; d <= far; ++d) {
    if (RelativeBucket(-d, num_buckets, max_distance) == last_before &&
        RelativeBucket(d, num_buckets, max_distance) == last_after) {
      return d;
    }
  }
  return far;
}

SchemeReach AnalyzeReach(const ModelConfig& config) {
  SchemeReach r;
  r.trained_length = config.max_positions;
  if (config.rejects_beyond_max_positions()) {
    r.trained_length = config.max_positions - config.first_position();
    r.max_length = r.trained_length;
  }
  const SchemeTraits& traits = Traits(config.positional.type);
  if (traits.reach != nullptr) traits.reach(config, &r);
  r.pairs_beyond_trained = std::count_if(
      r.wavelengths.begin(), r.wavelengths.end(),
      [&](double w) { return w > static_cast<double>(r.trained_length); });
  return r;
}

}  // namespace encoder::model
