#include "server/model/kernels/packed_linear.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <utility>

#include "absl/strings/match.h"
#include "server/model/encoder.h"
#include "server/model/kernels/cpu_features.h"
#include "server/model/kernels/int8_linear.h"
#include "tests/model/encoder_configs.h"

namespace encoder::model {
namespace {

// The layer computed in float64 from the same float32 values.
at::Tensor Reference(const at::Tensor& x, const at::Tensor& w,
                     const at::Tensor& b) {
  return at::linear(x.to(at::kDouble), w.to(at::kDouble),
                    b.defined() ? b.to(at::kDouble) : at::Tensor());
}

double MaxRelative(const at::Tensor& got, const at::Tensor& want) {
  return ((got.to(at::kDouble) - want).abs().max() /
          want.abs().max().clamp_min(1e-30))
      .item<double>();
}

TEST(PackedLinear, MatchesTheLayerForEveryInputShape) {
  if (!PackedLinearSupported()) GTEST_SKIP() << "no packed oneDNN linear";
  auto gen = at::make_generator<at::CPUGeneratorImpl>(5);
  const at::Tensor w = at::normal(0.0, 0.05, {96, 80}, gen);
  const at::Tensor b = at::normal(0.0, 0.1, {96}, gen);
  auto with_bias = PackedLinear::Create(w, b);
  auto without = PackedLinear::Create(w, at::Tensor());
  // Inputs of more than 4 rows go through the BLAS on the plain weight.
  auto few_rows = PackedLinear::Create(w, b, /*max_rows=*/4);
  ASSERT_TRUE(with_bias.ok()) << with_bias.status();
  ASSERT_TRUE(without.ok()) << without.status();
  ASSERT_TRUE(few_rows.ok()) << few_rows.status();
  EXPECT_EQ(with_bias->out_features(), 96);
  EXPECT_EQ(with_bias->in_features(), 80);
  // One row, a few rows, a batch of sequences, and a transposed
  // (non-contiguous) input.
  const at::Tensor inputs[] = {at::randn({1, 80}, gen), at::randn({7, 80}, gen),
                               at::randn({3, 5, 80}, gen),
                               at::randn({80, 6}, gen).t()};
  for (const at::Tensor& x : inputs) {
    const at::Tensor got = with_bias->Forward(x);
    std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end());
    shape.back() = 96;
    EXPECT_EQ(got.sizes(), at::IntArrayRef(shape));
    EXPECT_EQ(got.scalar_type(), at::kFloat);
    EXPECT_LT(MaxRelative(got, Reference(x, w, b)), 1e-5) << x.sizes();
    const at::Tensor either = few_rows->Forward(x);
    EXPECT_EQ(either.sizes(), at::IntArrayRef(shape));
    EXPECT_LT(MaxRelative(either, Reference(x, w, b)), 1e-5) << x.sizes();
    EXPECT_LT(MaxRelative(without->Forward(x), Reference(x, w, at::Tensor())),
              1e-5)
        << x.sizes();
  }
}

// bfloat16 weights and inputs: the product sums in float32 and rounds each
// output once to bfloat16 (the activation, in the epilogue, before that
// rounding). Against float64 from the same bfloat16 values, every element
// is within one bfloat16 unit of its value (2^-8 of it; rounding alone
// takes at most half) plus 2^-16 of the largest, for the float32 sums.
TEST(PackedLinear, BFloat16RoundsEachOutputOnce) {
  if (!PackedLinearSupported()) GTEST_SKIP() << "no packed oneDNN linear";
  if (!DetectCpuFeatures().native_bf16()) {
    GTEST_SKIP() << "no native bfloat16 on this CPU";
  }
  auto gen = at::make_generator<at::CPUGeneratorImpl>(8);
  const at::Tensor w = at::normal(0.0, 0.05, {96, 80}, gen).to(at::kBFloat16);
  // A float32 bias is taken in the weight's type.
  const at::Tensor b = at::normal(0.0, 0.1, {96}, gen).to(at::kBFloat16);
  auto layer =
      PackedLinear::Create(w, b.to(at::kFloat), PackedLinear::kEveryProduct);
  ASSERT_TRUE(layer.ok()) << layer.status();
  for (int64_t rows : {1, 7, 300}) {
    const at::Tensor x = at::randn({rows, 80}, gen).to(at::kBFloat16);
    const at::Tensor y = Reference(x, w, b);
    const at::Tensor gelu = y * 0.5 * (1 + at::erf(y / std::sqrt(2.0)));
    for (const auto& [got, want, name] :
         {std::tuple(layer->Forward(x), y, "none"),
          std::tuple(layer->Forward(x, Activation::kGelu), gelu, "gelu")}) {
      EXPECT_EQ(got.scalar_type(), at::kBFloat16) << name;
      ASSERT_EQ(got.sizes(), want.sizes()) << name;
      const at::Tensor bound = want.abs() * std::ldexp(1.0, -8) +
                               want.abs().max() * std::ldexp(1.0, -16);
      const at::Tensor over = (got.to(at::kDouble) - want).abs() > bound;
      EXPECT_EQ(over.sum().item<int64_t>(), 0)
          << name << " rows " << rows << ": largest error "
          << (got.to(at::kDouble) - want).abs().max().item<double>();
    }
  }
}

// The activation in the packed kernel's epilogue, against the activation
// in float64 on the float64 product, for each of the ones the encoders use;
// with max_rows 0 and 4 rows, both kernels (the BLAS above 4 rows).
TEST(PackedLinear, AppliesEachActivation) {
  if (!PackedLinearSupported()) GTEST_SKIP() << "no packed oneDNN linear";
  auto gen = at::make_generator<at::CPUGeneratorImpl>(6);
  const at::Tensor w = at::normal(0.0, 0.1, {64, 48}, gen);
  const at::Tensor b = at::normal(0.0, 0.1, {64}, gen);
  auto every = PackedLinear::Create(w, b, PackedLinear::kEveryProduct);
  auto few_rows = PackedLinear::Create(w, b, /*max_rows=*/4);
  ASSERT_TRUE(every.ok()) << every.status();
  ASSERT_TRUE(few_rows.ok()) << few_rows.status();
  const std::pair<Activation, const char*> all[] = {
      {Activation::kRelu, "relu"},
      {Activation::kGelu, "gelu"},
      {Activation::kGeluTanh, "gelu_tanh"},
      {Activation::kSilu, "silu"},
      {Activation::kGeluNew, "gelu_new"},
      {Activation::kGeluFast, "gelu_fast"},
      {Activation::kQuickGelu, "quick_gelu"},
      {Activation::kMish, "mish"}};
  for (const auto& [a, name] : all) {
    for (int64_t rows : {1, 3, 300}) {
      const at::Tensor x = at::randn({rows, 48}, gen);
      const at::Tensor y = Reference(x, w, b);
      at::Tensor want;
      switch (a) {
        case Activation::kRelu:
          want = at::relu(y);
          break;
        case Activation::kGelu:  // x/2 (1 + erf(x / sqrt 2))
          want = y * 0.5 * (1 + at::erf(y / std::sqrt(2.0)));
          break;
        case Activation::kGeluTanh:
        case Activation::kGeluNew:
        case Activation::kGeluFast:
          want =
              y * 0.5 *
              (1 + at::tanh(std::sqrt(2.0 / M_PI) * (y + 0.044715 * y.pow(3))));
          break;
        case Activation::kSilu:
          want = y * at::sigmoid(y);
          break;
        case Activation::kQuickGelu:
          want = y * at::sigmoid(1.702 * y);
          break;
        case Activation::kMish:  // x tanh(log(1 + e^x))
          want = y * at::tanh(at::log1p(at::exp(y)));
          break;
      }
      for (const auto* layer : {&*every, &*few_rows}) {
        const at::Tensor got = layer->Forward(x, a);
        EXPECT_EQ(got.sizes(), y.sizes());
        EXPECT_LT(MaxRelative(got, want), 1e-5)
            << name << " rows " << rows
            << (layer == &*every ? " every product" : " max rows 4");
      }
    }
  }
  // The exact GELU in the epilogue: the same floats as LibTorch's.
  const at::Tensor x = at::randn({37, 48}, gen);
  EXPECT_TRUE(at::allclose(every->Forward(x, Activation::kGelu),
                           at::gelu(every->Forward(x)), 0, 1e-6));
}

// The server's --pack-weights / --packed-max-rows rule.
TEST(PackedLinear, PlanPackingFollowsTheCpu) {
  const PackingPlan wins = PlanPacking("auto", -1, -1, /*packed_wins=*/true);
  EXPECT_TRUE(wins.pack);
  EXPECT_EQ(wins.limits.max_rows, PackedLinear::kEveryProduct);
  const PackingPlan loses = PlanPacking("auto", -1, -1, /*packed_wins=*/false);
  EXPECT_FALSE(loses.pack);
  EXPECT_EQ(loses.limits.max_rows, PackedLinear::kDefaultPackedMaxRows);
  const PackingPlan forced = PlanPacking("true", -1, -1, /*packed_wins=*/false);
  EXPECT_TRUE(forced.pack);
  EXPECT_EQ(forced.limits.max_rows, PackedLinear::kDefaultPackedMaxRows);
  EXPECT_FALSE(PlanPacking("false", -1, -1, /*packed_wins=*/true).pack);
  // int8 models: packed when asked for, not by auto.
  EXPECT_FALSE(wins.pack_int8);
  EXPECT_TRUE(forced.pack_int8);
  EXPECT_FALSE(PlanPacking("false", -1, -1, true).pack_int8);
  // A number given is kept, whatever the CPU.
  EXPECT_EQ(PlanPacking("auto", 64, -1, true).limits.max_rows, 64);
  EXPECT_EQ(PlanPacking("true", 0, -1, false).limits.max_rows,
            PackedLinear::kEveryProduct);
  // Min elements: -1 is the caller's auto value under auto, 0 under true;
  // a number given is kept.
  EXPECT_EQ(PlanPacking("auto", -1, -1, true, 4096).limits.min_elements, 4096);
  EXPECT_EQ(PlanPacking("true", -1, -1, true, 4096).limits.min_elements, 0);
  EXPECT_EQ(PlanPacking("auto", -1, 7, true, 4096).limits.min_elements, 7);
  EXPECT_EQ(PlanPacking("true", -1, 7, true, 4096).limits.min_elements, 7);
  EXPECT_EQ(PlanPacking("auto", 64, 7, true).limits.max_rows, 64);
  EXPECT_EQ(PlanPacking("auto", 64, 7, true).limits.min_elements, 7);
}

// The same rule per dtype, as the server and the forward benchmark apply
// it: each dtype by its own measurement, bfloat16 only where native,
// nothing else packed.
TEST(PackedLinear, PlanPackingForFollowsTheDtype) {
  CpuFeatures avx512;
  avx512.avx2 = avx512.fma = avx512.avx512f = true;
  CpuFeatures amx = avx512;
  amx.avx512_bf16 = amx.amx_bf16 = true;
  const PackingPlan f32 = PlanPackingFor("auto", -1, -1, at::kFloat, avx512);
  EXPECT_TRUE(f32.pack);
  EXPECT_EQ(f32.limits.max_rows, PackedLinear::kEveryProduct);
  EXPECT_FALSE(PlanPackingFor("auto", -1, -1, at::kBFloat16, avx512).pack);
  const PackingPlan bf16 = PlanPackingFor("auto", -1, -1, at::kBFloat16, amx);
  EXPECT_TRUE(bf16.pack);
  EXPECT_EQ(bf16.limits.max_rows, PackedLinear::kEveryProduct);
  // Small float32 weights stay plain under auto; bfloat16 packs them all.
  EXPECT_EQ(f32.limits.min_elements, kDefaultPackedMinElements);
  EXPECT_EQ(bf16.limits.min_elements, 0);
  EXPECT_EQ(
      PlanPackingFor("true", -1, -1, at::kFloat, avx512).limits.min_elements,
      0);
  // Forced: bfloat16 still needs it native; float16 never packs.
  EXPECT_FALSE(PlanPackingFor("true", -1, -1, at::kBFloat16, avx512).pack);
  EXPECT_FALSE(PlanPackingFor("true", -1, -1, at::kBFloat16, avx512).pack_int8);
  EXPECT_TRUE(PlanPackingFor("true", -1, -1, at::kBFloat16, amx).pack);
  EXPECT_FALSE(PlanPackingFor("true", -1, -1, at::kHalf, amx).pack);
  EXPECT_FALSE(PlanPackingFor("false", -1, -1, at::kBFloat16, amx).pack);
  CpuFeatures avx2;
  avx2.avx2 = avx2.fma = true;
  EXPECT_FALSE(PlanPackingFor("auto", -1, -1, at::kFloat, avx2).pack);
  EXPECT_TRUE(PlanPackingFor("true", -1, -1, at::kFloat, avx2).pack);
}

TEST(PackedLinear, RefusesNegativeMaxRows) {
  auto p = PackedLinear::Create(at::ones({4, 4}), at::Tensor(), -1);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), PackedLinearSupported()
                                   ? absl::StatusCode::kInvalidArgument
                                   : absl::StatusCode::kFailedPrecondition);
}

