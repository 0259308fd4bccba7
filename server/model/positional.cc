#include "server/model/positional.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "server/common/status_macros.h"
#include "server/model/pe_math.h"

namespace encoder::model {

at::Tensor PositionalScheme::AddToInput(const at::Tensor& x,
                                        const at::Tensor& positions) const {
  (void)positions;
  return x;
}

void PositionalScheme::RotateQk(at::Tensor& q, at::Tensor& k,
                                const at::Tensor& positions,
                                int64_t layer) const {
  (void)q;
  (void)k;
  (void)positions;
  (void)layer;
}

at::Tensor PositionalScheme::AttentionBias(const at::Tensor& query_positions,
                                           const at::Tensor& key_positions,
                                           at::ScalarType dtype) const {
  (void)query_positions;
  (void)key_positions;
  (void)dtype;
  return {};
}

namespace {

std::string Num(double v) {
  std::string s = absl::StrCat(v);
  return s;
}

class NoneScheme : public PositionalScheme {
 public:
  SchemeDescription Describe() const override {
    return {"none", {}, {}, /*extrapolates=*/true, 0, {}};
  }
};

// Vaswani et al. sinusoidal codes, added to the input. A table of the first
// `table_rows` positions is precomputed in float64 and cast once; positions
// outside it are computed on the fly (shift diagnostics use large offsets).
class SinusoidalScheme : public PositionalScheme {
 public:
  SinusoidalScheme(const ModelConfig& config, at::Device device,
                   at::ScalarType dtype)
      : config_(config), dtype_(dtype) {
    const int64_t rows =
        std::max(config.max_positions, config.max_input_tokens);
    table_ = SinusoidalCode(at::arange(rows, at::kLong), config.d_model,
                            config.positional)
                 .to(device, dtype);
  }

  at::Tensor AddToInput(const at::Tensor& x,
                        const at::Tensor& positions) const override {
    return x + InputCode(positions);
  }

  at::Tensor InputCode(const at::Tensor& positions) const override {
    const bool in_table = positions.numel() > 0 &&
                          positions.min().item<int64_t>() >= 0 &&
                          positions.max().item<int64_t>() < table_.size(0);
    if (in_table) return at::embedding(table_, positions);
    return SinusoidalCode(positions, config_.d_model, config_.positional)
        .to(dtype_);
  }

  SchemeDescription Describe() const override {
    const PositionalConfig& pc = config_.positional;
    return {"sinusoidal",
            {{"base", Num(pc.base)},
             {"layout", pc.sinusoidal_layout == SinusoidalLayout::kConcat
                            ? "concat"
                            : "interleaved"},
             {"denominator",
              pc.sinusoidal_denominator == SinusoidalDenominator::kHalfMinusOne
                  ? "half_minus_one"
                  : "d_model"},
             {"offset", absl::StrCat(pc.sinusoidal_offset)}},
            {},
            /*extrapolates=*/true,
            config_.max_positions,
            {"input"}};
  }

 private:
  ModelConfig config_;
  at::ScalarType dtype_;
  at::Tensor table_;  // [rows, D]
};

// BERT-style trained table pos_embedding [P, D]; positions must be < P (the
// encoder rejects longer inputs before calling).
class LearnedScheme : public PositionalScheme {
 public:
  LearnedScheme(const ModelConfig& config, at::Tensor table)
      : max_positions_(config.max_positions), table_(std::move(table)) {}

  at::Tensor AddToInput(const at::Tensor& x,
                        const at::Tensor& positions) const override {
    return x + at::embedding(table_, positions);
  }
  at::Tensor InputCode(const at::Tensor& positions) const override {
    return at::embedding(table_, positions);
  }
  std::map<std::string, at::Tensor> Parameters() const override {
    return {{"pos_embedding.weight", table_}};
  }
  SchemeDescription Describe() const override {
    return {"learned",
            {{"table", absl::StrCat(max_positions_, "x", table_.size(1))}},
            {},
            /*extrapolates=*/false,
            max_positions_,
            {"input"}};
  }

 private:
  int64_t max_positions_;
  at::Tensor table_;  // [P, D]
};

// RoFormer rotary codes on q and k; angles in float64 so that shifting every
// position by a constant leaves scores unchanged to float32 rounding.
class RopeScheme : public PositionalScheme {
 public:
  explicit RopeScheme(const ModelConfig& config) : config_(config) {}

