#include "server/model/int8_linear.h"

#include <gtest/gtest.h>

#include <cmath>

namespace encoder::model {
namespace {

double RelativeError(const at::Tensor& got, const at::Tensor& want) {
  return ((got - want).norm() / want.norm()).item<double>();
}

struct Layer {
  at::Tensor weight, bias;
};

Layer RandomLayer(int64_t out, int64_t in, uint64_t seed) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  return {at::normal(0.0, 0.02, {out, in}, gen),
          at::normal(0.0, 0.1, {out}, gen)};
}

// The arithmetic written out: weights rounded to L levels of their row's
// max |w| (L = 127, or 63 without VNNI); each activation row divided by
// its max |x| and rounded to the 256 levels of [-1, 1] (an asymmetric
// unsigned quantizer: scale 2/255, zero point at half the range); then an
// exact product. The kernel may round the zero point and ties otherwise,
// hence a tolerance of a fraction of one level's effect. A kernel whose
// 16-bit pair sums saturated would miss it by far more (8% measured).
at::Tensor Reference(const at::Tensor& x, const Layer& l) {
  const double wl = Int8WeightLevels();
  at::Tensor ws = l.weight.abs().amax(1, true) / wl;
  at::Tensor wq = (l.weight / ws).round().clamp(-wl, wl) * ws;
  at::Tensor xs = x.abs().amax(1, true);
  const double levels = 255.0;
  const double step = 2.0 / levels, zero = levels / 2;
  at::Tensor xq =
      ((x / xs / step).round() + zero).clamp(0, levels).sub(zero) * step;
  return at::linear((xq * xs).to(at::kDouble), wq.to(at::kDouble),
                    l.bias.to(at::kDouble))
      .to(at::kFloat);
}

TEST(Int8Linear, MatchesTheQuantizationArithmetic) {
  if (!Int8Supported()) GTEST_SKIP() << "no oneDNN quantized engine";
  const Layer l = RandomLayer(96, 64, 3);
  auto q = Int8Linear::Create(l.weight, l.bias);
  ASSERT_TRUE(q.ok()) << q.status();
  auto gen = at::make_generator<at::CPUGeneratorImpl>(9);
  // Rows of very different magnitudes: a shared scale would crush the
  // small ones.
  at::Tensor x = at::randn({12, 64}, gen) *
                 at::pow(10.0, at::arange(-3, 3, 0.5)).view({12, 1});
  const at::Tensor got = q->Forward(x);
  const at::Tensor want = Reference(x, l);
  for (int64_t r = 0; r < 12; ++r) {
    EXPECT_LT(RelativeError(got[r], want[r]), 5e-3) << "row " << r;
  }
  // And the int8 result stays near the float32 layer it replaces.
  const at::Tensor exact = at::linear(x, l.weight, l.bias);
  for (int64_t r = 0; r < 12; ++r) {
    EXPECT_LT(RelativeError(got[r], exact[r]), 0.03) << "row " << r;
  }
}

TEST(Int8Linear, ARowsResultDoesNotDependOnItsBatch) {
  if (!Int8Supported()) GTEST_SKIP() << "no oneDNN quantized engine";
  const Layer l = RandomLayer(48, 32, 5);
  auto q = Int8Linear::Create(l.weight, l.bias);
  ASSERT_TRUE(q.ok()) << q.status();
  auto gen = at::make_generator<at::CPUGeneratorImpl>(11);
  at::Tensor batch = at::randn({2, 7, 32}, gen);
  batch[1] *= 50.0;  // a loud neighbour
  const at::Tensor together = q->Forward(batch);
  ASSERT_EQ(together.sizes(), (at::IntArrayRef{2, 7, 48}));
  for (int64_t s = 0; s < 2; ++s) {
    const at::Tensor alone = q->Forward(batch[s]);
    EXPECT_EQ((alone - together[s]).abs().max().item<double>(), 0.0)
        << "sequence " << s;
  }
}

TEST(Int8Linear, ZeroRowsStayZeroAndShapesAreChecked) {
  if (!Int8Supported()) GTEST_SKIP() << "no oneDNN quantized engine";
  const Layer l = RandomLayer(8, 4, 1);
  auto q = Int8Linear::Create(l.weight, at::Tensor());
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_EQ(q->Forward(at::zeros({3, 4})).abs().max().item<double>(), 0.0);
  EXPECT_FALSE(Int8Linear::Create(at::zeros({8}), at::Tensor()).ok());
  EXPECT_FALSE(Int8Linear::Create(l.weight.to(at::kDouble), at::Tensor()).ok());
}

}  // namespace
}  // namespace encoder::model