TEST(PackedLinear, RefusesWhatItCannotPack) {
  const at::Tensor half = at::ones({4, 4}, at::kHalf);
  auto p = PackedLinear::Create(half, at::Tensor());
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), PackedLinearSupported()
                                   ? absl::StatusCode::kInvalidArgument
                                   : absl::StatusCode::kFailedPrecondition);
}

std::unique_ptr<Encoder> Make(at::ScalarType dtype = at::kFloat) {
  const ModelConfig c = SmallConfig(SchemeType::kRope);
  std::map<std::string, at::Tensor> state = Encoder::RandomStateDict(c, 7);
  // Random weights come with zero biases; give them values so a packed
  // layer that dropped its bias would show.
  auto gen = at::make_generator<at::CPUGeneratorImpl>(8);
  for (auto& [name, t] : state) {
    if (absl::EndsWith(name, "bias")) t = at::normal(0.0, 0.1, t.sizes(), gen);
  }
  auto enc = Encoder::Create(c, state, at::kCPU, dtype);
  EXPECT_TRUE(enc.ok()) << enc.status();
  return std::move(enc).value();
}

EncoderInput Batch() {
  // Two sequences, the second padded: the packed products see the padded
  // grid and the rows packed past padding alike.
  EncoderInput in;
  in.ids = at::tensor({5, 9, 13, 2, 7, 11, 4, 8, 21, 3, 6, 0}, at::kLong)
               .view({2, 6});
  in.mask = at::ones({2, 6}, at::kBool);
  in.mask.index_put_({1, at::indexing::Slice(3, 6)}, false);
  return in;
}

