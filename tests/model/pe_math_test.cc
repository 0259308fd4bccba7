// Every test vector and property of the pure scheme math
// (docs/positional-encodings.md#schemes and #test-vectors).
#include "server/model/positional/pe_math.h"

#include <gtest/gtest.h>

#include <cmath>
#include <utility>
#include <vector>

namespace encoder::model {
namespace {

at::Tensor Code(std::vector<int64_t> positions, int64_t d,
                PositionalConfig pc = {}) {
  return SinusoidalCode(at::tensor(positions, at::kLong), d, pc);
}

void ExpectVectorNear(const at::Tensor& got, const std::vector<double>& want,
                      double tol) {
  ASSERT_EQ(got.numel(), static_cast<int64_t>(want.size()));
  at::Tensor g = got.to(at::kDouble).contiguous();
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_NEAR(g.data_ptr<double>()[i], want[i], tol) << "index " << i;
  }
}

TEST(Sinusoidal, SpecVectorsD8) {
  at::Tensor pe = Code({1, 3}, 8);
  ExpectVectorNear(pe[0],
                   {0.841471, 0.540302, 0.099833, 0.995004, 0.010000, 0.999950,
                    0.001000, 1.000000},
                   1e-6);
  ExpectVectorNear(pe[1],
                   {0.141120, -0.989992, 0.295520, 0.955336, 0.029996, 0.999550,
                    0.003000, 0.999996},
                   1e-6);
}

TEST(Sinusoidal, ShiftIsABlockRotationIndependentOfPosition) {
  const int64_t d = 16;
  const std::vector<double> w =
      SinusoidalFrequencies(d, 10000, SinusoidalDenominator::kModelDim);
  for (int64_t k : {1, 5, 37}) {
    at::Tensor m = at::zeros({d, d}, at::kDouble);
    for (int64_t i = 0; i < d / 2; ++i) {
      const double c = std::cos(k * w[i]), s = std::sin(k * w[i]);
      // (sin, cos) of (p + k) w from (sin, cos) of p w.
      m[2 * i][2 * i] = c;
      m[2 * i][2 * i + 1] = s;
      m[2 * i + 1][2 * i] = -s;
      m[2 * i + 1][2 * i + 1] = c;
    }
    for (int64_t p : {0, 3, 100}) {
      at::Tensor residual = Code({p + k}, d)[0] - at::mv(m, Code({p}, d)[0]);
      EXPECT_LT(residual.abs().max().item<double>(), 1e-12)
          << "k=" << k << " p=" << p;
    }
  }
}

TEST(Sinusoidal, GramDependsOnDistanceOnlyWithSpecValues) {
  const int64_t d = 64;
  at::Tensor pe = Code({0, 1, 2, 5, 10, 50, 60, 61, 62, 65, 70, 110}, d);
  const std::vector<double> want = {32, 30.917, 28.304, 23.504, 21.052, 15.674};
  for (size_t i = 0; i < want.size(); ++i) {
    const double from_zero = at::dot(pe[0], pe[i]).item<double>();
    const double from_sixty = at::dot(pe[6], pe[6 + i]).item<double>();
    EXPECT_NEAR(from_zero, want[i], 1e-3) << "distance index " << i;
    EXPECT_NEAR(from_zero, from_sixty, 1e-9);
    EXPECT_NEAR(at::dot(pe[i], pe[0]).item<double>(), from_zero, 1e-12);
  }
}

TEST(Sinusoidal, VariantsFollowTheirFormulas) {
  PositionalConfig pc;
  pc.sinusoidal_layout = SinusoidalLayout::kConcat;
  pc.sinusoidal_denominator = SinusoidalDenominator::kHalfMinusOne;
  pc.sinusoidal_offset = 2;
  const int64_t d = 8;
  at::Tensor pe = Code({1}, d, pc)[0];
  // p = 1 + offset 2 = 3, w_i = 10000^(-i/3), [sin | cos].
  std::vector<double> want(d);
  for (int i = 0; i < 4; ++i) {
    const double w = std::pow(10000.0, -i / 3.0);
    want[i] = std::sin(3 * w);
    want[4 + i] = std::cos(3 * w);
  }
  ExpectVectorNear(pe, want, 1e-12);
}

at::Tensor Rotate(std::vector<double> x, int64_t p, RopeLayout layout) {
  auto [cos, sin] =
      RopeCosSin(at::tensor({p}, at::kLong).view({1, 1}),
                 static_cast<int64_t>(x.size()), 10000, at::kDouble);
  // x as [batch 1, heads 1, seq 1, d].
  at::Tensor t = at::tensor(x, at::kDouble).view({1, 1, 1, -1});
  return RopeRotate(t, cos, sin, layout).flatten();
}

TEST(Rope, SpecVectors) {
  ExpectVectorNear(Rotate({1, 2, 3, 4}, 1, RopeLayout::kInterleaved),
                   {-1.142640, 1.922076, 2.959851, 4.029800}, 1e-6);
  ExpectVectorNear(Rotate({1, 2, 3, 4}, 1, RopeLayout::kHalf),
                   {-1.984111, 1.959901, 2.462378, 4.019800}, 1e-6);
}

TEST(Rope, ScoresDependOnlyOnOffsetAndNormsArePreserved) {
  at::manual_seed(3);
  std::vector<double> q(16), k(16);
  at::Tensor rq = at::randn({16}, at::kDouble),
             rk = at::randn({16}, at::kDouble);
  for (int i = 0; i < 16; ++i) {
    q[i] = rq[i].item<double>();
    k[i] = rk[i].item<double>();
  }
  for (RopeLayout layout : {RopeLayout::kInterleaved, RopeLayout::kHalf}) {
    for (int64_t delta : {0, 1, 7, 40}) {
      const double base_score =
          at::dot(Rotate(q, 0, layout), Rotate(k, delta, layout))
              .item<double>();
      for (int64_t m : {3, 250, 4000}) {
        const double score =
            at::dot(Rotate(q, m, layout), Rotate(k, m + delta, layout))
                .item<double>();
        EXPECT_NEAR(score, base_score, 1e-9) << "m=" << m << " delta=" << delta;
      }
    }
    at::Tensor r = Rotate(q, 123, layout);
    EXPECT_NEAR(r.norm().item<double>(), rq.norm().item<double>(), 1e-12);
  }
}

// dynamic (NTK-aware): unscaled up to the context, then the base grown to
// base (factor L / C - (factor - 1))^(d / (d - 2)) for an extent L.
TEST(Rope, DynamicGrowsTheBaseOnlyPastTheContext) {
  RopeScaling s;
  s.type = RopeScalingType::kDynamic;
  s.factor = 2.0;
  s.original_max_positions = 16;
  const std::vector<double> plain = RopeFrequencies(8, 10000.0);
  ExpectVectorNear(at::tensor(RopeFrequencies(8, 10000.0, s, 8), at::kDouble),
                   plain, 0);
  ExpectVectorNear(at::tensor(RopeFrequencies(8, 10000.0, s, 16), at::kDouble),
                   plain, 0);
  // L = 40: 2 * 40 / 16 - 1 = 4.
  const double grown = 10000.0 * std::pow(4.0, 8.0 / 6.0);
  std::vector<double> want(4);
  for (int i = 0; i < 4; ++i) want[i] = std::pow(grown, -2.0 * i / 8.0);
  ExpectVectorNear(at::tensor(RopeFrequencies(8, 10000.0, s, 40), at::kDouble),
                   want, 1e-15);
}

// longrope: theta_i / short_factor_i up to the original context,
// theta_i / long_factor_i past it.
TEST(Rope, LongropeDividesByTheShortOrLongFactors) {
  RopeScaling s;
  s.type = RopeScalingType::kLongrope;
  s.original_max_positions = 16;
  s.short_factor = {1.0, 1.5, 2.0, 2.5};
  s.long_factor = {1.0, 3.0, 7.0, 11.0};
  for (int64_t extent : {0, 5, 16, 17, 400}) {
    const std::vector<double>& f = extent > 16 ? s.long_factor : s.short_factor;
    std::vector<double> want(4);
    for (int i = 0; i < 4; ++i) {
      want[i] = 1.0 / (f[i] * std::pow(10000.0, 2.0 * i / 8.0));
    }
    ExpectVectorNear(
        at::tensor(RopeFrequencies(8, 10000.0, s, extent), at::kDouble), want,
        1e-15);
  }
}

// Per-sequence angles: each row of a batch gets its own extent's
// frequencies, the same as that row alone; the attention factor scales
// cos and sin.
TEST(Rope, LengthDependentScalingsAreComputedPerRow) {
  RopeScaling s;
  s.type = RopeScalingType::kDynamic;
  s.factor = 4.0;
  s.original_max_positions = 8;
  s.attention_factor = 1.25;
  at::Tensor positions = at::arange(30, at::kLong).view({1, 30}).repeat({3, 1});
  const std::vector<int64_t> extents = {5, 30, 7};
  auto [cos, sin] = RopeCosSin(positions, 8, 10000.0, at::kDouble, s, extents);
  ASSERT_EQ(cos.sizes(), (std::vector<int64_t>{3, 1, 30, 4}));
  for (int64_t r = 0; r < 3; ++r) {
    const std::vector<double> theta =
        RopeFrequencies(8, 10000.0, s, extents[r]);
    for (int64_t p : {0, 7, 29}) {
      for (int i = 0; i < 4; ++i) {
        EXPECT_NEAR(cos[r][0][p][i].item<double>(),
                    1.25 * std::cos(static_cast<double>(p) * theta[i]), 1e-12);
        EXPECT_NEAR(sin[r][0][p][i].item<double>(),
                    1.25 * std::sin(static_cast<double>(p) * theta[i]), 1e-12);
      }
    }
  }
  // Rows 0 and 2 (extents 5 and 7, within the context) are alike; row 1
  // (30) differs past p = 0.
  EXPECT_GT((cos[1] - cos[0]).abs().max().item<double>(), 1e-3);
  EXPECT_EQ((cos[2] - cos[0]).abs().max().item<double>(), 0.0);
}

TEST(Alibi, SlopesFollowThePaperRule) {
  auto pow2 = [](std::vector<double> e) {
    std::vector<double> v;
    for (double x : e) v.push_back(std::pow(2.0, x));
    return v;
  };
  const std::vector<std::pair<int64_t, std::vector<double>>> cases = {
      {8, pow2({-1, -2, -3, -4, -5, -6, -7, -8})},
      {12, pow2({-1, -2, -3, -4, -5, -6, -7, -8, -0.5, -1.5, -2.5, -3.5})},
      {6, pow2({-2, -4, -6, -8, -1, -3})},
      {16, pow2({-0.5, -1, -1.5, -2, -2.5, -3, -3.5, -4, -4.5, -5, -5.5, -6,
                 -6.5, -7, -7.5, -8})},
  };
  for (const auto& [n, want] : cases) {
    const std::vector<double> got = AlibiSlopes(n);
    ASSERT_EQ(got.size(), want.size()) << "n=" << n;
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_DOUBLE_EQ(got[i], want[i]) << "n=" << n << " head " << i;
    }
  }
}

