#include "server/model/positional/pe_math.h"

#include <algorithm>
#include <cmath>

namespace encoder::model {

std::vector<double> SinusoidalFrequencies(int64_t d_model, double base,
                                          SinusoidalDenominator denominator) {
  const int64_t half = d_model / 2;
  std::vector<double> w(half);
  for (int64_t i = 0; i < half; ++i) {
    const double exponent =
        denominator == SinusoidalDenominator::kModelDim
            ? 2.0 * static_cast<double>(i) / static_cast<double>(d_model)
            : static_cast<double>(i) / static_cast<double>(half - 1);
    w[i] = std::pow(base, -exponent);
  }
  return w;
}

at::Tensor SinusoidalCode(const at::Tensor& positions, int64_t d_model,
                          const PositionalConfig& config) {
  const auto f64 = positions.options().dtype(at::kDouble);
  const std::vector<double> w = SinusoidalFrequencies(
      d_model, config.base, config.sinusoidal_denominator);
  at::Tensor freqs = at::tensor(w, at::kDouble).to(positions.device());
  at::Tensor p =
      positions.to(f64) + static_cast<double>(config.sinusoidal_offset);
  at::Tensor angles = p.unsqueeze(-1) * freqs;  // [n, D/2]
  at::Tensor s = angles.sin();
  at::Tensor c = angles.cos();
  if (config.sinusoidal_layout == SinusoidalLayout::kConcat) {
    return at::cat({s, c}, -1);
  }
  // Interleaved: dim 2i holds sin, 2i+1 holds cos.
  return at::stack({s, c}, -1).flatten(-2);
}

namespace {

// yarn's dimension (of head_dim) whose wavelength makes `rotations` turns
// over `context` positions.
double YarnCorrectionDim(double rotations, int64_t head_dim, double base,
                         int64_t context) {
  return (static_cast<double>(head_dim) *
          std::log(static_cast<double>(context) / (rotations * 2 * M_PI))) /
         (2 * std::log(base));
}

// NTK-aware dynamic scaling: the base grown for an extent past the
// context, base (factor extent / context - (factor - 1))^(d / (d - 2)).
double DynamicBase(double base, int64_t head_dim, const RopeScaling& scaling,
                   int64_t extent) {
  const double context = static_cast<double>(scaling.original_max_positions);
  const double length = std::max(static_cast<double>(extent), context);
  const double d = static_cast<double>(head_dim);
  return base *
         std::pow(scaling.factor * length / context - (scaling.factor - 1.0),
                  d / (d - 2.0));
}

}  // namespace

std::vector<double> RopeFrequencies(int64_t head_dim, double base,
                                    const RopeScaling& scaling,
                                    int64_t extent) {
  if (scaling.type == RopeScalingType::kDynamic) {
    base = DynamicBase(base, head_dim, scaling, extent);
  }
  const int64_t half = head_dim / 2;
  std::vector<double> theta(half);
  for (int64_t i = 0; i < half; ++i) {
    theta[i] = std::pow(
        base, -2.0 * static_cast<double>(i) / static_cast<double>(head_dim));
  }
  const double factor = scaling.factor;
  switch (scaling.type) {
    case RopeScalingType::kNone:
    case RopeScalingType::kDynamic:
      break;
    case RopeScalingType::kLinear:
    case RopeScalingType::kProportional:
      for (double& t : theta) t /= factor;
      break;
    case RopeScalingType::kLongrope: {
      const std::vector<double>& f = extent > scaling.original_max_positions
                                         ? scaling.long_factor
                                         : scaling.short_factor;
      for (int64_t i = 0; i < half && i < static_cast<int64_t>(f.size()); ++i) {
        theta[i] /= f[i];
      }
      break;
    }
    case RopeScalingType::kYarn: {
      // Dimensions below `low` keep theta (extrapolation), those above
      // `high` take theta / factor (interpolation), a linear ramp between.
      double low = YarnCorrectionDim(scaling.beta_fast, head_dim, base,
                                     scaling.original_max_positions);
      double high = YarnCorrectionDim(scaling.beta_slow, head_dim, base,
                                      scaling.original_max_positions);
      if (scaling.truncate) {
        low = std::floor(low);
        high = std::ceil(high);
      }
      low = std::max(low, 0.0);
      high = std::min(high, static_cast<double>(head_dim - 1));
      if (low == high) high += 0.001;
      for (int64_t i = 0; i < half; ++i) {
        const double ramp =
            std::clamp((static_cast<double>(i) - low) / (high - low), 0.0, 1.0);
        const double keep = 1.0 - ramp;  // the extrapolation share
        theta[i] = theta[i] / factor * (1.0 - keep) + theta[i] * keep;
      }
      break;
    }
    case RopeScalingType::kLlama3: {
      const double context =
          static_cast<double>(scaling.original_max_positions);
      const double low_wavelength = context / scaling.low_freq_factor;
      const double high_wavelength = context / scaling.high_freq_factor;
      for (double& t : theta) {
        const double wavelength = 2 * M_PI / t;
        if (wavelength > low_wavelength) {
          t /= factor;
        } else if (wavelength >= high_wavelength) {
          const double smooth =
              (context / wavelength - scaling.low_freq_factor) /
              (scaling.high_freq_factor - scaling.low_freq_factor);
          t = (1.0 - smooth) * t / factor + smooth * t;
        }
      }
      break;
    }
  }
  return theta;
}

std::pair<at::Tensor, at::Tensor> RopeCosSin(
    const at::Tensor& positions, int64_t head_dim, double base,
    at::ScalarType dtype, const RopeScaling& scaling,
    const std::vector<int64_t>& extents) {
  at::Tensor theta;
  if (scaling.depends_on_length() && !extents.empty()) {
    // One row of frequencies per sequence: [batch, 1, d/2].
    std::vector<double> rows;
    rows.reserve(extents.size() * static_cast<size_t>(head_dim / 2));
    for (int64_t extent : extents) {
      const std::vector<double> row =
          RopeFrequencies(head_dim, base, scaling, extent);
      rows.insert(rows.end(), row.begin(), row.end());
    }
    theta = at::tensor(rows, at::kDouble)
                .view({static_cast<int64_t>(extents.size()), 1, head_dim / 2})
                .to(positions.device());
  } else {
    theta = at::tensor(RopeFrequencies(head_dim, base, scaling), at::kDouble)
                .to(positions.device());
  }
  // [batch, seq, d/2] -> [batch, 1, seq, d/2] to broadcast over heads.
  at::Tensor angles =
      (positions.to(at::kDouble).unsqueeze(-1) * theta).unsqueeze(1);
  if (scaling.attention_factor != 1.0) {
    return {(angles.cos() * scaling.attention_factor).to(dtype),
            (angles.sin() * scaling.attention_factor).to(dtype)};
  }
  return {angles.cos().to(dtype), angles.sin().to(dtype)};
}

at::Tensor RopeRotate(const at::Tensor& x, const at::Tensor& cos,
                      const at::Tensor& sin, RopeLayout layout) {
  const int64_t d = x.size(-1);
  if (layout == RopeLayout::kHalf) {
    at::Tensor x1 = x.narrow(-1, 0, d / 2);
    at::Tensor x2 = x.narrow(-1, d / 2, d / 2);
    return at::cat({x1 * cos - x2 * sin, x1 * sin + x2 * cos}, -1);
  }
  at::Tensor pairs = x.unflatten(-1, {d / 2, 2});
  at::Tensor x1 = pairs.select(-1, 0);
  at::Tensor x2 = pairs.select(-1, 1);
  return at::stack({x1 * cos - x2 * sin, x1 * sin + x2 * cos}, -1).flatten(-2);
}

namespace {

// Geometric slopes for a power-of-two head count n: 2^(-8h/n), h = 1..n.
std::vector<double> PowerOfTwoSlopes(int64_t n) {
  std::vector<double> slopes(n);
  for (int64_t h = 1; h <= n; ++h) {
    slopes[h - 1] =
        std::pow(2.0, -8.0 * static_cast<double>(h) / static_cast<double>(n));
  }
  return slopes;
}

}  // namespace

std::vector<double> AlibiSlopes(int64_t num_heads) {
  if (num_heads <= 0) return {};
  int64_t p = 1;
  while (p * 2 <= num_heads) p *= 2;
  std::vector<double> slopes = PowerOfTwoSlopes(p);
  if (p == num_heads) return slopes;
  const std::vector<double> extra = PowerOfTwoSlopes(2 * p);
  for (int64_t i = 0; i < num_heads - p; ++i) slopes.push_back(extra[2 * i]);
  return slopes;
}

at::Tensor RelativeBuckets(const at::Tensor& relative_positions,
                           int64_t num_buckets, int64_t max_distance) {
  const int64_t half = num_buckets / 2;
  const int64_t exact = half / 2;
  at::Tensor r = relative_positions.to(at::kLong);
  at::Tensor out = (r > 0).to(at::kLong) * half;
  at::Tensor a = r.abs();
  // The logarithmic branch in float32, as the reference computes it; values
  // below `exact` are clamped so the log is finite and then not selected.
  at::Tensor af = a.clamp_min(exact).to(at::kFloat);
  at::Tensor large =
      exact + (at::log(af / static_cast<double>(exact)) /
               std::log(static_cast<double>(max_distance) / exact) *
               static_cast<double>(half - exact))
                  .to(at::kLong);
  large = large.clamp_max(half - 1);
  return out + at::where(a < exact, a, large);
}

at::Tensor DebertaLogBuckets(const at::Tensor& relative_positions,
                             int64_t bucket_size, int64_t max_position) {
  const int64_t mid = bucket_size / 2;
  at::Tensor r = relative_positions.to(at::kLong);
  // |r| below mid is replaced by mid - 1 so the log is finite; those
  // entries keep r itself below.
  at::Tensor a = at::where(r.lt(mid).logical_and(r.gt(-mid)),
                           at::full_like(r, mid - 1), r.abs());
  const at::Tensor denominator = at::log(at::scalar_tensor(
      static_cast<double>(max_position - 1) / static_cast<double>(mid),
      r.options().dtype(at::kFloat)));
  at::Tensor log_pos =
      at::ceil(at::log(a.to(at::kFloat) / static_cast<double>(mid)) /
               denominator * static_cast<double>(mid - 1)) +
      static_cast<double>(mid);
  return at::where(a.le(mid), r.to(at::kFloat), log_pos * r.sign())
      .to(at::kLong);
}

int64_t RelativeBucket(int64_t relative_position, int64_t num_buckets,
                       int64_t max_distance) {
  return RelativeBuckets(at::tensor({relative_position}, at::kLong),
                         num_buckets, max_distance)
      .item<int64_t>();
}

}  // namespace encoder::model
