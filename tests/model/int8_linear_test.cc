#include "server/model/kernels/int8_linear.h"

#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <utility>

#include "server/model/kernels/cpu_features.h"

namespace encoder::model {
namespace {

double RelativeError(const at::Tensor& got, const at::Tensor& want) {
  return ((got - want).norm() / want.norm()).item<double>();
}

// What the layer guarantees between rows computed alone and the same rows
// in a batch (int8_linear.h): the same floats for the direct product on
// every CPU, and for the dynamic one where the CPU has no AMX; within
// kDynamicBatchUlps ulps of the largest |value| of the batched rows for
// the dynamic product with AMX. Returns the largest difference allowed.
double AllowedBatchGap(const Int8Linear& q, const at::Tensor& batched) {
  if (q.direct() || !DetectCpuFeatures().amx_int8) return 0.0;
  const float top = batched.abs().max().item<float>();
  return Int8Linear::kDynamicBatchUlps *
         static_cast<double>(std::nextafter(top, INFINITY) - top);
}

// The largest |alone - batched|, checked against AllowedBatchGap.
::testing::AssertionResult SameAsBatched(const Int8Linear& q,
                                         const at::Tensor& alone,
                                         const at::Tensor& batched) {
  const double gap = (alone - batched).abs().max().item<double>();
  const double allowed = AllowedBatchGap(q, batched);
  if (gap <= allowed) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "alone and batched differ by " << gap << ", allowed " << allowed
         << (q.direct() ? " (direct product)" : " (dynamic product)");
}

struct Layer {
  at::Tensor weight, bias;
};

Layer RandomLayer(int64_t out, int64_t in, uint64_t seed) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  return {at::normal(0.0, 0.02, {out, in}, gen),
          at::normal(0.0, 0.1, {out}, gen)};
}

// Each row of w rounded to `levels` levels of its max |w|, as a float.
at::Tensor QuantizedWeight(const at::Tensor& w, double levels) {
  const at::Tensor ws = w.abs().amax(1, true) / levels;
  return (w / ws).round().clamp(-levels, levels) * ws;
}

// The arithmetic written out, with the layer's bit split: weights rounded
// to L levels of their row's max |w| (L = 127, or 63); each activation row
// moved by its centre c = (max + min) / 2, divided by its half range h,
// rounded to the A + 1 levels of [-1, 1] (A = 255, or 127; an asymmetric
// unsigned quantizer: scale 2/A, zero point at half the range) and mapped
// back (q h + c); then an exact product. The kernel may round the zero point
// and ties otherwise, hence a tolerance of a fraction of one level's effect. A
// kernel whose 16-bit pair sums saturated would miss it by far more (8%
// measured). With `keep` (input channels kept in float32), those channels'
// product is exact and they are zeros in both int8 operands. With
// `row_outliers` d, each row's d largest |x| among the rest multiply the
// rounded weights exactly and are zeros in the row's int8 operand.
at::Tensor Reference(at::Tensor x, const Layer& l, const Int8Linear& q,
                     const at::Tensor& keep = at::Tensor(),
                     int64_t row_outliers = 0) {
  const double wl = q.weight_levels();
  at::Tensor w = l.weight;
  at::Tensor exact_part = at::zeros({x.size(0), w.size(0)}, at::kDouble);
  if (keep.defined()) {
    exact_part = at::mm(x.index_select(1, keep).to(at::kDouble),
                        w.index_select(1, keep).to(at::kDouble).t());
    x = x.index_fill(1, keep, 0.0);
    w = w.index_fill(1, keep, 0.0);
  }
  const at::Tensor wq = QuantizedWeight(w, wl);
  if (row_outliers > 0) {
    const at::Tensor idx = std::get<1>(x.abs().topk(row_outliers, 1));
    const at::Tensor vals = x.gather(1, idx).to(at::kDouble);
    // [rows, d, out]: each outlier's column of the rounded weights.
    const at::Tensor cols =
        wq.t().to(at::kDouble).index_select(0, idx.flatten());
    exact_part +=
        (vals.unsqueeze(2) * cols.view({x.size(0), row_outliers, wq.size(0)}))
            .sum(1);
    x = x.scatter(1, idx, 0.0);
  }
  at::Tensor hi = x.amax(1, true), lo = x.amin(1, true);
  at::Tensor c = (hi + lo) / 2, h = (hi - lo) / 2;
  const double levels = q.activation_levels();
  const double step = 2.0 / levels, zero = levels / 2;
  at::Tensor xq =
      (((x - c) / h / step).round() + zero).clamp(0, levels).sub(zero) * step;
  return (at::linear((xq * h + c).to(at::kDouble), wq.to(at::kDouble),
                     l.bias.to(at::kDouble)) +
          exact_part)
      .to(at::kFloat);
}

TEST(Int8Linear, MatchesTheQuantizationArithmetic) {
  if (!Int8Supported()) GTEST_SKIP() << "no oneDNN quantized engine";
  const Layer l = RandomLayer(96, 64, 3);
  auto q = Int8Linear::Create(l.weight, l.bias);
  ASSERT_TRUE(q.ok()) << q.status();
  auto gen = at::make_generator<at::CPUGeneratorImpl>(9);
  // Rows of very different magnitudes (a shared scale would crush the
  // small ones), every other one moved off zero by twice its spread, so
  // the row's centre matters.
  const at::Tensor spread = at::pow(10.0, at::arange(-3, 3, 0.5)).view({12, 1});
  const at::Tensor offset = at::arange(12).remainder(2).view({12, 1}) * 2.0;
  at::Tensor x = (at::randn({12, 64}, gen) + offset) * spread;
  const at::Tensor got = q->Forward(x);
  const at::Tensor want = Reference(x, l, *q);
  for (int64_t r = 0; r < 12; ++r) {
    EXPECT_LT(RelativeError(got[r], want[r]), 5e-3) << "row " << r;
  }
  // And the int8 result stays near the float32 layer it replaces.
  const at::Tensor exact = at::linear(x, l.weight, l.bias);
  for (int64_t r = 0; r < 12; ++r) {
    EXPECT_LT(RelativeError(got[r], exact[r]), 0.03) << "row " << r;
  }
}

// Both products: LibTorch's dynamic linear on the normalized rows, and
// (with native int8 dot products and oneDNN's static int8 linear) the bytes
// written by the layer's own pass. Each follows the arithmetic written out,
// with and without float32 channels and row outliers, and a row's result
// does not depend on its batch in either.
TEST(Int8Linear, BothProductsFollowTheArithmetic) {
  if (!Int8Supported()) GTEST_SKIP() << "no oneDNN quantized engine";
  const Layer l = RandomLayer(80, 48, 21);
  auto gen = at::make_generator<at::CPUGeneratorImpl>(23);
  const at::Tensor spread =
      at::pow(10.0, at::arange(-2, 2, 0.25)).view({16, 1});
  at::Tensor x = (at::randn({16, 48}, gen) + 1.5) * spread;
  x.select(1, 9) *= 30.0;  // a channel that runs high
  int direct_layers = 0;
  for (const bool allow_direct : {false, true}) {
    for (const auto& [keep, d] :
         {std::pair{at::Tensor(), int64_t{0}},
          std::pair{at::tensor({9}, at::kLong), int64_t{0}},
          std::pair{at::tensor({9}, at::kLong), int64_t{2}}}) {
      auto q = Int8Linear::Create(l.weight, l.bias, keep, d, allow_direct);
      ASSERT_TRUE(q.ok()) << q.status();
      if (!allow_direct) EXPECT_FALSE(q->direct());
      if (q->direct()) {
        ++direct_layers;
        EXPECT_TRUE(DetectCpuFeatures().native_int8());
      }
      const at::Tensor got = q->Forward(x);
      const at::Tensor want = Reference(x, l, *q, keep, d);
      for (int64_t r = 0; r < 16; ++r) {
        EXPECT_LT(RelativeError(got[r], want[r]), 5e-3)
            << "row " << r << (q->direct() ? ", direct" : ", dynamic") << ", "
            << d << " row outliers";
        EXPECT_TRUE(SameAsBatched(*q, q->Forward(x.narrow(0, r, 1)),
                                  got.narrow(0, r, 1)))
            << "row " << r << (q->direct() ? ", direct" : ", dynamic") << ", "
            << d << " row outliers, alone";
      }
    }
  }
  std::printf("layers on the direct product: %d of 3 allowed\n", direct_layers);
}

TEST(Int8Linear, FloatChannelsKeepAnOutlierFromSettingTheRange) {
  if (!Int8Supported()) GTEST_SKIP() << "no oneDNN quantized engine";
  const Layer l = RandomLayer(40, 64, 4);
  auto gen = at::make_generator<at::CPUGeneratorImpl>(13);
  at::Tensor x = at::randn({16, 64}, gen);
  x.select(1, 5).mul_(200.0);  // one channel far above the rest
  const at::Tensor keep = at::tensor({5}, at::kLong);
  auto plain = Int8Linear::Create(l.weight, l.bias);
  // Repeats and any order are accepted; the channels come back sorted.
  auto kept =
      Int8Linear::Create(l.weight, l.bias, at::tensor({5, 5}, at::kLong));
  ASSERT_TRUE(plain.ok() && kept.ok());
  EXPECT_FALSE(plain->float_channels().defined());
  EXPECT_TRUE(at::equal(kept->float_channels(), keep));
  const at::Tensor got = kept->Forward(x);
  const at::Tensor want = Reference(x, l, *kept, keep);
  for (int64_t r = 0; r < 16; ++r) {
    EXPECT_LT(RelativeError(got[r], want[r]), 5e-3) << "row " << r;
  }
  // The other 63 channels' part of the product, which the outlier's range
  // crushes to a few levels when it is quantized with them.
  const at::Tensor rest =
      at::linear(x.index_fill(1, keep, 0.0), l.weight, at::Tensor());
  const at::Tensor outlier = at::linear(x, l.weight, l.bias) - rest;
  const double with_float = RelativeError(got - outlier, rest);
  const double all_int8 = RelativeError(plain->Forward(x) - outlier, rest);
  EXPECT_LT(with_float, 0.03);
  EXPECT_GT(all_int8, 4 * with_float);
  std::printf("the rest's relative error: %.4f kept in float32, %.4f not\n",
              with_float, all_int8);
  // Channels outside [0, in) or of the wrong type are refused.
  for (const at::Tensor& bad :
       {at::tensor({64}, at::kLong), at::tensor({-1}, at::kLong),
        at::tensor({1}, at::kInt), at::zeros({1, 1}, at::kLong)}) {
    EXPECT_EQ(Int8Linear::Create(l.weight, l.bias, bad).status().code(),
              absl::StatusCode::kInvalidArgument);
  }
}

TEST(Int8Linear, RowOutliersFollowEachTokensLargeValues) {
  if (!Int8Supported()) GTEST_SKIP() << "no oneDNN quantized engine";
  const Layer l = RandomLayer(40, 64, 6);
  auto gen = at::make_generator<at::CPUGeneratorImpl>(17);
  at::Tensor x = at::randn({16, 64}, gen);
  // Each row's one loud value in a channel of its own, as after a GELU:
  // no fixed channel catches them all.
  const at::Tensor loud = (at::arange(16) * 5).remainder(64);
  for (int64_t r = 0; r < 16; ++r) {
    x[r][loud[r].item<int64_t>()] = r % 2 == 0 ? 30.0 : -30.0;
  }
  auto plain = Int8Linear::Create(l.weight, l.bias);
  auto followed = Int8Linear::Create(l.weight, l.bias, at::Tensor(), 2);
  ASSERT_TRUE(plain.ok() && followed.ok());
  EXPECT_EQ(plain->row_outliers(), 0);
  EXPECT_EQ(followed->row_outliers(), 2);
  const at::Tensor got = followed->Forward(x);
  const at::Tensor want = Reference(x, l, *followed, at::Tensor(), 2);
  for (int64_t r = 0; r < 16; ++r) {
    EXPECT_LT(RelativeError(got[r], want[r]), 5e-3) << "row " << r;
  }
  // Against float32, and against each layer's own rounded weights with
  // float32 activations: the activations' rounding, which the loud values
  // no longer stretch over the rest of their row. Where the CPU has native
  // int8 dot products, both layers keep 8-bit weights and the weights'
  // rounding is most of what is left against float32, so the second
  // comparison is the one that shows the effect on every CPU: about 7x
  // there, about 4x without them, where the layer with row outliers gives
  // up an activation bit (the same arithmetic in PyTorch, six seeds:
  // 7.1-8.3x and 3.8-4.4x).
  const at::Tensor exact = at::linear(x, l.weight, l.bias);
  const double with_outliers = RelativeError(got, exact);
  const double all_int8 = RelativeError(plain->Forward(x), exact);
  EXPECT_LT(with_outliers, 0.01);
  EXPECT_GT(all_int8, with_outliers);
  auto activation_error = [&](const Int8Linear& q, const at::Tensor& y) {
    return RelativeError(
        y, at::linear(x, QuantizedWeight(l.weight, q.weight_levels()), l.bias));
  };
  const double act_with = activation_error(*followed, got);
  const double act_all = activation_error(*plain, plain->Forward(x));
  EXPECT_GT(act_all, 2.5 * act_with);
  std::printf(
      "relative error to float32: %.4f with row outliers, %.4f not; "
      "to float32 activations: %.4f, %.4f\n",
      with_outliers, all_int8, act_with, act_all);
  // Together with fixed channels, and a count outside [0, in] refused.
  auto both =
      Int8Linear::Create(l.weight, l.bias, at::tensor({7}, at::kLong), 3);
  ASSERT_TRUE(both.ok()) << both.status();
  const at::Tensor want_both =
      Reference(x, l, *both, at::tensor({7}, at::kLong), 3);
  const at::Tensor got_both = both->Forward(x);
  for (int64_t r = 0; r < 16; ++r) {
    EXPECT_LT(RelativeError(got_both[r], want_both[r]), 5e-3) << "row " << r;
  }
  // More than 16 per row (the selection's first pass then gives no floor).
  auto many = Int8Linear::Create(l.weight, l.bias, at::Tensor(), 20);
  ASSERT_TRUE(many.ok()) << many.status();
  const at::Tensor want_many = Reference(x, l, *many, at::Tensor(), 20);
  const at::Tensor got_many = many->Forward(x);
  for (int64_t r = 0; r < 16; ++r) {
    EXPECT_LT(RelativeError(got_many[r], want_many[r]), 5e-3) << "row " << r;
  }
  EXPECT_TRUE(Int8Linear::Create(l.weight, l.bias, at::Tensor(), 64).ok());
  for (int64_t bad : {int64_t{-1}, int64_t{65}}) {
    EXPECT_EQ(
        Int8Linear::Create(l.weight, l.bias, at::Tensor(), bad).status().code(),
        absl::StatusCode::kInvalidArgument);
  }
}

TEST(Int8Linear, TheBitSplitFollowsTheCpuAndTheFloatChannels) {
  if (!Int8Supported()) GTEST_SKIP() << "no oneDNN quantized engine";
  const Layer l = RandomLayer(8, 16, 2);
  auto all = Int8Linear::Create(l.weight, l.bias);
  auto kept = Int8Linear::Create(l.weight, l.bias, at::tensor({1}, at::kLong));
  auto outliers = Int8Linear::Create(l.weight, l.bias, at::Tensor(), 1);
  ASSERT_TRUE(all.ok() && kept.ok() && outliers.ok());
  // Row outliers tighten the ranges as fixed channels do.
  EXPECT_EQ(outliers->weight_levels(), kept->weight_levels());
  EXPECT_EQ(outliers->activation_levels(), kept->activation_levels());
  if (DetectCpuFeatures().native_int8()) {
    EXPECT_EQ(all->weight_levels(), 127);
    EXPECT_EQ(all->activation_levels(), 255);
    EXPECT_EQ(kept->weight_levels(), 127);
    EXPECT_EQ(kept->activation_levels(), 255);
  } else {
    // One operand gives up a bit, so that pair sums stay in 16 bits.
    EXPECT_EQ(all->weight_levels(), 63);
    EXPECT_EQ(all->activation_levels(), 255);
    EXPECT_EQ(kept->weight_levels(), 127);
    EXPECT_EQ(kept->activation_levels(), 127);
  }
}

TEST(Int8Linear, ARowsResultDoesNotDependOnItsBatch) {
  if (!Int8Supported()) GTEST_SKIP() << "no oneDNN quantized engine";
  const Layer l = RandomLayer(48, 32, 5);
  auto gen = at::make_generator<at::CPUGeneratorImpl>(11);
  at::Tensor batch = at::randn({2, 7, 32}, gen);
  batch[1] *= 50.0;  // a loud neighbour
  // With and without channels kept in float32, and with row outliers.
  for (const auto& [keep, d] :
       {std::pair{at::Tensor(), int64_t{0}},
        std::pair{at::tensor({3, 17}, at::kLong), int64_t{0}},
        std::pair{at::tensor({3, 17}, at::kLong), int64_t{4}}}) {
    auto q = Int8Linear::Create(l.weight, l.bias, keep, d);
    ASSERT_TRUE(q.ok()) << q.status();
    const at::Tensor together = q->Forward(batch);
    ASSERT_EQ(together.sizes(), (at::IntArrayRef{2, 7, 48}));
    for (int64_t s = 0; s < 2; ++s) {
      for (const at::Tensor& alone :
           {q->Forward(batch[s]), q->Forward(batch[s].narrow(0, 2, 1))}) {
        const at::Tensor same =
            alone.size(0) == 7 ? together[s] : together[s].narrow(0, 2, 1);
        EXPECT_TRUE(SameAsBatched(*q, alone, same))
            << "sequence " << s << ", " << alone.size(0) << " rows, "
            << (keep.defined() ? "float channels" : "all int8") << ", " << d
            << " row outliers";
      }
    }
    // Enough rows for several of the final pass's row tiles and threads'
    // ranges, the last tile partial: each row as it comes out alone.
    at::Tensor many = at::randn({53, 32}, gen);
    many.narrow(0, 15, 3) *= 50.0;
    const at::Tensor all = q->Forward(many);
    for (int64_t r = 0; r < many.size(0); ++r) {
      EXPECT_TRUE(SameAsBatched(*q, q->Forward(many.narrow(0, r, 1)),
                                all.narrow(0, r, 1)))
          << "row " << r << " of 53, " << d << " row outliers";
    }
  }
}

// More rows than one of Forward's blocks (kChunkRows), the last block
// partial, and more outputs than one of the final pass's vector blocks of
// 64, the last partial: each row as it comes out alone, and as the
// arithmetic written out.
TEST(Int8Linear, BlocksOfRowsChangeNoValue) {
  if (!Int8Supported()) GTEST_SKIP() << "no oneDNN quantized engine";
  const Layer l = RandomLayer(136, 40, 7);
  auto gen = at::make_generator<at::CPUGeneratorImpl>(13);
  const int64_t n = 2 * Int8Linear::kChunkRows + 37;
  at::Tensor x = at::randn({n, 40}, gen);
  x.narrow(0, Int8Linear::kChunkRows - 2, 4) *= 50.0;  // across a boundary
  for (const auto& [keep, d] :
       {std::pair{at::Tensor(), int64_t{0}},
        std::pair{at::tensor({5, 31}, at::kLong), int64_t{3}}}) {
    auto q = Int8Linear::Create(l.weight, l.bias, keep, d);
    ASSERT_TRUE(q.ok()) << q.status();
    const at::Tensor want = Reference(x, l, *q, keep, d);
    // One thread: blocks in turn; two: one parallel region, a share of the
    // rows each (both split mid-block and at a block's end).
    const int threads_before = at::get_num_threads();
    for (const int threads : {1, 2}) {
      at::set_num_threads(threads);
      const at::Tensor all = q->Forward(x.view({1, n, 40}));
      const at::Tensor part = q->Forward(x.narrow(0, 0, 2 * 200));
      at::set_num_threads(threads_before);
      ASSERT_EQ(all.sizes(), (at::IntArrayRef{1, n, 136}));
      EXPECT_TRUE(SameAsBatched(*q, part, all[0].narrow(0, 0, 400)))
          << threads << " threads";
      for (int64_t r = 0; r < n; ++r) {
        EXPECT_TRUE(SameAsBatched(*q, q->Forward(x.narrow(0, r, 1)),
                                  all[0].narrow(0, r, 1)))
            << "row " << r << " of " << n << ", " << d << " row outliers, "
            << threads << " threads";
        EXPECT_LT(RelativeError(all[0][r], want[r]), 5e-3) << "row " << r;
      }
    }
  }
}

TEST(Int8Linear, FlatRowsAreExactAndShapesAreChecked) {
  if (!Int8Supported()) GTEST_SKIP() << "no oneDNN quantized engine";
  const Layer l = RandomLayer(8, 4, 1);
  auto q = Int8Linear::Create(l.weight, at::Tensor());
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_EQ(q->Forward(at::zeros({3, 4})).abs().max().item<double>(), 0.0);
  // A row of one repeated value has no range: it comes back through its
  // centre, as the quantized weights' product with it.
  const at::Tensor flat = at::full({2, 4}, 0.75);
  const at::Tensor wq = QuantizedWeight(l.weight, q->weight_levels());
  EXPECT_LT(RelativeError(q->Forward(flat), at::linear(flat, wq)), 1e-5);
  EXPECT_FALSE(Int8Linear::Create(at::zeros({8}), at::Tensor()).ok());
  EXPECT_FALSE(Int8Linear::Create(l.weight.to(at::kDouble), at::Tensor()).ok());
}

}  // namespace
}  // namespace encoder::model