at::Tensor Tokens(const Encoder& enc, const ForwardOptions& options = {}) {
  auto out = enc.Forward(Batch(), options);
  EXPECT_TRUE(out.ok()) << out.status();
  // Padded rows are unspecified.
  return at::cat({out->tokens[0], out->tokens[1].narrow(0, 0, 3)}, 0);
}

TEST(PackedLinear, PackedEncoderMatchesThePlainOne) {
  if (!PackedLinearSupported()) GTEST_SKIP() << "no packed oneDNN linear";
  auto plain = Make();
  auto packed = Make();
  const int64_t params = plain->parameter_count();
  ASSERT_TRUE(packed->PrepackWeights().ok());
  EXPECT_TRUE(packed->prepacked());
  EXPECT_FALSE(plain->prepacked());
  EXPECT_EQ(packed->parameter_count(), params);
  ASSERT_TRUE(packed->PrepackWeights().ok());  // a second call is a no-op
  for (double skip : {1.0, 0.0}) {             // padded grid; padding skipped
    ForwardOptions o;
    o.skip_padding_min_share = skip;
    const at::Tensor want = Tokens(*plain, o).to(at::kDouble);
    EXPECT_LT(MaxRelative(Tokens(*packed, o), want), 1e-5) << skip;
  }
}

