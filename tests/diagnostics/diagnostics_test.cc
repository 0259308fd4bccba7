// The diagnostics against their theory
// (docs/positional-encodings.md#diagnostics): which schemes are
// permutation-equivariant, which depend only on relative position, and the
// exact structure of each scheme's codes, rotations and biases.
#include "server/diagnostics/diagnostics.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "server/model/positional/pe_math.h"
#include "server/model/weights/model_repository.h"

namespace encoder::diagnostics {
namespace {

// A report's array as a tensor, for indexing and reductions.
template <typename T>
at::Tensor AsTensor(const api::DenseArray<T>& a) {
  return at::tensor(a.values, c10::CppTypeToScalarType<T>::value).view(a.shape);
}

using model::Encoder;
using model::ModelConfig;
using model::SchemeType;
using ::testing::HasSubstr;
using ::testing::StartsWith;

const std::vector<SchemeType> kAllSchemes = {
    SchemeType::kNone, SchemeType::kSinusoidal, SchemeType::kLearned,
    SchemeType::kRope, SchemeType::kAlibi,      SchemeType::kRelative};

const std::vector<int64_t> kIds = {5,  17, 42,  99, 7,  250,
                                   31, 64, 120, 3,  77, 201};

ModelConfig SmallConfig(SchemeType type) {
  ModelConfig c;
  c.vocab_size = 300;
  c.d_model = 32;
  c.num_heads = 4;
  c.num_layers = 2;
  c.d_ff = 64;
  c.max_positions = 64;
  c.positional.type = type;
  return c;
}

std::unique_ptr<Encoder> Make(const ModelConfig& c,
                              at::ScalarType dtype = at::kFloat,
                              uint64_t seed = 3) {
  auto enc =
      Encoder::Create(c, Encoder::RandomStateDict(c, seed), at::kCPU, dtype);
  EXPECT_TRUE(enc.ok()) << enc.status();
  return enc.ok() ? std::move(enc).value() : nullptr;
}

api::DiagnoseOptions Options(const std::vector<int64_t>& ids) {
  api::DiagnoseOptions o;
  o.token_ids = ids;
  return o;
}

api::DiagnoseReport MustDiagnose(const Encoder& enc,
                                 const api::DiagnoseOptions& o) {
  auto report = Diagnose(enc, o);
  EXPECT_TRUE(report.ok()) << report.status();
  return report.ok() ? std::move(report).value() : api::DiagnoseReport{};
}

bool IsPermutation(std::vector<int64_t> order) {
  std::sort(order.begin(), order.end());
  for (size_t i = 0; i < order.size(); ++i) {
    if (order[i] != static_cast<int64_t>(i)) return false;
  }
  return true;
}

// Checks the permutation and shift verdicts of one model against the theory.
void ExpectProbeTheory(const Encoder& enc, const std::vector<int64_t>& ids) {
  const SchemeType type = enc.config().positional.type;
  const std::string name = model::SchemeName(type);
  api::DiagnoseOptions o = Options(ids);
  o.structure = false;
  o.attention_stats = false;
  api::DiagnoseReport r = MustDiagnose(enc, o);
  ASSERT_TRUE(r.permutation.has_value()) << name;
  ASSERT_TRUE(r.shift.has_value()) << name;

  const api::PermutationResult& p = *r.permutation;
  EXPECT_TRUE(IsPermutation(p.order)) << name;
  std::vector<int64_t> identity(ids.size());
  std::iota(identity.begin(), identity.end(), 0);
  EXPECT_NE(p.order, identity) << name;
  EXPECT_DOUBLE_EQ(p.tolerance, 1e-5);
  if (type == SchemeType::kNone) {
    EXPECT_LT(p.max_token_error, 1e-5) << name;
    EXPECT_LT(p.max_pooled_error, 1e-5) << name;
    EXPECT_TRUE(p.equivariant) << name;
    EXPECT_THAT(p.verdict, StartsWith("equivariant")) << name;
  } else {
    EXPECT_GT(p.max_token_error, 1e-3) << name;
    EXPECT_GT(p.max_pooled_error, 1e-4) << name;
    EXPECT_FALSE(p.equivariant) << name;
    EXPECT_THAT(p.verdict, StartsWith("not equivariant")) << name;
  }
  EXPECT_THAT(p.verdict, HasSubstr("tolerance 1e-05")) << name;

  const api::ShiftResult& s = *r.shift;
  EXPECT_EQ(s.offset, 7);
  switch (type) {
    case SchemeType::kNone:
    case SchemeType::kAlibi:
    case SchemeType::kRelative:
      EXPECT_LT(s.max_token_error, 1e-5) << name;
      EXPECT_LT(s.max_pooled_error, 1e-5) << name;
      EXPECT_TRUE(s.relative_only) << name;
      EXPECT_THAT(s.verdict, StartsWith("purely relative position dependence"));
      EXPECT_THAT(s.verdict, HasSubstr("tolerance 1e-05"));
      break;
    case SchemeType::kRope:
      EXPECT_DOUBLE_EQ(s.tolerance, 1e-4);
      EXPECT_LT(s.max_token_error, 1e-4) << name;
      EXPECT_TRUE(s.relative_only) << name;
      EXPECT_THAT(s.verdict, HasSubstr("tolerance 0.0001"));
      break;
    case SchemeType::kSinusoidal:
    case SchemeType::kLearned:
      EXPECT_GT(s.max_token_error, 1e-3) << name;
      EXPECT_FALSE(s.relative_only) << name;
      EXPECT_THAT(s.verdict, StartsWith("absolute position dependence"));
      break;
  }
}

TEST(Diagnostics, SmallModelsFollowTheProbeTheory) {
  for (SchemeType type : kAllSchemes) {
    auto enc = Make(SmallConfig(type));
    ASSERT_NE(enc, nullptr);
    ExpectProbeTheory(*enc, kIds);
  }
}

// A causal mask orders the tokens by itself: without positions the model
// is no longer permutation-equivariant, yet it stays relative-only (the
// mask depends on the place in the sequence, not on the position ids), and
// with RoPE too.
TEST(Diagnostics, CausalModelsSeeOrderWithoutPositions) {
  for (SchemeType type : {SchemeType::kNone, SchemeType::kRope}) {
    ModelConfig c = SmallConfig(type);
    c.arch.causal = true;
    auto enc = Make(c);
    ASSERT_NE(enc, nullptr);
    api::DiagnoseOptions o = Options(kIds);
    o.structure = false;
    o.attention_stats = false;
    api::DiagnoseReport r = MustDiagnose(*enc, o);
    const std::string name = model::SchemeName(type);
    ASSERT_TRUE(r.permutation.has_value());
    EXPECT_FALSE(r.permutation->equivariant) << name;
    EXPECT_GT(r.permutation->max_pooled_error, 1e-4) << name;
    EXPECT_THAT(r.permutation->verdict, StartsWith("not equivariant"));
    ASSERT_TRUE(r.shift.has_value());
    EXPECT_TRUE(r.shift->relative_only) << name << ": " << r.shift->verdict;
  }
}

// Disentangled attention (DeBERTa): its position terms read relative
// distances only, so without a table at the input the model is
// relative-only, and with one it is not; it sees order either way. The
// structure probe's bias (layer 0's terms for fixed content) depends on
// i - j alone: Toeplitz, and not symmetric.
TEST(Diagnostics, DisentangledIsRelativeOnlyWithoutAnInputTable) {
  for (bool absolute : {false, true}) {
    ModelConfig c = SmallConfig(SchemeType::kDisentangled);
    c.positional.position_buckets = 8;
    c.positional.max_relative_positions = 20;
    c.positional.absolute_input = absolute;
    auto enc = Make(c);
    ASSERT_NE(enc, nullptr);
    api::DiagnoseOptions o = Options(kIds);
    o.attention_stats = false;
    o.structure_positions = 24;
    api::DiagnoseReport r = MustDiagnose(*enc, o);
    ASSERT_TRUE(r.permutation.has_value() && r.shift.has_value());
    EXPECT_FALSE(r.permutation->equivariant) << absolute;
    EXPECT_GT(r.permutation->max_pooled_error, 1e-4) << absolute;
    EXPECT_EQ(r.shift->relative_only, !absolute) << r.shift->verdict;
    if (!absolute) {
      EXPECT_LT(r.shift->max_token_error, 1e-5);
    }
    ASSERT_TRUE(r.structure.has_value());
    EXPECT_EQ(r.structure->kind, "bias");
    EXPECT_EQ(r.structure->positions, 24);
    EXPECT_TRUE(r.structure->toeplitz) << r.structure->toeplitz_deviation;
    EXPECT_FALSE(r.structure->symmetric);
    // Buckets (mid 4): distances 5 and 6 share bucket 5 (4 + ceil(log(d /
    // 4) / log(19 / 4) * 3)), so the bias is equal there; 1 and 2 do not.
    const at::Tensor bias = AsTensor(r.structure->bias);  // [H, N, N]
    EXPECT_DOUBLE_EQ(bias[0][10][5].item<double>(),
                     bias[0][10][4].item<double>());
    EXPECT_NE(bias[0][10][8].item<double>(), bias[0][10][9].item<double>());
  }
}

TEST(Diagnostics, DefaultSizeModelsFollowTheProbeTheory) {
  const model::Repository repo = model::BuiltinRepository();
  ASSERT_EQ(repo.models.size(), kAllSchemes.size());
  for (const model::ModelSpec& spec : repo.models) {
    auto enc = model::LoadModel(spec, at::kCPU, at::kFloat);
    ASSERT_TRUE(enc.ok()) << enc.status();
    ASSERT_EQ((*enc)->config().d_model, 512);
    ASSERT_EQ((*enc)->config().num_layers, 4);
    ExpectProbeTheory(**enc, {12, 907, 45, 3001, 77, 9999});

    // Structure at full width.
    api::DiagnoseOptions o = Options({12, 907, 45});
    o.permutation = o.shift = false;
    api::DiagnoseReport r = MustDiagnose(**enc, o);
    ASSERT_TRUE(r.structure.has_value());
    const api::StructureResult& st = *r.structure;
    switch (spec.config.positional.type) {
      case SchemeType::kSinusoidal:
        EXPECT_EQ(st.kind, "additive");
        EXPECT_LT(st.toeplitz_deviation, 1e-5);
        EXPECT_NEAR(st.similarity_by_distance[0], 256.0, 1e-4);
        for (double res : st.shift_residuals) EXPECT_LT(res, 1e-5);
        break;
      case SchemeType::kLearned:
        // 64 codes in 512 dims: any table is fitted exactly by some M_k,
        // so only the Gram matrix tells a random table apart.
        EXPECT_EQ(st.kind, "additive");
        EXPECT_GT(st.toeplitz_deviation, 1e-3);
        break;
      case SchemeType::kRope:
        EXPECT_EQ(st.kind, "rotary");
        EXPECT_LT(st.relativity_deviation, 1e-9);
        EXPECT_LT(st.norm_ratio_deviation, 1e-12);
        break;
      case SchemeType::kAlibi:
        EXPECT_TRUE(st.symmetric);
        EXPECT_TRUE(st.toeplitz);
        EXPECT_EQ(st.slopes, model::AlibiSlopes(8));
        break;
      case SchemeType::kRelative:
        EXPECT_FALSE(st.symmetric);
        EXPECT_TRUE(st.toeplitz);
        break;
      case SchemeType::kNone:
        EXPECT_EQ(st.kind, "none");
        break;
    }
    EXPECT_EQ(static_cast<int64_t>(r.attention_stats.size()), 4 * 8);
  }
}

TEST(Diagnostics, ReversalIsASymmetryOfAlibiOnly) {
  // |i - j| is unchanged when the sequence is reversed, so ALiBi (and no
  // other positional scheme) is equivariant under reversal.
  std::vector<int64_t> reversed(kIds.size());
  std::iota(reversed.rbegin(), reversed.rend(), 0);
  for (SchemeType type : kAllSchemes) {
    auto enc = Make(SmallConfig(type));
    api::DiagnoseOptions o = Options(kIds);
    o.permutation_order = reversed;
    o.shift = o.structure = o.attention_stats = false;
    api::DiagnoseReport r = MustDiagnose(*enc, o);
    ASSERT_TRUE(r.permutation.has_value());
    EXPECT_EQ(r.permutation->order, reversed);
    const bool symmetric =
        type == SchemeType::kNone || type == SchemeType::kAlibi;
    EXPECT_EQ(r.permutation->equivariant, symmetric)
        << model::SchemeName(type) << ": " << r.permutation->verdict;
  }
}

TEST(Diagnostics, ToleranceOverridesDefaults) {
  auto enc = Make(SmallConfig(SchemeType::kSinusoidal));
  api::DiagnoseOptions o = Options(kIds);
  o.structure = o.attention_stats = false;
  o.tolerance = 100.0;
  api::DiagnoseReport r = MustDiagnose(*enc, o);
  EXPECT_TRUE(r.permutation->equivariant);
  EXPECT_TRUE(r.shift->relative_only);
  EXPECT_DOUBLE_EQ(r.shift->tolerance, 100.0);
  EXPECT_THAT(r.shift->verdict, HasSubstr("tolerance 100"));
}

TEST(Diagnostics, LearnedShiftBeyondTheTableIsAVerdictNotAnError) {
  auto enc = Make(SmallConfig(SchemeType::kLearned));
  api::DiagnoseOptions o = Options(kIds);
  o.permutation = o.structure = o.attention_stats = false;
  o.shift_offset = 60;  // positions 60..71, table of 64
  api::DiagnoseReport r = MustDiagnose(*enc, o);
  ASSERT_TRUE(r.shift.has_value());
  EXPECT_FALSE(r.shift->relative_only);
  EXPECT_THAT(r.shift->verdict, HasSubstr("60..71"));
  EXPECT_THAT(r.shift->verdict, HasSubstr("leave"));
  EXPECT_THAT(r.shift->verdict, HasSubstr("64 positions"));
}

TEST(Diagnostics, SinusoidalCodesAreShiftedByExactRotations) {
  for (auto layout : {model::SinusoidalLayout::kInterleaved,
                      model::SinusoidalLayout::kConcat}) {
    for (auto denominator : {model::SinusoidalDenominator::kModelDim,
                             model::SinusoidalDenominator::kHalfMinusOne}) {
      for (at::ScalarType dtype : {at::kFloat, at::kDouble}) {
        ModelConfig c = SmallConfig(SchemeType::kSinusoidal);
        c.positional.sinusoidal_layout = layout;
        c.positional.sinusoidal_denominator = denominator;
        c.positional.sinusoidal_offset = 2;
        auto enc = Make(c, dtype);
        api::DiagnoseOptions o = Options(kIds);
        o.permutation = o.shift = o.attention_stats = false;
        o.structure_positions = 100;
        api::DiagnoseReport r = MustDiagnose(*enc, o);
        ASSERT_TRUE(r.structure.has_value());
        const api::StructureResult& st = *r.structure;
        const std::string where =
            "layout " + std::to_string(static_cast<int>(layout)) +
            " denominator " + std::to_string(static_cast<int>(denominator)) +
            " dtype " + std::string(c10::toString(dtype));
        // Exact in float64; float32 codes carry ~1e-7 rounding.
        const double bound = dtype == at::kDouble ? 1e-12 : 1e-5;
        EXPECT_EQ(st.kind, "additive");
        EXPECT_EQ(st.positions, 100);
        ASSERT_EQ(st.gram.shape, (std::vector<int64_t>{100, 100}));
        EXPECT_LT(st.toeplitz_deviation, bound) << where;
        EXPECT_EQ(st.shift_ks, (std::vector<int64_t>{1, 2, 5, 10}));
        ASSERT_EQ(st.shift_residuals.size(), 4u);
        for (double res : st.shift_residuals) EXPECT_LT(res, bound) << where;
        ASSERT_EQ(st.similarity_by_distance.size(), 100u);
        EXPECT_NEAR(st.similarity_by_distance[0], 16.0, 1e-5) << where;
        EXPECT_GT(st.min_code_distance, 1e-3) << where;
      }
    }
  }
}

TEST(Diagnostics, SinusoidalSimilarityMatchesPublishedValues) {
  ModelConfig c = SmallConfig(SchemeType::kSinusoidal);
  c.d_model = 64;
  auto enc = Make(c, at::kDouble);
  api::DiagnoseOptions o = Options({1, 2});
  o.permutation = o.shift = o.attention_stats = false;
  api::DiagnoseReport r = MustDiagnose(*enc, o);
  const std::vector<double>& sim = r.structure->similarity_by_distance;
  ASSERT_EQ(sim.size(), 64u);
  EXPECT_NEAR(sim[0], 32.0, 1e-12);
  EXPECT_NEAR(sim[1], 30.917, 5e-4);
  EXPECT_NEAR(sim[2], 28.304, 5e-4);
  EXPECT_NEAR(sim[5], 23.504, 5e-4);
  EXPECT_NEAR(sim[10], 21.052, 5e-4);
  EXPECT_NEAR(sim[50], 15.674, 5e-4);
  EXPECT_NEAR(AsTensor(r.structure->gram)[3][53].item<double>(), 15.674, 5e-4);
}

TEST(Diagnostics, RandomLearnedTableHasNoShiftOperator) {
  auto enc = Make(SmallConfig(SchemeType::kLearned));
  api::DiagnoseOptions o = Options(kIds);
  o.permutation = o.shift = o.attention_stats = false;
  o.structure_positions = 500;
  api::DiagnoseReport r = MustDiagnose(*enc, o);
  const api::StructureResult& st = *r.structure;
  EXPECT_EQ(st.kind, "additive");
  EXPECT_EQ(st.positions, 64);  // capped at the table
  ASSERT_EQ(st.shift_residuals.size(), 4u);
  for (double res : st.shift_residuals) EXPECT_GT(res, 1e-3);
  EXPECT_GT(st.toeplitz_deviation, 1e-3);
  EXPECT_GT(st.min_code_distance, 0.0);
}

TEST(Diagnostics, AlibiBiasIsSymmetricToeplitzWithPaperSlopes) {
  auto enc = Make(SmallConfig(SchemeType::kAlibi));
  api::DiagnoseOptions o = Options(kIds);
  o.permutation = o.shift = o.attention_stats = false;
  o.structure_positions = 20;
  api::DiagnoseReport r = MustDiagnose(*enc, o);
  const api::StructureResult& st = *r.structure;
  EXPECT_EQ(st.kind, "bias");
  EXPECT_EQ(st.slopes, model::AlibiSlopes(4));
  EXPECT_EQ(st.slopes,
            (std::vector<double>{0.25, 0.0625, 0.015625, 0.00390625}));
  ASSERT_EQ(st.bias.shape, (std::vector<int64_t>{4, 20, 20}));
  EXPECT_TRUE(st.symmetric);
  EXPECT_EQ(st.symmetry_deviation, 0.0);
  EXPECT_TRUE(st.toeplitz);
  EXPECT_DOUBLE_EQ(AsTensor(st.bias)[1][3][10].item<double>(), -0.0625 * 7);
  EXPECT_DOUBLE_EQ(AsTensor(st.bias)[3][19][0].item<double>(),
                   -0.00390625 * 19);
}

TEST(Diagnostics, RelativeBiasIsToeplitzNotSymmetric) {
  auto enc = Make(SmallConfig(SchemeType::kRelative));
  api::DiagnoseOptions o = Options(kIds);
  o.permutation = o.shift = o.attention_stats = false;
  o.structure_positions = 200;
  api::DiagnoseReport r = MustDiagnose(*enc, o);
  const api::StructureResult& st = *r.structure;
  EXPECT_EQ(st.kind, "bias");
  ASSERT_EQ(st.bias.shape, (std::vector<int64_t>{4, 200, 200}));
  EXPECT_TRUE(st.toeplitz);
  EXPECT_LE(st.toeplitz_deviation, 1e-9);
  EXPECT_FALSE(st.symmetric);
  EXPECT_GT(st.symmetry_deviation, 1e-3);
  EXPECT_TRUE(st.slopes.empty());
  // bias_h(i, j) = table[bucket(j - i), h].
  at::Tensor table =
      enc->scheme().Parameters().at("relative_attention_bias.weight");
  const int64_t bucket = model::RelativeBucket(150 - 10, 32, 128);
  EXPECT_DOUBLE_EQ(AsTensor(st.bias)[2][10][150].item<double>(),
                   table[bucket][2].item<double>());
}

TEST(Diagnostics, RopeScoresDependOnlyOnRelativePosition) {
  for (auto layout :
       {model::RopeLayout::kInterleaved, model::RopeLayout::kHalf}) {
    ModelConfig c = SmallConfig(SchemeType::kRope);
    c.positional.rope_layout = layout;
    auto enc = Make(c);
    api::DiagnoseOptions o = Options(kIds);
    o.permutation = o.shift = o.attention_stats = false;
    o.structure_positions = 1024;
    api::DiagnoseReport r = MustDiagnose(*enc, o);
    const api::StructureResult& st = *r.structure;
    EXPECT_EQ(st.kind, "rotary");
    ASSERT_EQ(st.relativity.shape, (std::vector<int64_t>{1024, 1024}));
    EXPECT_LT(st.relativity_deviation, 1e-9);
    EXPECT_LT(st.norm_ratio_deviation, 1e-12);
    // Not trivially constant: the score varies with the distance.
    EXPECT_GT((AsTensor(st.relativity)[0] - AsTensor(st.relativity)[0][0])
                  .abs()
                  .max()
                  .item<double>(),
              1e-2);
  }
}

TEST(Diagnostics, AttentionStatisticsAndMaps) {
  auto enc = Make(SmallConfig(SchemeType::kRelative));
  api::DiagnoseOptions o = Options(kIds);
  o.permutation = o.shift = o.structure = false;
  o.return_attention_maps = true;
  api::DiagnoseReport r = MustDiagnose(*enc, o);
  const int64_t s = static_cast<int64_t>(kIds.size());
  EXPECT_DOUBLE_EQ(r.uniform_entropy, std::log(static_cast<double>(s)));
  ASSERT_EQ(r.attention_maps.shape, (std::vector<int64_t>{2, 4, s, s}));
  EXPECT_LT((AsTensor(r.attention_maps).sum(-1) - 1).abs().max().item<double>(),
            1e-5);

  // The maps are the model's own attention.
  model::EncoderInput in;
  in.ids = at::tensor(kIds, at::kLong).view({1, s});
  in.mask = at::ones_like(in.ids, at::kBool);
  auto out = enc->Forward(in, {{0, 1}});
  ASSERT_TRUE(out.ok()) << out.status();
  for (int64_t l = 0; l < 2; ++l) {
    EXPECT_TRUE(AsTensor(r.attention_maps)[l].equal(out->attention.at(l)[0]));
  }

  ASSERT_EQ(r.attention_stats.size(), 8u);
  for (size_t i = 0; i < r.attention_stats.size(); ++i) {
    const AttentionHeadStats& h = r.attention_stats[i];
    EXPECT_EQ(h.layer, static_cast<int64_t>(i / 4));
    EXPECT_EQ(h.head, static_cast<int64_t>(i % 4));
    const AttentionHeadStats expected =
        ComputeHeadStats(out->attention.at(h.layer)[0], h.layer)[h.head];
    EXPECT_DOUBLE_EQ(h.entropy, expected.entropy);
    EXPECT_DOUBLE_EQ(h.mean_distance, expected.mean_distance);
    EXPECT_DOUBLE_EQ(h.prev_mass, expected.prev_mass);
    // Entropy lies in [0, ln S]; masses are probabilities.
    EXPECT_GT(h.entropy, 0.0);
    EXPECT_LE(h.entropy, r.uniform_entropy + 1e-9);
    for (double mass : {h.self_mass, h.prev_mass, h.next_mass, h.first_mass}) {
      EXPECT_GE(mass, 0.0);
      EXPECT_LE(mass, 1.0);
    }
  }
}

TEST(Diagnostics, NoneHasNoStructure) {
  auto enc = Make(SmallConfig(SchemeType::kNone));
  api::DiagnoseOptions o = Options(kIds);
  api::DiagnoseReport r = MustDiagnose(*enc, o);
  ASSERT_TRUE(r.structure.has_value());
  EXPECT_EQ(r.structure->kind, "none");
  EXPECT_FALSE(r.structure->gram.present());
  EXPECT_FALSE(r.attention_maps.present());
}

TEST(Diagnostics, BadRequestsAreInvalidArgument) {
  auto enc = Make(SmallConfig(SchemeType::kSinusoidal));
  auto expect_invalid = [&](const api::DiagnoseOptions& o,
                            const std::string& needle) {
    auto r = Diagnose(*enc, o);
    ASSERT_FALSE(r.ok()) << needle;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument)
        << r.status();
    EXPECT_THAT(std::string(r.status().message()), HasSubstr(needle));
  };
  expect_invalid(Options({}), "token_ids is empty");

