// The registry of positional schemes (model/positional/traits.h): every
// SchemeType has one entry, found by its name; what the traits say for
// each scheme, against what the scheme's definition implies; and that the
// config reader, ValidateConfig and the built-in repository go through
// them.
#include <set>
#include <string>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "server/model/config.h"
#include "server/model/positional/schemes.h"
#include "server/model/positional/traits.h"
#include "server/model/weights/model_repository.h"

namespace encoder::model {
namespace {

TEST(PositionalTraitsTest, EverySchemeOnceByTypeAndName) {
  const auto& all = AllSchemes();
  ASSERT_EQ(all.size(), 8u);
  std::set<std::string> names;
  for (size_t i = 0; i < all.size(); ++i) {
    const SchemeTraits& t = *all[i];
    EXPECT_EQ(static_cast<size_t>(t.type), i) << t.name;
    EXPECT_EQ(&Traits(t.type), &t);
    EXPECT_EQ(FindScheme(t.name), &t);
    EXPECT_EQ(SchemeName(t.type), t.name);
    auto parsed = ParseSchemeName(std::string(t.name));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, t.type);
    EXPECT_TRUE(names.insert(std::string(t.name)).second) << t.name;
    EXPECT_EQ(SchemeEntryOf(t.type).make != nullptr, true) << t.name;
  }
  EXPECT_EQ(FindScheme("rotary"), nullptr);
  EXPECT_EQ(SchemeNameList(),
            "none, sinusoidal, learned, rope, alibi, relative, "
            "learned_relative, disentangled");
}

TEST(PositionalTraitsTest, TheConfigBuildersSelectTheirScheme) {
  EXPECT_EQ(Traits(NoneConfig().type).name, "none");
  EXPECT_EQ(Traits(LearnedConfig().type).name, "learned");
  EXPECT_EQ(Traits(AlibiConfig().type).name, "alibi");
  EXPECT_EQ(Traits(DisentangledConfig().type).name, "disentangled");
  const PositionalConfig rope = RopeConfig(RopeLayout::kHalf, 500000.0);
  EXPECT_EQ(Traits(rope.type).name, "rope");
  EXPECT_EQ(rope.rope_layout, RopeLayout::kHalf);
  EXPECT_EQ(rope.base, 500000.0);
  const PositionalConfig sin = SinusoidalConfig(
      SinusoidalLayout::kConcat, SinusoidalDenominator::kHalfMinusOne, 1e4);
  EXPECT_EQ(Traits(sin.type).name, "sinusoidal");
  EXPECT_EQ(sin.sinusoidal_layout, SinusoidalLayout::kConcat);
  EXPECT_EQ(sin.sinusoidal_denominator, SinusoidalDenominator::kHalfMinusOne);
  const PositionalConfig t5 = RelativeConfig(32, 128);
  EXPECT_EQ(Traits(t5.type).name, "relative");
  EXPECT_EQ(t5.num_buckets, 32);
  EXPECT_EQ(t5.max_distance, 128);
  EXPECT_EQ(Traits(LearnedRelativeConfig(32, 128).type).name,
            "learned_relative");
}

ModelConfig With(const PositionalConfig& p) {
  ModelConfig c;
  c.positional = p;
  return c;
}

TEST(PositionalTraitsTest, ATableBoundsTheLengthOnlyWhereThereIsOne) {
  EXPECT_TRUE(With(LearnedConfig()).rejects_beyond_max_positions());
  EXPECT_TRUE(
      With(LearnedRelativeConfig(32, 128)).rejects_beyond_max_positions());
  PositionalConfig deberta = DisentangledConfig();
  deberta.absolute_input = false;
  EXPECT_FALSE(With(deberta).rejects_beyond_max_positions());
  deberta.absolute_input = true;
  EXPECT_TRUE(With(deberta).rejects_beyond_max_positions());
  for (const PositionalConfig& p :
       {NoneConfig(), AlibiConfig(), RelativeConfig(32, 128),
        RopeConfig(RopeLayout::kHalf, 1e4),
        SinusoidalConfig(SinusoidalLayout::kInterleaved,
                         SinusoidalDenominator::kModelDim, 1e4)}) {
    EXPECT_FALSE(With(p).rejects_beyond_max_positions()) << Traits(p.type).name;
  }
  ModelConfig c = With(LearnedConfig());
  c.max_positions = 512;
  c.max_input_tokens = 2048;
  EXPECT_EQ(c.max_length(), 512);
  c.positional = AlibiConfig();
  EXPECT_EQ(c.max_length(), 2048);
}

TEST(PositionalTraitsTest, DisentangledScalesByItsTermsAndPricesItsRows) {
  PositionalConfig p = DisentangledConfig();
  p.c2p = p.p2c = true;
  p.position_buckets = 256;
  EXPECT_EQ(With(p).score_scale_factor(), 3);   // DeBERTa's scale_factor
  EXPECT_EQ(With(p).content_bias_rows(), 512);  // 2 x span
  p.p2c = false;
  p.position_buckets = 0;
  p.max_relative_positions = 128;
  EXPECT_EQ(With(p).score_scale_factor(), 2);
  EXPECT_EQ(With(p).content_bias_rows(), 256);
  EXPECT_EQ(With(RopeConfig(RopeLayout::kHalf, 1e4)).score_scale_factor(), 1);
  EXPECT_EQ(With(AlibiConfig()).content_bias_rows(), 0);
  EXPECT_TRUE(With(RelativeConfig(32, 128)).has_relative_buckets());
  EXPECT_TRUE(With(LearnedRelativeConfig(32, 128)).has_relative_buckets());
  EXPECT_FALSE(With(AlibiConfig()).has_relative_buckets());
}

TEST(PositionalTraitsTest, ConfigLayoutsAndChecksComeFromTheScheme) {
  auto rope =
      ParseModelConfig(R"({"positional": {"type": "rope", "layout": "half"}})");
  ASSERT_TRUE(rope.ok()) << rope.status();
  EXPECT_EQ(rope->positional.rope_layout, RopeLayout::kHalf);
  auto concat = ParseModelConfig(
      R"({"positional": {"type": "sinusoidal", "layout": "concat"}})");
  ASSERT_TRUE(concat.ok()) << concat.status();
  EXPECT_EQ(concat->positional.sinusoidal_layout, SinusoidalLayout::kConcat);
  auto bad = ParseModelConfig(
      R"({"positional": {"type": "alibi", "layout": "half"}})");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "model config: layout \"half\" is not valid for alibi "
            "(sinusoidal: interleaved|concat; rope: interleaved|half)");
  auto odd = ParseModelConfig(
      R"({"d_model": 30, "num_heads": 2, "positional": {"type": "rope"}})");
  ASSERT_FALSE(odd.ok());
  EXPECT_EQ(odd.status().message(),
            "model config: rope needs an even head dim, got 15");
  auto buckets = ParseModelConfig(
      R"({"positional": {"type": "relative", "num_buckets": 5}})");
  ASSERT_FALSE(buckets.ok());
  EXPECT_TRUE(absl::StrContains(buckets.status().message(),
                                "num_buckets must be even and >= 4"));
  auto unknown = ParseModelConfig(R"({"positional": {"type": "rotary"}})");
  ASSERT_FALSE(unknown.ok());
  EXPECT_TRUE(absl::StrContains(unknown.status().message(),
                                "must be one of none, sinusoidal"));
}