// Every product packed: the plain weights go, the model's parameter count
// and output stay, and int8 can no longer be built from it (but can be
// before).
TEST(PackedLinear, PackingEveryProductReleasesThePlainWeights) {
  if (!PackedLinearSupported()) GTEST_SKIP() << "no packed oneDNN linear";
  for (Activation a : {Activation::kRelu, Activation::kGelu}) {
    ModelConfig c = SmallConfig(SchemeType::kRope);
    c.activation = a;
    std::map<std::string, at::Tensor> state = Encoder::RandomStateDict(c, 7);
    auto plain = Encoder::Create(c, state, at::kCPU, at::kFloat);
    auto packed = Encoder::Create(c, state, at::kCPU, at::kFloat);
    ASSERT_TRUE(plain.ok() && packed.ok());
    // The feed-forward weights are the state dict's tensors, held by it
    // and both models until packing drops the packed model's hold.
    std::vector<long> held;
    for (const auto& [name, t] : state) {
      if (absl::StrContains(name, "linear1.weight"))
        held.push_back(t.use_count());
    }
    ASSERT_EQ(held.size(), 2u);
    ASSERT_TRUE((*packed)->PrepackWeights(PackedLinear::kEveryProduct).ok());
    EXPECT_EQ((*packed)->parameter_count(), (*plain)->parameter_count());
    size_t i = 0;
    for (const auto& [name, t] : state) {
      if (absl::StrContains(name, "linear1.weight")) {
        EXPECT_EQ(t.use_count(), held[i++] - 1) << name;
      }
    }
    for (double skip : {1.0, 0.0}) {
      ForwardOptions o;
      o.skip_padding_min_share = skip;
      EXPECT_LT(
          MaxRelative(Tokens(**packed, o), Tokens(**plain, o).to(at::kDouble)),
          1e-5)
          << skip;
    }
    if (Int8Supported()) {
      const absl::Status s = (*packed)->QuantizeInt8();
      EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
      EXPECT_EQ((*packed)->quantization(), "none");
    }
  }
}