  void RotateQk(at::Tensor& q, at::Tensor& k, const at::Tensor& positions,
                int64_t layer) const override {
    const std::vector<double>& bases = config_.arch.layer_rope_base;
    const double base = bases.empty() ? config_.positional.base : bases[layer];
    auto [cos, sin] = RopeCosSin(positions, q.size(-1), base, q.scalar_type());
    q = RopeRotate(q, cos, sin, config_.positional.rope_layout);
    k = RopeRotate(k, cos, sin, config_.positional.rope_layout);
  }

  SchemeDescription Describe() const override {
    SchemeDescription d = {
        "rope",
        {{"base", Num(config_.positional.base)},
         {"layout", config_.positional.rope_layout == RopeLayout::kHalf
                        ? "half"
                        : "interleaved"},
         {"rotary_dim", absl::StrCat(config_.head_dim())}},
        {},
        /*extrapolates=*/true,
        config_.max_positions,
        {"query_key"}};
    if (!config_.arch.layer_rope_base.empty()) {
      std::string bases;
      for (double b : config_.arch.layer_rope_base) {
        absl::StrAppend(&bases, bases.empty() ? "" : ",", Num(b));
      }
      d.params["layer_bases"] = bases;
    }
    return d;
  }

 private:
  ModelConfig config_;
};

// ALiBi, bidirectional: bias_h(i, j) = -m_h |i - j|.
class AlibiScheme : public PositionalScheme {
 public:
  AlibiScheme(const ModelConfig& config, at::Device device)
      : config_(config), slopes_list_(AlibiSlopes(config.num_heads)) {
    slopes_ = at::tensor(slopes_list_, at::kDouble)
                  .to(device)
                  .view({1, config.num_heads, 1, 1});
  }

  at::Tensor AttentionBias(const at::Tensor& query_positions,
                           const at::Tensor& key_positions,
                           at::ScalarType dtype) const override {
    at::Tensor distance =
        (query_positions.unsqueeze(-1) - key_positions.unsqueeze(-2))
            .abs()
            .to(at::kDouble)
            .unsqueeze(1);  // [B, 1, Sq, Sk]
    return (-slopes_ * distance).to(dtype);
  }

  SchemeDescription Describe() const override {
    return {"alibi",
            {{"form", "bidirectional"}},
            slopes_list_,
            /*extrapolates=*/true,
            config_.max_positions,
            {"logits"}};
  }

 private:
  ModelConfig config_;
  std::vector<double> slopes_list_;
  at::Tensor slopes_;  // [1, H, 1, 1] float64
};

// T5 relative bias: bias_h(i, j) = table[bucket(j - i), h], shared by layers.
class RelativeScheme : public PositionalScheme {
 public:
  RelativeScheme(const ModelConfig& config, at::Tensor table)
      : config_(config), table_(std::move(table)) {}

  at::Tensor AttentionBias(const at::Tensor& query_positions,
                           const at::Tensor& key_positions,
                           at::ScalarType dtype) const override {
    at::Tensor relative =
        key_positions.unsqueeze(-2) - query_positions.unsqueeze(-1);
    at::Tensor buckets =
        RelativeBuckets(relative, config_.positional.num_buckets,
                        config_.positional.max_distance);  // [B, Sq, Sk]
    return at::embedding(table_, buckets).permute({0, 3, 1, 2}).to(dtype);
  }

  std::map<std::string, at::Tensor> Parameters() const override {
    return {{"relative_attention_bias.weight", table_}};
  }

  SchemeDescription Describe() const override {
    return {"relative",
            {{"num_buckets", absl::StrCat(config_.positional.num_buckets)},
             {"max_distance", absl::StrCat(config_.positional.max_distance)},
             {"bidirectional", "true"},
             {"shared_across_layers", "true"}},
            {},
            /*extrapolates=*/true,
            config_.max_positions,
            {"logits"}};
  }

