#include "server/runner/precision_choice.h"

#include <gtest/gtest.h>

#include <limits>

#include "server/model/kernels/cpu_features.h"
#include "server/model/kernels/int8_linear.h"

namespace encoder::runner {
namespace {

model::ModelSpec SmallSpec() {
  model::ModelSpec spec;
  spec.name = "small";
  spec.config.vocab_size = 500;
  spec.config.d_model = 64;
  spec.config.num_heads = 4;
  spec.config.num_layers = 2;
  spec.config.d_ff = 128;
  spec.config.max_positions = 64;
  spec.seed = 3;
  return spec;
}

TEST(PrecisionChoice, TriesWhatTheCpuRunsAndKeepsTheFastestThatPasses) {
  const model::ModelSpec spec = SmallSpec();
  auto float32 = model::LoadModel(spec, at::kCPU, at::kFloat);
  ASSERT_TRUE(float32.ok()) << float32.status();
  auto choice = ChoosePrecision(spec, std::move(float32).value());
  ASSERT_TRUE(choice.ok()) << choice.status();
  const auto& trials = choice->trials;
  ASSERT_FALSE(trials.empty());
  EXPECT_EQ(trials[0].precision, model::Precision::kFloat32);
  size_t expected = 1;
  if (model::Int8Supported()) ++expected;
  if (model::DetectCpuFeatures().native_bf16()) ++expected;
  ASSERT_EQ(trials.size(), expected);
  model::Precision fastest = model::Precision::kFloat32;
  double best = std::numeric_limits<double>::infinity();
  for (const PrecisionTrial& t : trials) {
    std::printf("%s\n", DescribeTrial(t).c_str());
    EXPECT_GT(t.seconds, 0) << model::PrecisionName(t.precision);
    if (!model::DetectCpuFeatures().native_bf16()) {
      EXPECT_NE(t.precision, model::Precision::kBfloat16)
          << "emulated bfloat16 is tried";
    }
    if (t.precision == model::Precision::kInt8)
      EXPECT_TRUE(t.passed) << DescribeTrial(t);
    if (t.passed && t.seconds < best) {
      best = t.seconds;
      fastest = t.precision;
    }
  }
  EXPECT_EQ(EncoderPrecision(*choice->encoder), fastest);
}

}  // namespace
}  // namespace encoder::runner