// `packed` is an int8 model with packed float32 weights: its int8 output
// is the plain int8 model's, and a full-precision request runs the packed
// float32 as a float32 model would.
void ExpectInt8BesidePacked(const Encoder& packed) {
  auto plain = Make();
  ASSERT_TRUE(plain->QuantizeInt8().ok());
  EXPECT_TRUE(at::equal(Tokens(packed), Tokens(*plain)));
  ForwardOptions full;
  full.full_precision = true;
  auto reference = Make();
  EXPECT_LT(
      MaxRelative(Tokens(packed, full), Tokens(*reference).to(at::kDouble)),
      1e-5);
}

TEST(PackedLinear, Int8ThenEveryProductPacked) {
  if (!PackedLinearSupported()) GTEST_SKIP() << "no packed oneDNN linear";
  if (!Int8Supported()) GTEST_SKIP() << "no oneDNN quantized engine";
  auto packed = Make();
  ASSERT_TRUE(packed->QuantizeInt8().ok());
  ASSERT_TRUE(packed->PrepackWeights(PackedLinear::kEveryProduct).ok());
  ExpectInt8BesidePacked(*packed);
}

TEST(PackedLinear, Int8BesidePackedWeightsIsTheSame) {
  if (!PackedLinearSupported()) GTEST_SKIP() << "no packed oneDNN linear";
  if (!Int8Supported()) GTEST_SKIP() << "no oneDNN quantized engine";
  auto packed = Make();
  ASSERT_TRUE(packed->PrepackWeights().ok());
  ASSERT_TRUE(packed->QuantizeInt8().ok());
  ExpectInt8BesidePacked(*packed);
}