 private:
  ModelConfig config_;
  at::Tensor table_;  // [num_buckets, H]
};

// MPNet: a learned table at the input and T5 buckets on the logits. Both
// parts are the schemes above; the description joins theirs. The table is
// read at the given positions (RoBERTa's numbering, which skips padding
// ids); the buckets count plain sequence indices, as MPNetEncoder computes
// its bias from arange(seq) whatever the position ids.
class LearnedRelativeScheme : public PositionalScheme {
 public:
  LearnedRelativeScheme(const ModelConfig& config, at::Tensor table,
                        at::Tensor bias_table)
      : learned_(config, std::move(table)),
        relative_(config, std::move(bias_table)) {}

  at::Tensor AddToInput(const at::Tensor& x,
                        const at::Tensor& positions) const override {
    return learned_.AddToInput(x, positions);
  }
  at::Tensor InputCode(const at::Tensor& positions) const override {
    return learned_.InputCode(positions);
  }
  at::Tensor AttentionBias(const at::Tensor& query_positions,
                           const at::Tensor& key_positions,
                           at::ScalarType dtype) const override {
    auto index = [](const at::Tensor& positions) {
      return at::arange(positions.size(-1), positions.options())
          .expand_as(positions);
    };
    return relative_.AttentionBias(index(query_positions), index(key_positions),
                                   dtype);
  }
  std::map<std::string, at::Tensor> Parameters() const override {
    std::map<std::string, at::Tensor> p = learned_.Parameters();
    p.merge(relative_.Parameters());
    return p;
  }
  SchemeDescription Describe() const override {
    SchemeDescription d = learned_.Describe();
    const SchemeDescription r = relative_.Describe();
    d.name = "learned_relative";
    d.params.insert(r.params.begin(), r.params.end());
    d.hooks.insert(d.hooks.end(), r.hooks.begin(), r.hooks.end());
    return d;
  }

 private:
  LearnedScheme learned_;
  RelativeScheme relative_;
};

}  // namespace

std::map<std::string, std::vector<int64_t>> SchemeParameterShapes(
    const ModelConfig& config) {
  switch (config.positional.type) {
    case SchemeType::kLearned:
      return {{"pos_embedding.weight", {config.max_positions, config.d_model}}};
    case SchemeType::kRelative:
      return {{"relative_attention_bias.weight",
               {config.positional.num_buckets, config.num_heads}}};
    case SchemeType::kLearnedRelative:
      return {{"pos_embedding.weight", {config.max_positions, config.d_model}},
              {"relative_attention_bias.weight",
               {config.positional.num_buckets, config.num_heads}}};
    default:
      return {};
  }
}

absl::StatusOr<std::unique_ptr<PositionalScheme>> MakePositionalScheme(
    const ModelConfig& config, const std::map<std::string, at::Tensor>& params,
    at::Device device, at::ScalarType dtype) {
  auto param = [&](const std::string& name) -> absl::StatusOr<at::Tensor> {
    auto it = params.find(name);
    if (it == params.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("missing tensor \"", name, "\" for scheme ",
                       SchemeName(config.positional.type)));
    }
    return it->second.to(device, dtype).contiguous();
  };
  switch (config.positional.type) {
    case SchemeType::kNone:
      return std::make_unique<NoneScheme>();
    case SchemeType::kSinusoidal:
      return std::make_unique<SinusoidalScheme>(config, device, dtype);
    case SchemeType::kLearned: {
      ASSIGN_OR_RETURN(auto table, param("pos_embedding.weight"));
      return std::make_unique<LearnedScheme>(config, table);
    }
    case SchemeType::kRope:
      return std::make_unique<RopeScheme>(config);
    case SchemeType::kAlibi:
      return std::make_unique<AlibiScheme>(config, device);
    case SchemeType::kRelative: {
      ASSIGN_OR_RETURN(auto table, param("relative_attention_bias.weight"));
      return std::make_unique<RelativeScheme>(config, table);
    }
    case SchemeType::kLearnedRelative: {
      ASSIGN_OR_RETURN(auto table, param("pos_embedding.weight"));
      ASSIGN_OR_RETURN(auto bias, param("relative_attention_bias.weight"));
      return std::make_unique<LearnedRelativeScheme>(config, table, bias);
    }
  }
  return absl::InvalidArgumentError("unknown positional scheme");
}

}  // namespace encoder::model
