#include "server/model/config.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>

#include "server/model/dtype.h"

namespace encoder::model {
namespace {

TEST(Config, ParsesEveryField) {
  auto c = ParseModelConfig(R"({
    "vocab_size": 500, "d_model": 64, "num_heads": 4, "num_layers": 3,
    "d_ff": 128, "activation": "gelu", "norm_first": true,
    "layer_norm_eps": 1e-6, "max_positions": 77, "max_input_tokens": 99,
    "pooling": "first", "normalize": true, "embedding_scale": true,
    "causal": true, "num_kv_heads": 2, "layer_window": [4, 0, 2],
    "positional": {"type": "sinusoidal", "base": 500, "layout": "concat",
                   "denominator": "half_minus_one", "offset": 2}})");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->vocab_size, 500);
  EXPECT_EQ(c->num_layers, 3);
  EXPECT_EQ(c->activation, Activation::kGelu);
  EXPECT_TRUE(c->norm_first);
  EXPECT_DOUBLE_EQ(c->layer_norm_eps, 1e-6);
  EXPECT_EQ(c->max_length(), 99);
  EXPECT_EQ(c->pooling, Pooling::kFirst);
  EXPECT_TRUE(c->normalize && c->embedding_scale);
  EXPECT_TRUE(c->arch.causal);
  EXPECT_EQ(c->kv_heads(), 2);
  EXPECT_EQ(c->kv_dim(), 32);
  EXPECT_EQ(c->arch.layer_window, (std::vector<int64_t>{4, 0, 2}));
  EXPECT_EQ(c->positional.sinusoidal_layout, SinusoidalLayout::kConcat);
  EXPECT_EQ(c->positional.sinusoidal_denominator,
            SinusoidalDenominator::kHalfMinusOne);
  EXPECT_EQ(c->positional.sinusoidal_offset, 2);
  EXPECT_DOUBLE_EQ(c->positional.base, 500);
}

TEST(Config, DefaultsAreTheSeedsExperiment) {
  auto c = ParseModelConfig("{}");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->vocab_size, 10000);
  EXPECT_EQ(c->d_model, 512);
  EXPECT_EQ(c->num_heads, 8);
  EXPECT_EQ(c->d_ff, 2048);
  EXPECT_EQ(c->positional.type, SchemeType::kSinusoidal);
  EXPECT_EQ(c->positional.sinusoidal_layout, SinusoidalLayout::kInterleaved);
}

TEST(Config, LearnedLengthLimitIsTheTable) {
  auto c = ParseModelConfig(
      R"({"max_positions": 128, "positional": {"type": "learned"}})");
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(c->rejects_beyond_max_positions());
  EXPECT_EQ(c->max_length(), 128);
}

TEST(Config, ErrorsNameTheField) {
  const std::pair<const char*, const char*> cases[] = {
      {"not json", "not valid JSON"},
      {"[]", "JSON object"},
      {R"({"d_modle": 3})", "unknown key \"d_modle\""},
      {R"({"d_model": "big"})", "d_model must be an integer"},
      {R"({"d_model": 10, "num_heads": 3})", "not divisible"},
      {R"({"activation": "tanh"})", "activation \"tanh\""},
      {R"({"positional": {"type": "wavelet"}})", "\"wavelet\""},
      {R"({"positional": {"type": "rope", "layout": "concat"}})",
       "layout \"concat\""},
      {R"({"positional": {"type": "relative", "num_buckets": 7}})",
       "num_buckets"},
      {R"({"d_model": 12, "num_heads": 4, "positional": {"type": "rope"}})",
       "even head dim"},
      {R"({"vocab_size": 0})", "vocab_size must be > 0"},
      {R"({"num_heads": 8, "num_kv_heads": 3})",
       "num_kv_heads 3 must divide num_heads 8"},
      {R"({"causal": 1})", "causal must be bool"},
      {R"({"layer_window": 3})", "layer_window must be an array"},
      {R"({"num_layers": 2, "layer_window": [3, -1]})",
       "layer_window entries must be integers >= 0"},
      {R"({"num_layers": 2, "layer_window": [3]})",
       "layer_window needs one entry per layer"},
  };
  for (const auto& [json, needle] : cases) {
    auto c = ParseModelConfig(json);
    ASSERT_FALSE(c.ok()) << json;
    EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(std::string(c.status().message()).find(needle), std::string::npos)
        << json << " -> " << c.status();
  }
}

TEST(Dtype, NamesRoundTripAndOthersAreRefused) {
  for (const char* name : {"float32", "float16", "bfloat16"}) {
    auto dtype = ParseDtype(name);
    ASSERT_TRUE(dtype.ok()) << name;
    EXPECT_EQ(DtypeName(*dtype), name);
  }
  EXPECT_EQ(*ParseDtype("float16"), at::kHalf);
  auto bad = ParseDtype("float64");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(),
            "must be float32, float16 or bfloat16, got float64");
}

// The enum, LibTorch's type and the name describe one dtype each way; the
// precision is the dtype's name unless quantized.
TEST(Dtype, EnumScalarTypeAndPrecisionAgree) {
  const std::pair<Dtype, at::ScalarType> dtypes[] = {
      {Dtype::kFloat32, at::kFloat},
      {Dtype::kFloat16, at::kHalf},
      {Dtype::kBfloat16, at::kBFloat16}};
  for (const auto& [dtype, scalar] : dtypes) {
    EXPECT_EQ(ScalarTypeOf(dtype), scalar);
    EXPECT_EQ(DtypeOf(scalar), dtype);
    EXPECT_EQ(DtypeName(dtype), DtypeName(scalar));
    EXPECT_EQ(*ParseDtypeName(DtypeName(dtype)), dtype);
    EXPECT_EQ(PrecisionName(PrecisionOf(dtype, false)), DtypeName(dtype));
    EXPECT_EQ(PrecisionOf(dtype, true), Precision::kInt8);
  }
  EXPECT_EQ(PrecisionName(Precision::kInt8), "int8");
  EXPECT_EQ(DtypeName(at::kDouble), "float64");
  EXPECT_THROW(DtypeOf(at::kDouble), c10::Error);
}

}  // namespace
}  // namespace encoder::model