// A bfloat16 model packs too (where the CPU multiplies bfloat16
// natively: the server packs nowhere else), and its tokens stay as close
// to the float32 model's as the plain bfloat16 model's do: within twice
// that model's largest error (each packed product rounds once, its
// activation before the rounding, where the plain one rounds twice).
TEST(PackedLinear, EncoderPacksBFloat16) {
  if (!PackedLinearSupported()) GTEST_SKIP() << "no packed oneDNN linear";
  if (!DetectCpuFeatures().native_bf16()) {
    GTEST_SKIP() << "no native bfloat16 on this CPU";
  }
  auto plain = Make(at::kBFloat16);
  auto packed = Make(at::kBFloat16);
  ASSERT_TRUE(packed->PrepackWeights(PackedLinear::kEveryProduct).ok());
  EXPECT_TRUE(packed->prepacked());
  const at::Tensor want = Tokens(*Make(at::kFloat)).to(at::kDouble);
  const double plain_error = MaxRelative(Tokens(*plain), want);
  const double packed_error = MaxRelative(Tokens(*packed), want);
  EXPECT_GT(plain_error, 0);
  EXPECT_LE(packed_error, 2 * plain_error)
      << "plain bfloat16 " << plain_error << ", packed " << packed_error;
}

// Weights under min_elements stay plain (SmallConfig: in_proj 3072,
// linear1 and linear2 2048, out_proj 1024 elements per layer): the large
// ones are packed and drop their plain copies, the small ones run through
// the BLAS, and the output is the plain model's; with every weight under
// the limit nothing is packed or released, so int8 can still be built.
TEST(PackedLinear, SmallWeightsStayPlain) {
  if (!PackedLinearSupported()) GTEST_SKIP() << "no packed oneDNN linear";
  auto plain = Make();
  const at::Tensor want = Tokens(*plain).to(at::kDouble);
  auto some = Make();
  ASSERT_TRUE(
      some->PrepackWeights(PackedLimits{PackedLinear::kEveryProduct, 2048})
          .ok());
  EXPECT_EQ(some->packed_weights(),
            3 * SmallConfig(SchemeType::kRope).num_layers);
  EXPECT_LT(MaxRelative(Tokens(*some), want), 1e-5);
  EXPECT_EQ(some->QuantizeInt8().code(), absl::StatusCode::kFailedPrecondition);
  auto none = Make();
  ASSERT_TRUE(
      none->PrepackWeights(PackedLimits{PackedLinear::kEveryProduct, 4096})
          .ok());
  EXPECT_TRUE(none->prepacked());
  EXPECT_EQ(none->packed_weights(), 0);
  EXPECT_TRUE(at::equal(Tokens(*none), Tokens(*plain)));
  if (Int8Supported()) {
    EXPECT_TRUE(none->QuantizeInt8().ok());
  }
  auto bad = Make();
  EXPECT_EQ(bad->PrepackWeights(PackedLimits{0, -1}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad->PrepackWeights(PackedLimits{-1, 0}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(bad->prepacked());
}

TEST(PackedLinear, EncoderPacksNoFloat16) {
  auto half = Make(at::kHalf);
  const absl::Status s = half->PrepackWeights();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_FALSE(half->prepacked());
}

}  // namespace
}  // namespace encoder::model