  api::DiagnoseOptions o = Options({1, 2, 3});
  o.structure_positions = 1;
  expect_invalid(o, "structure_positions");
  o.structure_positions = 1025;
  expect_invalid(o, "structure_positions");
  o.structure = false;  // unused then
  EXPECT_TRUE(Diagnose(*enc, o).ok());

  o = Options({1, 2, 3});
  o.permutation_order = {0, 1};
  expect_invalid(o, "permutation_order has 2 entries");
  o.permutation_order = {0, 1, 1};
  expect_invalid(o, "not a permutation of 0..2: entry 1 repeats");
  o.permutation_order = {0, 3, 1};
  expect_invalid(o, "not a permutation of 0..2: entry 3 is out of range");
  o.permutation_order = {0, -1, 1};
  expect_invalid(o, "entry -1 is out of range");

  expect_invalid(Options({1, 300}), "token id 300");

  auto learned = Make(SmallConfig(SchemeType::kLearned));
  std::vector<int64_t> long_ids(65, 4);
  auto r = Diagnose(*learned, Options(long_ids));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("64"));
}

TEST(Diagnostics, SingleTokenInput) {
  auto enc = Make(SmallConfig(SchemeType::kRope));
  api::DiagnoseReport r = MustDiagnose(*enc, Options({42}));
  EXPECT_EQ(r.permutation->order, (std::vector<int64_t>{0}));
  EXPECT_TRUE(r.permutation->equivariant);
  EXPECT_TRUE(r.shift->relative_only);
  EXPECT_EQ(r.uniform_entropy, 0.0);
  ASSERT_EQ(r.attention_stats.size(), 8u);
  EXPECT_NEAR(r.attention_stats[0].self_mass, 1.0, 1e-6);
}

}  // namespace
}  // namespace encoder::diagnostics
