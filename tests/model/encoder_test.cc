#include "server/model/encoder.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "server/model/torch_compat.h"
#include "tests/model/encoder_configs.h"

namespace encoder::model {
namespace {

std::unique_ptr<Encoder> Make(const ModelConfig& c, uint64_t seed = 1) {
  auto enc = Encoder::Create(c, Encoder::RandomStateDict(c, seed), at::kCPU);
  EXPECT_TRUE(enc.ok()) << enc.status();
  return std::move(enc).value();
}

EncoderInput Single(const std::vector<int64_t>& ids) {
  EncoderInput in;
  in.ids = at::tensor(ids, at::kLong).view({1, -1});
  in.mask = at::ones_like(in.ids, at::kBool);
  return in;
}

at::Tensor Tokens(const Encoder& enc, const EncoderInput& in) {
  auto out = enc.Forward(in, {});
  EXPECT_TRUE(out.ok()) << out.status();
  return out->tokens;
}

TEST(Encoder, OnlyNoneIsPermutationEquivariant) {
  const std::vector<int64_t> ids = {5, 17, 42, 99, 7, 250, 31, 64};
  const std::vector<int64_t> perm = {3, 0, 7, 5, 1, 6, 2, 4};
  std::vector<int64_t> permuted;
  for (int64_t p : perm) permuted.push_back(ids[p]);
  at::Tensor index = at::tensor(perm, at::kLong);
  for (SchemeType type : kAllSchemes) {
    auto enc = Make(SmallConfig(type));
    at::Tensor y = Tokens(*enc, Single(ids))[0];
    at::Tensor y_perm = Tokens(*enc, Single(permuted))[0];
    // f(Px) against P f(x).
    const double err = MaxAbs(y_perm - y.index_select(0, index));
    if (type == SchemeType::kNone) {
      EXPECT_LT(err, 1e-5) << SchemeName(type);
    } else {
      EXPECT_GT(err, 1e-3) << SchemeName(type);
    }
  }
}

// Causal attention: a token's output depends on itself and the tokens
// before it only. Changing the last three tokens leaves the first five
// outputs exactly as they were (and changes the last three); without the
// mask every output moves. Holds with and without positions.
TEST(Encoder, CausalOutputsDependOnEarlierTokensOnly) {
  const std::vector<int64_t> ids = {5, 17, 42, 99, 7, 250, 31, 64};
  std::vector<int64_t> changed = ids;
  changed[5] = 11;
  changed[6] = 12;
  changed[7] = 13;
  for (SchemeType type : {SchemeType::kNone, SchemeType::kRope,
                          SchemeType::kAlibi, SchemeType::kLearned}) {
    for (bool causal : {true, false}) {
      ModelConfig c = SmallConfig(type);
      c.arch.causal = causal;
      auto enc = Make(c);
      ForwardOptions o;
      o.attention_layers = {0, 1};
      auto a = enc->Forward(Single(ids), o);
      auto b = enc->Forward(Single(changed), o);
      ASSERT_TRUE(a.ok()) << a.status();
      ASSERT_TRUE(b.ok()) << b.status();
      const std::string what =
          SchemeName(type) + (causal ? " causal" : " bidirectional");
      const double first =
          MaxAbs(a->tokens[0].narrow(0, 0, 5) - b->tokens[0].narrow(0, 0, 5));
      const double last =
          MaxAbs(a->tokens[0].narrow(0, 5, 3) - b->tokens[0].narrow(0, 5, 3));
      EXPECT_GT(last, 1e-3) << what;
      if (causal) {
        EXPECT_LT(first, 1e-6) << what;
        // No probability on later keys; each row sums to one.
        for (const auto& [layer, p] : a->attention) {
          EXPECT_EQ(MaxAbs(p.triu(1)), 0.0) << what;
          EXPECT_LT(MaxAbs(p.sum(-1) - 1), 1e-5) << what;
        }
      } else {
        EXPECT_GT(first, 1e-3) << what;
      }
    }
  }
}

// Grouped-query attention is multi-head attention whose key and value
// heads are repeated: a model with 2 key/value heads for 4 query heads
// equals the full model whose key and value rows are each head's copy.
TEST(Encoder, GroupedQueryAttentionEqualsRepeatedHeads) {
  for (bool qwen3 : {true, false}) {
    const ModelConfig grouped = QwenLike(qwen3);
    ModelConfig full = grouped;
    full.arch.num_kv_heads = 0;
    const int64_t d = grouped.head_dim(), a = grouped.attention_dim();
    const int64_t kv = grouped.kv_dim(), rep = grouped.num_heads / 2;
    std::map<std::string, at::Tensor> weights =
        Encoder::RandomStateDict(grouped, 7);
    std::map<std::string, at::Tensor> repeated = weights;
    for (const std::string leaf : {"in_proj_weight", "in_proj_bias"}) {
      for (int64_t i = 0; i < grouped.num_layers; ++i) {
        const std::string name =
            "encoder.layers." + std::to_string(i) + ".self_attn." + leaf;
        if (weights.count(name) == 0) continue;
        at::Tensor w = weights.at(name);
        if (leaf == "in_proj_bias") w = w + 0.1 * at::randn_like(w);
        weights[name] = w;
        auto expand = [&](const at::Tensor& rows) {  // [KV*d, ...]
          std::vector<int64_t> shape = {2, 1, d};
          for (int64_t k = 1; k < rows.dim(); ++k)
            shape.push_back(rows.size(k));
          std::vector<int64_t> to = shape;
          to[1] = rep;
          std::vector<int64_t> flat = {2 * rep * d};
          for (int64_t k = 1; k < rows.dim(); ++k) flat.push_back(rows.size(k));
          return rows.reshape(shape).expand(to).reshape(flat);
        };
        repeated[name] = at::cat({w.narrow(0, 0, a), expand(w.narrow(0, a, kv)),
                                  expand(w.narrow(0, a + kv, kv))});
      }
    }
    auto g = Encoder::Create(grouped, weights, at::kCPU);
    auto f = Encoder::Create(full, repeated, at::kCPU);
    ASSERT_TRUE(g.ok()) << g.status();
    ASSERT_TRUE(f.ok()) << f.status();
    EXPECT_LT((*g)->parameter_count(), (*f)->parameter_count());
    const EncoderInput in = Single({5, 17, 42, 99, 7, 250, 31, 64, 3});
    ForwardOptions o;
    o.attention_layers = {1};
    auto x = (*g)->Forward(in, o);
    auto y = (*f)->Forward(in, o);
    ASSERT_TRUE(x.ok()) << x.status();
    ASSERT_TRUE(y.ok()) << y.status();
    EXPECT_LT(MaxAbs(x->tokens - y->tokens), 1e-5) << qwen3;
    EXPECT_LT(MaxAbs(x->attention.at(1) - y->attention.at(1)), 1e-6) << qwen3;
    EXPECT_GT(MaxAbs(x->tokens), 0.1);
  }
}

TEST(Encoder, PaddingDoesNotChangeResults) {
  for (SchemeType type : kAllSchemes) {
    auto enc = Make(SmallConfig(type));
    const std::vector<std::vector<int64_t>> seqs = {
        {1, 9, 8, 7}, {1, 20, 21, 22, 23, 24, 25, 26, 27, 2}, {1, 2}};
    EncoderInput batch;
    batch.ids = at::zeros({3, 10}, at::kLong);
    batch.mask = at::zeros({3, 10}, at::kBool);
    for (int64_t b = 0; b < 3; ++b) {
      for (size_t s = 0; s < seqs[b].size(); ++s) {
        batch.ids[b][s] = seqs[b][s];
        batch.mask[b][s] = true;
      }
    }
    auto out = enc->Forward(batch, {{0, 1}});
    ASSERT_TRUE(out.ok()) << out.status();
    for (int64_t b = 0; b < 3; ++b) {
      const int64_t n = static_cast<int64_t>(seqs[b].size());
      auto alone = enc->Forward(Single(seqs[b]), {{1}});
      ASSERT_TRUE(alone.ok());
      at::Tensor got = out->tokens[b].narrow(0, 0, n);
      EXPECT_LT(MaxAbs(got - alone->tokens[0]), 1e-5) << SchemeName(type);
      at::Tensor attn = out->attention.at(1)[b];  // [H, S, S]
      EXPECT_LT(MaxAbs(attn.narrow(1, 0, n).narrow(2, 0, n) -
                       alone->attention.at(1)[0]),
                1e-5);
      // Padded keys get no probability; real rows sum to one.
      EXPECT_EQ(MaxAbs(attn.narrow(1, 0, n).narrow(2, n, 10 - n)), 0.0);
      EXPECT_LT(MaxAbs(attn.narrow(1, 0, n).sum(-1) - 1), 1e-5);
    }
  }
}

// Keys narrower than the real tokens (ColBERT's query expansion): the
// attended tokens' outputs are those of the attended tokens alone, each
// unattended token's output does not depend on the other unattended
// tokens (nothing attends to them), and a sequence's outputs do not depend
// on what it is batched with; fused and explicit attention agree. Keys
// outside the real tokens are refused.
TEST(Encoder, UnattendedTokensAreComputedButNeverAttended) {
  for (SchemeType type : kAllSchemes) {
    auto enc = Make(SmallConfig(type));
    const std::vector<int64_t> real = {1, 9, 8, 7, 2};
    auto expanded = [&](int64_t fill, int64_t other) {
      std::vector<int64_t> ids = real;
      ids.insert(ids.end(), {fill, fill, other, fill});
      EncoderInput in = Single(ids);
      in.keys = in.mask.clone();
      in.keys.narrow(1, 5, 4).fill_(false);
      return in;
    };
    for (bool fused : {true, false}) {
      ForwardOptions options;
      options.fused_attention = fused;
      auto a = enc->Forward(expanded(4, 4), options);
      auto b = enc->Forward(expanded(4, 77), options);
      auto alone = enc->Forward(Single(real), options);
      ASSERT_TRUE(a.ok() && b.ok() && alone.ok()) << a.status();
      EXPECT_LT(MaxAbs(a->tokens[0].narrow(0, 0, 5) - alone->tokens[0]), 1e-5)
          << SchemeName(type);
      // Row 7 took another id; rows 5, 6 and 8 did not change with it.
      for (int64_t row : {5, 6, 8}) {
        EXPECT_LT(MaxAbs(a->tokens[0][row] - b->tokens[0][row]), 1e-5)
            << SchemeName(type) << " row " << row;
      }
      EXPECT_GT(MaxAbs(a->tokens[0][7] - b->tokens[0][7]), 1e-3);
      // Attending to every token changes the expansion rows.
      EncoderInput all = expanded(4, 4);
      all.keys = at::Tensor();
      auto attended = enc->Forward(all, options);
      ASSERT_TRUE(attended.ok());
      EXPECT_GT(MaxAbs(attended->tokens[0].narrow(0, 5, 4) -
                       a->tokens[0].narrow(0, 5, 4)),
                1e-3);
      // Batched with a longer sequence (padded), the same outputs.
      EncoderInput batch;
      batch.ids = at::zeros({2, 12}, at::kLong);
      batch.mask = at::zeros({2, 12}, at::kBool);
      batch.ids[0].narrow(0, 0, 9).copy_(expanded(4, 4).ids[0]);
      batch.mask[0].narrow(0, 0, 9).fill_(true);
      batch.ids[1].narrow(0, 0, 12).fill_(11);
      batch.mask[1].fill_(true);
      batch.keys = batch.mask.clone();
      batch.keys[0].narrow(0, 5, 4).fill_(false);
      auto batched = enc->Forward(batch, options);
      ASSERT_TRUE(batched.ok()) << batched.status();
      EXPECT_LT(MaxAbs(batched->tokens[0].narrow(0, 0, 9) - a->tokens[0]), 1e-5)
          << SchemeName(type);
    }
  }
  auto enc = Make(SmallConfig(SchemeType::kRope));
  EncoderInput bad;
  bad.ids = at::ones({1, 4}, at::kLong);
  bad.mask = at::ones({1, 4}, at::kBool);
  bad.mask[0][3] = false;
  bad.keys = at::ones({1, 4}, at::kBool);
  auto refused = enc->Forward(bad, {});
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  bad.keys = at::ones({1, 3}, at::kBool);
  EXPECT_EQ(enc->Forward(bad, {}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// dynamic and longrope depend on each sequence's extent: served per
// sequence, a text's outputs are the same alone and in any batch; past
// the context they differ from the unscaled model's, up to it they equal
// them.
TEST(Encoder, LengthDependentRopeScalingsArePerSequence) {
  RopeScaling dynamic;
  dynamic.type = RopeScalingType::kDynamic;
  dynamic.factor = 4.0;
  dynamic.original_max_positions = 8;
  RopeScaling longrope;
  longrope.type = RopeScalingType::kLongrope;
  longrope.original_max_positions = 8;
  longrope.short_factor = {1.0, 1.2, 1.4, 1.6, 1.8};
  longrope.long_factor = {1.0, 2.0, 4.0, 8.0, 16.0};
  longrope.attention_factor = 1.1;
  for (const RopeScaling& scaling : {dynamic, longrope}) {
    ModelConfig c = QwenLike(true);
    const auto plain = Make(c, 7);
    c.positional.rope_scaling = scaling;
    const auto enc = Make(c, 7);
    const std::vector<std::vector<int64_t>> seqs = {
        {1, 9, 8, 7, 6}, std::vector<int64_t>(30, 11), {1, 2, 3, 4, 5, 6, 7}};
    EncoderInput batch;
    batch.ids = at::zeros({3, 30}, at::kLong);
    batch.mask = at::zeros({3, 30}, at::kBool);
    for (int64_t b = 0; b < 3; ++b) {
      for (size_t t = 0; t < seqs[b].size(); ++t) {
        batch.ids[b][t] = seqs[b][t] + static_cast<int64_t>(t);
        batch.mask[b][t] = true;
      }
    }
    auto out = enc->Forward(batch, {});
    ASSERT_TRUE(out.ok()) << out.status();
    for (int64_t b = 0; b < 3; ++b) {
      const int64_t n = static_cast<int64_t>(seqs[b].size());
      EncoderInput alone =
          Single(std::vector<int64_t>(batch.ids[b].data_ptr<int64_t>(),
                                      batch.ids[b].data_ptr<int64_t>() + n));
      const at::Tensor want = Tokens(*enc, alone)[0];
      const std::string what = RopeScalingName(scaling.type);
      EXPECT_LT(MaxAbs(out->tokens[b].narrow(0, 0, n) - want), 1e-5)
          << what << " row " << b;
      const double from_plain = MaxAbs(Tokens(*plain, alone)[0] - want);
      if (n > 8) {
        EXPECT_GT(from_plain, 1e-3) << what << " row " << b;
      } else if (scaling.type == RopeScalingType::kDynamic) {
        EXPECT_EQ(from_plain, 0.0) << what << " row " << b;
      }
    }
  }
}

// Skipped padding (gathered rows; with prefix masks, attention per
// sequence too) against the full grid (batched attention).
TEST(Encoder, SkippingPaddedPositionsMatchesTheFullGrid) {
  at::manual_seed(3);
  for (const auto& [name, config] : PackingConfigs()) {
    auto enc = Make(config);
    for (bool holes : {false, true}) {
      // 30 real tokens of 48 (not a multiple of the row alignment).
      const std::vector<int64_t> lengths = {3, 12, 7, 1, 5, 2};
      const EncoderInput in = Padded(lengths, holes);
      ForwardOptions grid;
      grid.attention_layers = {0, 1};
      grid.hidden_layers = {0, 1, 2};
      grid.skip_padding_min_share = 1.0;  // never
      ForwardOptions packed = grid;
      packed.skip_padding_min_share = 0.0;  // whenever there is padding
      auto a = enc->Forward(in, grid);
      auto b = enc->Forward(in, packed);
      ASSERT_TRUE(a.ok()) << a.status();
      ASSERT_TRUE(b.ok()) << b.status();
      const std::string what = name + (holes ? " with holes" : "");
      const at::Tensor real = in.mask.unsqueeze(-1);  // [B, S, 1]
      auto on_real = [&](const at::Tensor& t) {
        return t.masked_fill(real.logical_not(), 0);
      };
      EXPECT_LT(MaxAbs(on_real(a->tokens) - on_real(b->tokens)), 1e-5) << what;
      ASSERT_EQ(b->hidden.size(), 3u) << what;
      for (const auto& [index, h] : a->hidden) {
        EXPECT_EQ(b->hidden.at(index).sizes(), h.sizes()) << what;
        EXPECT_LT(MaxAbs(on_real(h) - on_real(b->hidden.at(index))), 1e-5)
            << what << " hidden " << index;
      }
      for (const auto& [layer, p] : a->attention) {
        const at::Tensor rows = in.mask.view({6, 1, -1, 1});  // real queries
        const at::Tensor q = b->attention.at(layer);
        EXPECT_LT(MaxAbs(p.masked_fill(rows.logical_not(), 0) -
                         q.masked_fill(rows.logical_not(), 0)),
                  1e-5)
            << what << " attention " << layer;
        // Real queries still give padded keys no probability.
        const at::Tensor real_keys = in.mask.view({6, 1, 1, -1});
        EXPECT_EQ(
            MaxAbs(q.masked_fill(real_keys.logical_or(rows.logical_not()), 0)),
            0.0)
            << what;
      }
    }
  }
}

TEST(Encoder, PaddedPositionsAreSkippedFromTheMinimumShareOn) {
  auto enc = Make(SmallConfig(SchemeType::kSinusoidal));
  // 17 real tokens of 32: a padding share of 15/32 = 0.47. Skipped rows
  // (past the 24 the gather keeps, 17 aligned up to 8s) come back as
  // zeros; computed ones do not.
  const EncoderInput in = Padded({16, 1});
  auto zero_rows = [&](double share) {
    ForwardOptions o;
    o.skip_padding_min_share = share;
    auto out = enc->Forward(in, o);
    EXPECT_TRUE(out.ok()) << out.status();
    return out->tokens[1].abs().sum(-1).eq(0).sum().item<int64_t>();
  };
  EXPECT_EQ(zero_rows(0.5), 0);  // below the minimum share: full grid
  EXPECT_EQ(zero_rows(0.4), 8);  // skipped: 32 - 24 rows
  EXPECT_EQ(zero_rows(1.0), 0);  // never
}

TEST(Encoder, SameSeedSameWeightsOtherSeedOtherWeights) {
  ModelConfig c = SmallConfig(SchemeType::kRelative);
  auto a = Encoder::RandomStateDict(c, 5), b = Encoder::RandomStateDict(c, 5),
       other = Encoder::RandomStateDict(c, 6);
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [name, t] : a) {
    EXPECT_TRUE(t.equal(b.at(name))) << name;
  }
  EXPECT_FALSE(a.at("embedding.weight").equal(other.at("embedding.weight")));
  EXPECT_EQ(a.count("relative_attention_bias.weight"), 1u);
}

TEST(Encoder, StateDictMismatchesNameTheTensor) {
  ModelConfig c = SmallConfig(SchemeType::kLearned);
  auto dict = Encoder::RandomStateDict(c, 1);
  auto expect_error = [&](std::map<std::string, at::Tensor> d,
                          const std::string& needle) {
    auto enc = Encoder::Create(c, d, at::kCPU);
    ASSERT_FALSE(enc.ok());
    EXPECT_EQ(enc.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(std::string(enc.status().message()).find(needle),
              std::string::npos)
        << enc.status();
  };
  auto missing = dict;
  missing.erase("pos_embedding.weight");
  expect_error(missing, "missing tensor \"pos_embedding.weight\"");
  auto extra = dict;
  extra["encoder.layers.9.linear1.weight"] = at::zeros({1});
  expect_error(extra, "unexpected tensor \"encoder.layers.9.linear1.weight\"");
  auto shape = dict;
  shape["encoder.layers.1.linear2.weight"] = at::zeros({32, 63});
  expect_error(shape, "\"encoder.layers.1.linear2.weight\" has shape [32, 63]");
  auto dtype = dict;
  dtype["embedding.weight"] = at::zeros({300, 32}, at::kLong);
  expect_error(dtype, "\"embedding.weight\" has dtype Long");
}

TEST(Encoder, LearnedRejectsInputsBeyondItsTableAndNamesIt) {
  auto enc = Make(SmallConfig(SchemeType::kLearned));
  EXPECT_TRUE(enc->Forward(Single(std::vector<int64_t>(40, 5)), {}).ok());
  auto out = enc->Forward(Single(std::vector<int64_t>(41, 5)), {});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(out.status().message()).find("40 positions"),
            std::string::npos)
      << out.status();
  // Extrapolating schemes accept the same length.
  auto rope = Make(SmallConfig(SchemeType::kRope));
  EXPECT_TRUE(rope->Forward(Single(std::vector<int64_t>(41, 5)), {}).ok());
}

TEST(Encoder, BadInputsAreInvalidArgument) {
  auto enc = Make(SmallConfig(SchemeType::kAlibi));
  auto vocab = enc->Forward(Single({1, 300}), {});
  EXPECT_EQ(vocab.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(vocab.status().message()).find("[0, 300)"),
            std::string::npos);
  EXPECT_EQ(enc->Forward(Single({1, -1}), {}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(enc->Forward(Single({1, 2}), {{2}}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EncoderInput bad = Single({1, 2});
  bad.mask = at::ones({1, 3}, at::kBool);
  EXPECT_EQ(enc->Forward(bad, {}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(Pool, MeanIgnoresPaddingFirstTakesTokenZeroNormalizeIsUnit) {
  at::Tensor tokens =
      at::tensor({1.0f, 2.0f, 3.0f, 4.0f, 100.0f, 100.0f}).view({1, 3, 2});
  at::Tensor mask = at::tensor({1, 1, 0}, at::kLong).view({1, 3}).to(at::kBool);
  at::Tensor mean = Pool(tokens, mask, Pooling::kMean, false);
  EXPECT_FLOAT_EQ(mean[0][0].item<float>(), 2.0f);
  EXPECT_FLOAT_EQ(mean[0][1].item<float>(), 3.0f);
  at::Tensor first = Pool(tokens, mask, Pooling::kFirst, true);
  EXPECT_NEAR(first[0][0].item<float>(), 1 / std::sqrt(5.0f), 1e-7);
  EXPECT_NEAR(first.norm().item<float>(), 1.0f, 1e-6);
}

TEST(Pool, MaxLastTokenAndWeightedMeanIgnorePadding) {
  // Tokens (1, -2), (3, 4), padding (100, 100).
  at::Tensor tokens =
      at::tensor({1.0f, -2.0f, 3.0f, 4.0f, 100.0f, 100.0f}).view({1, 3, 2});
  at::Tensor mask = at::tensor({1, 1, 0}, at::kLong).view({1, 3}).to(at::kBool);
  at::Tensor max = Pool(tokens, mask, Pooling::kMax, false);
  EXPECT_FLOAT_EQ(max[0][0].item<float>(), 3.0f);
  EXPECT_FLOAT_EQ(max[0][1].item<float>(), 4.0f);
  at::Tensor last = Pool(tokens, mask, Pooling::kLastToken, false);
  EXPECT_FLOAT_EQ(last[0][0].item<float>(), 3.0f);
  EXPECT_FLOAT_EQ(last[0][1].item<float>(), 4.0f);
  // Weights 1 and 2: (1*1 + 2*3) / 3, (1*-2 + 2*4) / 3.
  at::Tensor weighted = Pool(tokens, mask, Pooling::kWeightedMean, false);
  EXPECT_FLOAT_EQ(weighted[0][0].item<float>(), 7.0f / 3);
  EXPECT_FLOAT_EQ(weighted[0][1].item<float>(), 2.0f);
}

}  // namespace
}  // namespace encoder::model
