#include "server/model/kernels/bf16_attention.h"

#include <gtest/gtest.h>

#include <ATen/Parallel.h>

#include <cmath>
#include <limits>

namespace encoder::model {
namespace {

// softmax(q k^T * scale + bias) v in float64 from the same float32 values,
// as [B, S, H * d].
at::Tensor Reference(const at::Tensor& q, const at::Tensor& k,
                     const at::Tensor& v, const at::Tensor& bias,
                     double scale) {
  at::Tensor s =
      at::matmul(q.to(at::kDouble), k.to(at::kDouble).transpose(-2, -1)) *
      scale;
  if (bias.defined()) s = s + bias.to(at::kDouble);
  const at::Tensor out = at::matmul(at::softmax(s, -1), v.to(at::kDouble));
  return out.transpose(1, 2).reshape({q.size(0), q.size(2), -1});
}

// Largest error over the output's largest magnitude.
double Error(const at::Tensor& got, const at::Tensor& want) {
  return ((got.to(at::kDouble) - want).abs().max() /
          want.abs().max().clamp_min(1e-30))
      .item<double>();
}

// [B, S, H, d] projected rows viewed as [B, H, S, d], as the encoder has
// them: unit stride along d, rows H * d apart.
at::Tensor Heads(int64_t b, int64_t s, int64_t h, int64_t d, at::Generator& gen,
                 double stddev) {
  return at::normal(0.0, stddev, {b, s, h, d}, gen).transpose(1, 2);
}

// Queries, keys and values of b sequences of s positions, h heads of d.
struct Qkv {
  at::Tensor q, k, v;
};
Qkv RandomQkv(int64_t b, int64_t s, int64_t h, int64_t d, uint64_t seed,
              double qk_stddev = 1.0) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  Qkv out;
  out.q = Heads(b, s, h, d, gen, qk_stddev);
  out.k = Heads(b, s, h, d, gen, qk_stddev);
  out.v = Heads(b, s, h, d, gen, 1.0);
  return out;
}

TEST(Bf16Attention, SupportFollowsTheCpuAndTheHeadSize) {
  EXPECT_FALSE(Bf16AttentionSupported(16));
  EXPECT_FALSE(Bf16AttentionSupported(48));
  EXPECT_FALSE(Bf16AttentionSupported(256));
  if (!Bf16AttentionSupported(32)) {
    GTEST_SKIP() << "no AVX-512 BF16 on this CPU";
  }
  EXPECT_TRUE(Bf16AttentionSupported(64));
  EXPECT_TRUE(Bf16AttentionSupported(96));
  EXPECT_TRUE(Bf16AttentionSupported(128));
}

// Every head size, odd and tile-edge lengths, with a padding mask, a
// per-head position bias and none, against float64 softmax attention.
// bfloat16 keeps 8 significant bits, so the error bound is a few of its
// steps (2^-8 = 0.0039), not float32's.
TEST(Bf16Attention, MatchesSoftmaxAttentionForEveryShape) {
  if (!Bf16AttentionSupported(32)) {
    GTEST_SKIP() << "no AVX-512 BF16 on this CPU";
  }
  auto gen = at::make_generator<at::CPUGeneratorImpl>(11);
  struct Case {
    int64_t b, h, s, d;
  };
  for (const Case c :
       {Case{1, 1, 1, 32}, Case{2, 3, 7, 32}, Case{1, 12, 64, 32},
        Case{3, 2, 65, 64}, Case{2, 4, 130, 96}, Case{1, 2, 33, 128},
        Case{2, 12, 200, 32}}) {
    const at::Tensor q = Heads(c.b, c.s, c.h, c.d, gen, 1.0);
    const at::Tensor k = Heads(c.b, c.s, c.h, c.d, gen, 1.0);
    const at::Tensor v = Heads(c.b, c.s, c.h, c.d, gen, 1.0);
    const double scale = 1.0 / std::sqrt(static_cast<double>(c.d));
    // The last sequence ends 3 tokens early (when it has more than 3).
    at::Tensor mask = at::zeros({c.b, 1, 1, c.s});
    if (c.s > 3) {
      mask[c.b - 1]
          .narrow(-1, c.s - 3, 3)
          .fill_(-std::numeric_limits<float>::infinity());
    }
    const at::Tensor position = at::normal(0.0, 2.0, {1, c.h, c.s, c.s}, gen);
    for (const at::Tensor& bias : {at::Tensor(), mask, mask + position}) {
      const at::Tensor got = Bf16Attention(q, k, v, bias, scale);
      ASSERT_EQ(got.sizes(), at::IntArrayRef({c.b, c.s, c.h * c.d}));
      const at::Tensor want = Reference(q, k, v, bias, scale);
      EXPECT_LT(Error(got, want), 0.02)
          << c.b << "x" << c.h << "x" << c.s << "x" << c.d
          << (bias.defined() ? " biased" : "");
      // Masked keys weigh exactly nothing: changing their values changes
      // no output.
      if (bias.defined() && c.s > 3) {
        at::Tensor v2 = v.clone();
        v2[c.b - 1].narrow(1, c.s - 3, 3).fill_(1e6);
        at::Tensor k2 = k.clone();
        k2[c.b - 1].narrow(1, c.s - 3, 3).fill_(-7);
        EXPECT_TRUE(at::equal(Bf16Attention(q, k2, v2, bias, scale), got));
      }
    }
  }
}

// Sharp attention (large scores) is where rounding the scores' inputs
// costs most: still within a few bfloat16 steps of the output's range.
TEST(Bf16Attention, KeepsSharpAttention) {
  if (!Bf16AttentionSupported(32)) {
    GTEST_SKIP() << "no AVX-512 BF16 on this CPU";
  }
  const auto [q, k, v] = RandomQkv(2, 96, 4, 32, 3, /*qk_stddev=*/3.0);
  const at::Tensor got =
      Bf16Attention(q, k, v, at::Tensor(), 1 / std::sqrt(32.0));
  EXPECT_LT(Error(got, Reference(q, k, v, at::Tensor(), 1 / std::sqrt(32.0))),
            0.05);
}

// A row's output depends only on its own sequence: the same floats for a
// sequence alone and in a batch, on one thread and on two.
TEST(Bf16Attention, RowsIndependentOfBatchAndThreads) {
  if (!Bf16AttentionSupported(32)) {
    GTEST_SKIP() << "no AVX-512 BF16 on this CPU";
  }
  const auto [q, k, v] = RandomQkv(5, 77, 12, 32, 7);
  const int before = at::get_num_threads();
  at::set_num_threads(1);
  const at::Tensor one = Bf16Attention(q, k, v, at::Tensor(), 0.2);
  at::set_num_threads(2);
  const at::Tensor two = Bf16Attention(q, k, v, at::Tensor(), 0.2);
  at::set_num_threads(before);
  EXPECT_TRUE(at::equal(one, two));
  for (int64_t i = 0; i < 5; ++i) {
    const at::Tensor alone =
        Bf16Attention(q.narrow(0, i, 1), k.narrow(0, i, 1), v.narrow(0, i, 1),
                      at::Tensor(), 0.2);
    EXPECT_TRUE(at::equal(alone, one.narrow(0, i, 1))) << i;
  }
}

// bfloat16 queries, keys and values (a bfloat16 model's) are read as they
// are: the same floats as their float32 values, which the kernel rounds to
// bfloat16 exactly (every bfloat16 is a float32), for every head size,
// with a bias and with per-sequence lengths.
TEST(Bf16Attention, BFloat16InputsGiveTheFloatsOfTheirValues) {
  if (!Bf16AttentionSupported(32)) {
    GTEST_SKIP() << "no AVX-512 BF16 on this CPU";
  }
  for (int64_t d : {32, 64, 96, 128}) {
    const auto [q, k, v] = RandomQkv(3, 45, 2, d, 20 + d);
    const at::Tensor q16 = q.to(at::kBFloat16), k16 = k.to(at::kBFloat16),
                     v16 = v.to(at::kBFloat16);
    auto gen = at::make_generator<at::CPUGeneratorImpl>(d);
    const at::Tensor bias = at::normal(0.0, 1.0, {1, 2, 45, 45}, gen);
    const double scale = 1.0 / std::sqrt(static_cast<double>(d));
    for (const std::vector<int64_t>& lengths :
         {std::vector<int64_t>{}, std::vector<int64_t>{45, 17, 1}}) {
      const at::Tensor b = lengths.empty() ? bias : at::Tensor();
      const at::Tensor got = Bf16Attention(q16, k16, v16, b, scale, lengths);
      const at::Tensor want =
          Bf16Attention(q16.to(at::kFloat), k16.to(at::kFloat),
                        v16.to(at::kFloat), b, scale, lengths);
      EXPECT_EQ(got.scalar_type(), at::kFloat);
      EXPECT_TRUE(at::equal(got, want)) << "d " << d;
      if (lengths.empty()) {
        EXPECT_LT(Error(got, Reference(q16.to(at::kFloat), k16.to(at::kFloat),
                                       v16.to(at::kFloat), b, scale)),
                  0.02)
            << "d " << d;
      }
    }
  }
  const auto [q, k, v] = RandomQkv(1, 8, 2, 32, 5);
  EXPECT_THROW(Bf16Attention(q.to(at::kBFloat16), k, v, at::Tensor(), 0.2),
               c10::Error);
}

TEST(Bf16Attention, RowWithEveryKeyMaskedIsZero) {
  if (!Bf16AttentionSupported(32)) {
    GTEST_SKIP() << "no AVX-512 BF16 on this CPU";
  }
  const auto [q, k, v] = RandomQkv(1, 5, 2, 32, 9);
  at::Tensor bias = at::zeros({1, 1, 5, 5});
  bias[0][0][2].fill_(-std::numeric_limits<float>::infinity());
  const at::Tensor got = Bf16Attention(q, k, v, bias, 0.2);
  EXPECT_EQ(got[0][2].abs().max().item<float>(), 0.0f);
  EXPECT_TRUE(at::isfinite(got).all().item<bool>());
  EXPECT_GT(got[0][1].abs().max().item<float>(), 0.0f);
}

}  // namespace
}  // namespace encoder::model
