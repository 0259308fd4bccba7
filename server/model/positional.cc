#include "server/model/positional.h"

#include <algorithm>
#include <cmath>
#include <optional>

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

at::Tensor PositionalScheme::ContentBias(const at::Tensor& q,
                                         const at::Tensor& k,
                                         const at::Tensor& positions,
                                         int64_t layer) const {
  (void)q;
  (void)k;
  (void)positions;
  (void)layer;
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
    auto [cos, sin] = RopeCosSin(positions, q.size(-1), base, q.scalar_type(),
                                 config_.positional.rope_scaling);
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
    const RopeScaling& s = config_.positional.rope_scaling;
    if (s.type != RopeScalingType::kNone) {
      d.params["scaling"] = RopeScalingName(s.type);
      d.params["scaling_factor"] = Num(s.factor);
      d.params["attention_factor"] = Num(s.attention_factor);
    }
    if (s.type == RopeScalingType::kYarn ||
        s.type == RopeScalingType::kLlama3) {
      d.params["original_max_positions"] =
          absl::StrCat(s.original_max_positions);
    }
    if (s.type == RopeScalingType::kYarn) {
      d.params["beta_fast"] = Num(s.beta_fast);
      d.params["beta_slow"] = Num(s.beta_slow);
    }
    if (s.type == RopeScalingType::kLlama3) {
      d.params["low_freq_factor"] = Num(s.low_freq_factor);
      d.params["high_freq_factor"] = Num(s.high_freq_factor);
    }
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

// The layer's projection names of disentangled attention without shared
// keys.
std::string PosProjName(int64_t layer, const char* which, const char* leaf) {
  return absl::StrCat("encoder.layers.", layer, ".self_attn.", which, ".",
                      leaf);
}

// DeBERTa-v2/v3 disentangled attention (transformers' modeling_deberta_v2):
// with R the relative embeddings [2 span, D] (LayerNorm'd), each layer's
// position keys P_k = R W_k^T + b_k and queries P_q = R W_q^T + b_q (its own
// projections when share_att_key, else pos_key_proj / pos_query_proj),
// idx(i, j) = clamp(bucket(p_i - p_j) + span, 0, 2 span - 1), and
//   c2p(i, j) = q_i . P_k[idx(i, j)],  p2c(i, j) = k_j . P_q[idx(i, j)],
// both added to q_i . k_j and divided by sqrt(head_dim x (1 + terms)).
// P_k and P_q depend on weights only: computed once per layer at load.
class DisentangledScheme : public PositionalScheme {
 public:
  static absl::StatusOr<std::unique_ptr<DisentangledScheme>> Create(
      const ModelConfig& config,
      const std::map<std::string, at::Tensor>& params, at::Device device,
      at::ScalarType dtype) {
    const PositionalConfig& pc = config.positional;
    std::unique_ptr<DisentangledScheme> s(new DisentangledScheme(config));
    // A trained tensor of the scheme's own: kept as loaded (counted by
    // Parameters()) and returned in float32 for the products below.
    // Undefined when absent and not `required`.
    auto own = [&](const std::string& name,
                   bool required) -> absl::StatusOr<at::Tensor> {
      auto it = params.find(name);
      if (it == params.end()) {
        if (!required) return at::Tensor();
        return absl::InvalidArgumentError(absl::StrCat(
            "missing tensor \"", name, "\" for scheme disentangled"));
      }
      s->own_[name] = it->second;
      return it->second.to(at::kFloat);
    };
    // The layer's own projections, counted by the encoder, not here.
    auto layer = [&](const std::string& name) -> at::Tensor {
      auto it = params.find(name);
      return it == params.end() ? at::Tensor() : it->second.to(at::kFloat);
    };
    ASSIGN_OR_RETURN(at::Tensor rel, own("rel_embeddings.weight", true));
    if (pc.relative_norm) {
      ASSIGN_OR_RETURN(at::Tensor g, own("rel_embeddings_norm.weight", true));
      ASSIGN_OR_RETURN(at::Tensor b, own("rel_embeddings_norm.bias", true));
      rel = at::layer_norm(rel, {config.d_model}, g, b, config.layer_norm_eps);
    }
    if (pc.absolute_input) {
      auto it = params.find("pos_embedding.weight");
      if (it == params.end()) {
        return absl::InvalidArgumentError(
            "missing tensor \"pos_embedding.weight\" for scheme "
            "disentangled");
      }
      s->table_.emplace(config, it->second.to(device, dtype).contiguous());
    }
    const int64_t a = config.attention_dim(), kv = config.kv_dim();
    const int64_t h = config.num_heads, d = config.head_dim();
    // [2 span, A] -> [H, 2 span, d], in the serving dtype.
    auto heads = [&](const at::Tensor& rows) {
      return rows.view({rows.size(0), h, d})
          .permute({1, 0, 2})
          .to(device, dtype)
          .contiguous();
    };
    for (int64_t i = 0; i < config.num_layers; ++i) {
      at::Tensor wq, bq, wk, bk;
      if (pc.share_att_key) {
        const std::string attn =
            absl::StrCat("encoder.layers.", i, ".self_attn.");
        const at::Tensor w = layer(attn + "in_proj_weight");
        if (!w.defined()) {
          return absl::InvalidArgumentError(
              absl::StrCat("missing tensor \"", attn, "in_proj_weight\""));
        }
        wq = w.narrow(0, 0, a);
        wk = w.narrow(0, a, kv);
        if (const at::Tensor b = layer(attn + "in_proj_bias"); b.defined()) {
          bq = b.narrow(0, 0, a);
          bk = b.narrow(0, a, kv);
        }
      } else {
        if (pc.c2p) {
          ASSIGN_OR_RETURN(wk,
                           own(PosProjName(i, "pos_key_proj", "weight"), true));
          ASSIGN_OR_RETURN(bk,
                           own(PosProjName(i, "pos_key_proj", "bias"), false));
        }
        if (pc.p2c) {
          ASSIGN_OR_RETURN(
              wq, own(PosProjName(i, "pos_query_proj", "weight"), true));
          ASSIGN_OR_RETURN(
              bq, own(PosProjName(i, "pos_query_proj", "bias"), false));
        }
      }
      s->pos_key_.push_back(pc.c2p ? heads(at::linear(rel, wk, bk))
                                   : at::Tensor());
      s->pos_query_.push_back(pc.p2c ? heads(at::linear(rel, wq, bq))
                                     : at::Tensor());
    }
    return s;
  }

  // The learned input table, when there is one.
  at::Tensor AddToInput(const at::Tensor& x,
                        const at::Tensor& positions) const override {
    return table_ ? table_->AddToInput(x, positions) : x;
  }
  at::Tensor InputCode(const at::Tensor& positions) const override {
    return table_ ? table_->InputCode(positions) : at::Tensor();
  }

  bool has_content_bias() const override { return true; }

  at::Tensor ContentBias(const at::Tensor& q, const at::Tensor& k,
                         const at::Tensor& positions,
                         int64_t layer) const override {
    const PositionalConfig& pc = config_.positional;
    const int64_t b = q.size(0), h = q.size(1), s = q.size(2);
    const int64_t span = pc.relative_span();
    // [B, S, S]: query position minus key position, bucketed.
    at::Tensor rel = positions.unsqueeze(2) - positions.unsqueeze(1);
    if (pc.position_buckets > 0) {
      rel = DebertaLogBuckets(rel, pc.position_buckets,
                              pc.max_relative_positions);
    }
    const at::Tensor idx = (rel + span).clamp(0, 2 * span - 1);
    const double scale = std::sqrt(
        static_cast<double>(q.size(-1) * config_.score_scale_factor()));
    at::Tensor out;
    if (pc.c2p) {
      // [B, H, S, 2 span] -> [B, H, S, S]
      out = at::matmul(q, pos_key_[layer].transpose(-1, -2))
                .gather(-1, idx.unsqueeze(1).expand({b, h, s, s}));
    }
    if (pc.p2c) {
      // Row j of k against every position query, read at idx(i, j).
      at::Tensor p2c =
          at::matmul(k, pos_query_[layer].transpose(-1, -2))
              .gather(-1, idx.transpose(1, 2).unsqueeze(1).expand({b, h, s, s}))
              .transpose(-1, -2);
      out = out.defined() ? out + p2c : p2c;
    }
    return out.defined() ? out / scale : at::zeros({b, h, s, s}, q.options());
  }

  std::map<std::string, at::Tensor> Parameters() const override {
    std::map<std::string, at::Tensor> p = own_;
    if (table_) p.merge(table_->Parameters());
    return p;
  }

  SchemeDescription Describe() const override {
    const PositionalConfig& pc = config_.positional;
    std::string terms = pc.c2p ? "c2p" : "";
    if (pc.p2c) absl::StrAppend(&terms, terms.empty() ? "" : "|", "p2c");
    SchemeDescription d = {
        "disentangled",
        {{"position_buckets", absl::StrCat(pc.position_buckets)},
         {"max_relative_positions", absl::StrCat(pc.max_relative_positions)},
         {"share_att_key", pc.share_att_key ? "true" : "false"},
         {"pos_att_type", terms},
         {"relative_norm", pc.relative_norm ? "true" : "false"},
         {"absolute_input", pc.absolute_input ? "true" : "false"},
         {"scale_factor", absl::StrCat(config_.score_scale_factor())}},
        {},
        /*extrapolates=*/!pc.absolute_input,
        config_.max_positions,
        {"logits"}};
    if (pc.absolute_input) d.hooks.insert(d.hooks.begin(), "input");
    return d;
  }

 private:
  explicit DisentangledScheme(const ModelConfig& config) : config_(config) {}

  ModelConfig config_;
  std::optional<LearnedScheme> table_;  // position_biased_input
  // Per layer [H, 2 span, d]; undefined without the term.
  std::vector<at::Tensor> pos_key_, pos_query_;
  // The scheme's other trained tensors as loaded (relative embeddings,
  // their norm, unshared position projections): counted, never run.
  std::map<std::string, at::Tensor> own_;
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
    case SchemeType::kDisentangled: {
      const PositionalConfig& pc = config.positional;
      const int64_t d = config.d_model, a = config.attention_dim();
      std::map<std::string, std::vector<int64_t>> shapes = {
          {"rel_embeddings.weight", {2 * pc.relative_span(), d}}};
      if (pc.relative_norm) {
        shapes["rel_embeddings_norm.weight"] = {d};
        shapes["rel_embeddings_norm.bias"] = {d};
      }
      if (pc.absolute_input) {
        shapes["pos_embedding.weight"] = {config.max_positions, d};
      }
      for (int64_t i = 0; i < config.num_layers && !pc.share_att_key; ++i) {
        for (const char* which : {"pos_key_proj", "pos_query_proj"}) {
          if (std::string(which) == "pos_key_proj" ? !pc.c2p : !pc.p2c) {
            continue;
          }
          shapes[PosProjName(i, which, "weight")] = {a, d};
          shapes[PosProjName(i, which, "bias")] = {a};
        }
      }
      return shapes;
    }
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
    case SchemeType::kDisentangled: {
      ASSIGN_OR_RETURN(auto scheme, DisentangledScheme::Create(config, params,
                                                               device, dtype));
      return scheme;
    }
  }
  return absl::InvalidArgumentError("unknown positional scheme");
}

}  // namespace encoder::model
