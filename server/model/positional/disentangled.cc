// DeBERTa-v2/v3 disentangled attention (docs/positional-encodings.md
// #disentangled): content-to-position and position-to-content terms on the
// logits, optionally a learned table at the input.
#include <cmath>
#include <optional>

#include "absl/strings/str_cat.h"
#include "server/common/status_macros.h"
#include "server/model/positional/learned.h"
#include "server/model/positional/pe_math.h"
#include "server/model/positional/schemes.h"

namespace encoder::model {
namespace {

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

absl::StatusOr<std::unique_ptr<PositionalScheme>> Make(
    const ModelConfig& config, const std::map<std::string, at::Tensor>& params,
    at::Device device, at::ScalarType dtype) {
  ASSIGN_OR_RETURN(auto scheme,
                   DisentangledScheme::Create(config, params, device, dtype));
  return scheme;
}

std::map<std::string, std::vector<int64_t>> Shapes(const ModelConfig& config) {
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

absl::Status Validate(const ModelConfig& c) {
  const PositionalConfig& pc = c.positional;
  if (c.kv_heads() != c.num_heads) {
    return absl::InvalidArgumentError(
        "disentangled attention needs a key head per query head");
  }
  if (pc.max_relative_positions < 1) {
    return absl::InvalidArgumentError(
        "positional.max_relative_positions must be >= 1");
  }
  if (pc.position_buckets < 0 ||
      (pc.position_buckets > 0 &&
       (pc.position_buckets < 2 ||
        pc.max_relative_positions - 1 <= pc.position_buckets / 2))) {
    return absl::InvalidArgumentError(
        "positional.position_buckets must be 0, or >= 2 with "
        "max_relative_positions - 1 above position_buckets / 2");
  }
  return absl::OkStatus();
}

// idx = clamp(bucket(i - j) + span, 0, 2 span - 1) stops changing once
// bucket(r) reaches span - 1, at r = max_relative_positions - 1 (both with
// and without log buckets). An input table bounds the length instead.
void Reach(const ModelConfig& c, SchemeReach* r) {
  const PositionalConfig& p = c.positional;
  if (p.absolute_input) return;
  r->bucket_saturation_distance = p.max_relative_positions - 1;
  if (r->bucket_saturation_distance < c.max_length()) {
    r->distance_only_reason = absl::StrCat(
        "disentangled attention's relative positions saturate from "
        "distance ",
        r->bucket_saturation_distance);
  }
}

}  // namespace

PositionalConfig DisentangledConfig() {
  PositionalConfig p;
  p.type = SchemeType::kDisentangled;
  return p;
}

const SchemeEntry& DisentangledEntry() {
  static const SchemeEntry entry = [] {
    SchemeEntry e;
    e.traits.type = SchemeType::kDisentangled;
    e.traits.name = "disentangled";
    e.traits.structure = ExpectedStructure::kDisentangled;
    e.traits.table_bounds_length = [](const PositionalConfig& p) {
      return p.absolute_input;
    };
    e.traits.score_scale_factor = [](const PositionalConfig& p) -> int64_t {
      return 1 + (p.c2p ? 1 : 0) + (p.p2c ? 1 : 0);
    };
    e.traits.content_bias_rows = [](const PositionalConfig& p) -> int64_t {
      return 2 * p.relative_span();
    };
    e.traits.validate = Validate;
    e.traits.reach = Reach;
    e.make = Make;
    e.parameter_shapes = Shapes;
    return e;
  }();
  return entry;
}

}  // namespace encoder::model