int64_t T5Expected(int64_t r) {
  // The bucket table for num_buckets 32, max_distance 128
  // (docs/positional-encodings.md#test-vectors).
  const int64_t a = r < 0 ? -r : r;
  int64_t b;
  if (a < 8) {
    b = a;
  } else if (a <= 11) {
    b = 8;
  } else if (a <= 15) {
    b = 9;
  } else if (a <= 22) {
    b = 10;
  } else if (a <= 31) {
    b = 11;
  } else if (a <= 45) {
    b = 12;
  } else if (a <= 63) {
    b = 13;
  } else if (a <= 90) {
    b = 14;
  } else {
    b = 15;
  }
  return r > 0 ? b + 16 : b;
}

TEST(RelativeBucket, MatchesTheSpecTable) {
  for (int64_t r = -300; r <= 300; ++r) {
    EXPECT_EQ(RelativeBucket(r, 32, 128), T5Expected(r)) << "r=" << r;
  }
  EXPECT_EQ(RelativeBucket(0, 32, 128), 0);
  EXPECT_EQ(RelativeBucket(1, 32, 128), 17);
  EXPECT_EQ(RelativeBucket(8, 32, 128), 24);
  EXPECT_EQ(RelativeBucket(64, 32, 128), 30);
  EXPECT_EQ(RelativeBucket(91, 32, 128), 31);
  EXPECT_EQ(RelativeBucket(100000, 32, 128), 31);
}

