// The extrapolation probe against exact math
// (docs/positional-encodings.md#extrapolation). Expected values are
// written out from the published formulas here, never taken from the
// library: ALiBi slopes and windows, T5 bucket saturation, rotary and
// sinusoidal wavelengths, the learned table's limit, and the exact
// behaviour of a position-free model on a periodic input.
#include "server/diagnostics/extrapolation.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

#include "server/model/positional/reach.h"

namespace encoder::diagnostics {
namespace {

using model::ModelConfig;
using model::SchemeType;
using ::testing::HasSubstr;

constexpr double kPi = 3.14159265358979323846;

ModelConfig Config(SchemeType type) {
  ModelConfig c;
  c.vocab_size = 300;
  c.d_model = 32;
  c.num_heads = 4;
  c.num_layers = 2;
  c.d_ff = 64;
  c.max_positions = 24;
  c.max_input_tokens = 200;
  c.positional.type = type;
  return c;
}

std::unique_ptr<model::Encoder> Make(const ModelConfig& c) {
  auto enc = model::Encoder::Create(c, model::Encoder::RandomStateDict(c, 5),
                                    at::kCPU, at::kDouble);
  EXPECT_TRUE(enc.ok()) << enc.status();
  return enc.ok() ? std::move(enc).value() : nullptr;
}

TEST(SchemeReach, AlibiWindowIsLn1000OverTheSlope) {
  // Eight heads: m_h = 2^-h, h = 1..8 (Press et al.).
  ModelConfig c = Config(SchemeType::kAlibi);
  c.num_heads = 8;
  model::SchemeReach r = model::AnalyzeReach(c);
  ASSERT_EQ(r.alibi_windows.size(), 8u);
  for (int h = 1; h <= 8; ++h) {
    EXPECT_NEAR(r.alibi_windows[h - 1], std::log(1000.0) * std::pow(2.0, h),
                1e-9)
        << h;
  }
  EXPECT_EQ(r.max_length, 0);
  // Twelve heads: the eight above, then every other slope of sixteen heads,
  // 2^(-h/2) for h = 1, 3, 5, 7.
  c.num_heads = 12;
  c.d_model = 48;
  r = model::AnalyzeReach(c);
  ASSERT_EQ(r.alibi_windows.size(), 12u);
  for (int h = 1; h <= 4; ++h) {
    EXPECT_NEAR(r.alibi_windows[7 + h],
                std::log(1000.0) * std::pow(2.0, (2 * h - 1) / 2.0), 1e-9);
  }
}

// The first distance d in the last bucket: max_exact + (ln(d / max_exact) /
// ln(max_distance / max_exact)) (half - max_exact) >= half - 1, with half =
// buckets / 2 and max_exact = half / 2 (Raffel et al.; the bidirectional
// bucketing of transformers' T5Attention).
int64_t ClosedFormSaturation(int64_t buckets, int64_t max_distance) {
  const double half = static_cast<double>(buckets / 2);
  const double exact = half / 2;
  return static_cast<int64_t>(
      std::ceil(exact * std::pow(max_distance / exact,
                                 (half - 1 - exact) / (half - exact))));
}

TEST(SchemeReach, T5BucketsSaturateWhereTheLogBranchEnds) {
  EXPECT_EQ(ClosedFormSaturation(32, 128), 91);  // 8 * 16^(7/8) = 90.5
  // (buckets, max_distance) pairs whose boundary is not an integer, so the
  // float32 logarithm cannot move it.
  for (auto [buckets, max_distance] : std::vector<std::pair<int64_t, int64_t>>{
           {32, 128}, {16, 20}, {32, 64}, {64, 256}, {32, 1000}}) {
    ModelConfig c = Config(SchemeType::kRelative);
    c.positional.num_buckets = buckets;
    c.positional.max_distance = max_distance;
    const model::SchemeReach r = model::AnalyzeReach(c);
    EXPECT_EQ(r.bucket_saturation_distance,
              ClosedFormSaturation(buckets, max_distance))
        << buckets << " " << max_distance;
    EXPECT_EQ(r.num_buckets, buckets);
    EXPECT_EQ(r.max_distance, max_distance);
  }
}

TEST(SchemeReach, RotaryWavelengthsFromTheBase) {
  ModelConfig c = Config(SchemeType::kRope);  // head width 8
  c.max_positions = 128;
  const model::SchemeReach r = model::AnalyzeReach(c);
  // 2 pi base^(2i/d), i = 0..3: 2 pi, 20 pi, 200 pi, 2000 pi.
  const std::vector<double> want = {2 * kPi, 20 * kPi, 200 * kPi, 2000 * kPi};
  ASSERT_EQ(r.wavelengths.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_NEAR(r.wavelengths[i] / want[i], 1.0, 1e-12) << i;
  }
  EXPECT_EQ(r.pairs_beyond_trained, 2);  // 628 and 6283 > 128
  EXPECT_EQ(r.trained_length, 128);
  EXPECT_EQ(r.max_length, 0);
  c.positional.base = 100;
  EXPECT_NEAR(model::AnalyzeReach(c).wavelengths.back(),
              2 * kPi * std::pow(100, 0.75), 1e-9);
}

TEST(SchemeReach, SinusoidalWavelengths) {
  ModelConfig c = Config(SchemeType::kSinusoidal);
  c.d_model = 8;
  c.num_heads = 2;
  const model::SchemeReach r = model::AnalyzeReach(c);
  // w_i = 10000^(-2i/8) = 10^-i: wavelengths 2 pi 10^i.
  ASSERT_EQ(r.wavelengths.size(), 4u);
  for (int i = 0; i < 4; ++i) {
    EXPECT_NEAR(r.wavelengths[i] / (2 * kPi * std::pow(10.0, i)), 1.0, 1e-12);
  }
  EXPECT_EQ(r.pairs_beyond_trained, 3);  // 62.8, 628 and 6283 > 24
}

TEST(SchemeReach, LearnedTableIsTheLimit) {
  ModelConfig c = Config(SchemeType::kLearned);
  EXPECT_EQ(model::AnalyzeReach(c).max_length, 24);
  EXPECT_EQ(model::AnalyzeReach(c).trained_length, 24);
  // RoBERTa numbering: ids from padding_idx + 1 = 2, so 66 rows hold 64.
  c.max_positions = 66;
  c.arch.position_ids = model::PositionIdRule::kAfterPadding;
  c.arch.padding_idx = 1;
  EXPECT_EQ(model::AnalyzeReach(c).max_length, 64);
}

TEST(Extrapolation, LearnedTableRefusesPastItsSize) {
  auto enc = Make(Config(SchemeType::kLearned));
  ASSERT_NE(enc, nullptr);
  api::ExtrapolationOptions o;
  o.source = {5, 17, 42};
  o.lengths = {4, 24, 25, 48};
  o.prefix_length = 4;
  auto r = RunExtrapolation(*enc, o);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->points.size(), 4u);
  EXPECT_TRUE(r->points[0].ran);
  EXPECT_TRUE(r->points[1].ran);
  for (int i : {2, 3}) {
    EXPECT_FALSE(r->points[i].ran);
    EXPECT_THAT(r->points[i].skipped_reason, HasSubstr("24 positions"));
    EXPECT_TRUE(r->points[i].entropy.empty());
  }
  EXPECT_EQ(r->reference_length, 4);
}

// DeBERTa's relative terms: without an input table every length runs, and
// the indices stop changing at |i - j| = max_relative_positions - 1 (19:
// bucket(19) = 4 + ceil(ln(19/4) / ln(19/4) * 3) = 7 = span - 1); with a
// table the table's 24 positions are the limit, as for `learned`.
TEST(Extrapolation, DisentangledRunsPastItsLengthWithoutAnInputTable) {
  for (bool absolute : {false, true}) {
    ModelConfig c = Config(SchemeType::kDisentangled);
    c.positional.position_buckets = 8;
    c.positional.max_relative_positions = 20;
    c.positional.absolute_input = absolute;
    auto enc = Make(c);
    ASSERT_NE(enc, nullptr);
    api::ExtrapolationOptions o;
    o.source = {5, 17, 42};
    o.lengths = {4, 24, 48, 96};
    o.prefix_length = 4;
    auto r = RunExtrapolation(*enc, o);
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_EQ(r->points.size(), 4u);
    EXPECT_EQ(r->reach.bucket_saturation_distance, absolute ? 0 : 19);
    EXPECT_EQ(r->reach.max_length, absolute ? 24 : 0);
    for (int i = 0; i < 4; ++i) {
      EXPECT_EQ(r->points[i].ran, !absolute || i < 2) << i;
      if (r->points[i].ran) {
        EXPECT_EQ(r->points[i].entropy.size(), 2u);
      }
    }
  }
}

// Without positions, k copies of a period of n tokens give every token the
// same output as one copy: each query sees every key k times, so its
// attention splits evenly over the copies. Entropy grows by exactly ln k,
// the first token keeps 1/k of its mass, and nothing drifts.
TEST(Extrapolation, PositionFreeModelOnAPeriodicInputIsExact) {
  auto enc = Make(Config(SchemeType::kNone));
  ASSERT_NE(enc, nullptr);
  api::ExtrapolationOptions o;
  o.source = {5, 17, 42, 99, 7, 250, 31};
  o.lengths = {7, 14, 35};
  o.prefix_length = 7;
  auto r = RunExtrapolation(*enc, o);
  ASSERT_TRUE(r.ok()) << r.status();
  const api::LengthPoint& base = r->points[0];
  ASSERT_EQ(base.entropy.size(), 2u);
  for (size_t i = 1; i < r->points.size(); ++i) {
    const api::LengthPoint& p = r->points[i];
    const double k = static_cast<double>(p.length) / 7;
    for (size_t l = 0; l < 2; ++l) {
      EXPECT_NEAR(p.entropy[l], base.entropy[l] + std::log(k), 1e-10);
      EXPECT_NEAR(p.relative_entropy[l],
                  p.entropy[l] / std::log(static_cast<double>(p.length)),
                  1e-12);
      EXPECT_NEAR(p.first_mass[l], base.first_mass[l] / k, 1e-12);
    }
    EXPECT_LT(p.pooled_drift, 1e-12);
    EXPECT_LT(p.prefix_drift, 1e-12);
  }
}

TEST(Extrapolation, StopsBetweenLengthsWhenCancelled) {
  auto enc = Make(Config(SchemeType::kRope));
  ASSERT_NE(enc, nullptr);
  api::ExtrapolationOptions o;
  o.source = {5, 6};
  o.lengths = {4, 8, 16};
  int checks = 0;
  o.is_cancelled = [&checks] { return ++checks > 1; };
  auto r = RunExtrapolation(*enc, o);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kCancelled);
  EXPECT_THAT(r.status().message(), HasSubstr("before length 8"));
  EXPECT_EQ(checks, 2);
}

TEST(Extrapolation, BadGridsAreInvalidArgument) {
  auto enc = Make(Config(SchemeType::kRope));
  ASSERT_NE(enc, nullptr);
  api::ExtrapolationOptions o;
  o.source = {5, 6};
  o.lengths = {8, 8};
  EXPECT_THAT(RunExtrapolation(*enc, o).status().message(),
              HasSubstr("strictly increasing"));
  o.lengths = {8, 16};
  o.prefix_length = 9;
  EXPECT_THAT(RunExtrapolation(*enc, o).status().message(),
              HasSubstr("prefix length"));
  o.prefix_length = 1;
  o.source.clear();
  EXPECT_EQ(RunExtrapolation(*enc, o).status().code(),
            absl::StatusCode::kInvalidArgument);
  o.source = {5};
  o.lengths.assign(api::kMaxExtrapolationLengths + 1, 0);
  for (size_t i = 0; i < o.lengths.size(); ++i) o.lengths[i] = i + 1;
  EXPECT_THAT(RunExtrapolation(*enc, o).status().message(),
              HasSubstr("lengths"));
}

}  // namespace
}  // namespace encoder::diagnostics