TEST(PositionalTraitsTest, BuiltInModelsAreTheBuiltInSchemes) {
  const Repository repo = BuiltinRepository();
  std::set<std::string> models, builtin;
  for (const ModelSpec& spec : repo.models) {
    models.insert(spec.name);
    EXPECT_EQ(SchemeName(spec.config.positional.type), spec.name);
  }
  for (const SchemeTraits* t : AllSchemes()) {
    if (t->builtin) builtin.insert(std::string(t->name));
  }
  EXPECT_EQ(models, builtin);
  EXPECT_EQ(models, (std::set<std::string>{"none", "sinusoidal", "learned",
                                           "rope", "alibi", "relative"}));
}

TEST(PositionalTraitsTest, ReachIsTheSchemesOwn) {
  ModelConfig alibi = With(AlibiConfig());
  alibi.num_heads = 8;
  const SchemeReach a = AnalyzeReach(alibi);
  EXPECT_EQ(a.alibi_windows.size(), 8u);
  EXPECT_EQ(a.distance_only_reason,
            "ALiBi's bias grows linearly with distance");
  const SchemeReach t5 = AnalyzeReach(With(RelativeConfig(32, 128)));
  EXPECT_GT(t5.bucket_saturation_distance, 0);
  EXPECT_FALSE(t5.distance_only_reason.empty());
  // MPNet's buckets saturate too, but its table bounds it.
  ModelConfig mpnet = With(LearnedRelativeConfig(32, 128));
  const SchemeReach m = AnalyzeReach(mpnet);
  EXPECT_EQ(m.bucket_saturation_distance, t5.bucket_saturation_distance);
  EXPECT_TRUE(m.distance_only_reason.empty());
  EXPECT_EQ(m.max_length, mpnet.max_positions);
  ModelConfig rope = With(RopeConfig(RopeLayout::kHalf, 1e4));
  EXPECT_EQ(AnalyzeReach(rope).wavelengths.size(),
            static_cast<size_t>(rope.head_dim() / 2));
  EXPECT_TRUE(AnalyzeReach(With(NoneConfig())).wavelengths.empty());
  // A rotary scaling reaches factor x its original context; none
  // without one, nor when it shrinks or scales some layers only.
  EXPECT_EQ(AnalyzeReach(rope).scaled_length, 0);
  rope.positional.rope_scaling.type = RopeScalingType::kYarn;
  rope.positional.rope_scaling.factor = 4;
  rope.positional.rope_scaling.original_max_positions = 32;
  const SchemeReach yarn = AnalyzeReach(rope);
  EXPECT_EQ(yarn.scaled_length, 128);
  EXPECT_EQ(yarn.scaled_reason,
            "its rotary scaling (yarn, factor 4 over 32 positions) reaches "
            "128 tokens");
  rope.positional.rope_scaling.factor = 0.5;
  EXPECT_EQ(AnalyzeReach(rope).scaled_length, 0);
  rope.positional.rope_scaling.factor = 4;
  rope.arch.layer_rope_scaling.assign(rope.num_layers,
                                      rope.positional.rope_scaling);
  EXPECT_EQ(AnalyzeReach(rope).scaled_length, 0);
}

}  // namespace
}  // namespace encoder::model