TEST(RelativeBucket, TensorFormAgreesElementwise) {
  at::Tensor r = at::arange(-150, 151, at::kLong);
  at::Tensor b = RelativeBuckets(r, 32, 128);
  for (int64_t i = 0; i < r.numel(); ++i) {
    EXPECT_EQ(b[i].item<int64_t>(), T5Expected(r[i].item<int64_t>()));
  }
}

// DeBERTa's log buckets, worked by hand from the formula: r itself up to
// mid = bucket_size / 2, then sign(r) (mid + ceil(log(|r| / mid) /
// log((max_position - 1) / mid) (mid - 1))).
TEST(DebertaLogBuckets, FollowTheFormula) {
  const std::vector<std::pair<int64_t, int64_t>> small = {
      // bucket_size 8, max_position 20: mid 4, log(19 / 4) = 1.5581.
      {0, 0},   {3, 3},  {4, 4},   {-4, -4}, {5, 5},  // 3 log(1.25)/1.558: 0.43
      {6, 5},   {7, 6},                               // 0.78, 1.08
      {11, 6},  {12, 7},                              // 1.95, 2.12
      {-7, -6}, {19, 7}, {100, 11}};                  // 3 exactly; 6.20
  const std::vector<std::pair<int64_t, int64_t>> v3 = {
      // bucket_size 256, max_position 512 (DeBERTa-v3): mid 128.
      {128, 128},
      {129, 129},
      {300, 207},
      {511, 255},
      {-511, -255}};
  auto check = [](const std::vector<std::pair<int64_t, int64_t>>& cases,
                  int64_t buckets, int64_t max_position) {
    std::vector<int64_t> r;
    for (const auto& c : cases) r.push_back(c.first);
    const at::Tensor got =
        DebertaLogBuckets(at::tensor(r, at::kLong), buckets, max_position);
    for (size_t i = 0; i < cases.size(); ++i) {
      EXPECT_EQ(got[i].item<int64_t>(), cases[i].second)
          << "r=" << cases[i].first << " buckets " << buckets;
    }
  };
  check(small, 8, 20);
  check(v3, 256, 512);
}

}  // namespace
}  // namespace encoder::model
