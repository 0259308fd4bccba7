#include "server/model/hf/decoder.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "server/common/status_macros.h"
#include "server/model/hf/rope_config.h"
#include "server/model/positional/schemes.h"

namespace encoder::model::hf {
namespace {

// Sizes, norms, attention heads and the rotary code.
absl::Status ReadDecoderConfig(const nlohmann::json& config,
                               const DecoderLayout& layout, ModelConfig* c) {
  ConfigReader r(config);
  RETURN_IF_ERROR(ReadDecoderSizes(r, c));
  ASSIGN_OR_RETURN(auto act, ParseActivation(r.StringOr("hidden_act", "silu")));
  c->activation = act;
  c->layer_norm_eps = r.NumberOr("rms_norm_eps", 1e-6);
  c->max_positions =
      r.IntOr("max_position_embeddings", layout.default_max_positions);
  c->max_input_tokens = c->max_positions;
  c->norm_first = true;  // and a final norm
  c->pooling = Pooling::kLastToken;
  ArchOptions& a = c->arch;
  a.norm = NormKind::kRmsNorm;
  a.norm_bias = false;
  a.gated_ffn = true;
  a.ffn_in_bias = a.ffn_out_bias = layout.mlp_bias;
  a.causal = true;
  a.head_dim = r.IntOr("head_dim", layout.default_head_dim);
  if (a.head_dim < 0 || a.head_dim > kMaxConfigSize) {
    return absl::InvalidArgumentError("config.json head_dim is out of range");
  }
  a.attention_bias = layout.qkv_bias;
  a.attention_out_bias = layout.out_bias;
  a.qk_norm = layout.qk_norm;
  if (std::any_of(layout.windows.begin(), layout.windows.end(),
                  [](int64_t w) { return w > 0; })) {
    // A causal window of w keys: |i - j| <= w - 1 beside the causal mask.
    a.layer_window.clear();
    for (int64_t w : layout.windows) {
      if (w == 1) {
        return absl::InvalidArgumentError(
            "config.json sliding_window 1 (each token seeing only itself) is "
            "not served");
      }
      a.layer_window.push_back(w > 0 ? w - 1 : 0);
    }
  }
  c->positional = RopeConfig(RopeLayout::kHalf, c->positional.base);
  return ReadRope(config, r, c->max_positions, &c->positional);
}

void AddLayerSlots(const std::string& p, int64_t i, const ModelConfig& c,
                   const DecoderLayout& layout, Import* import) {
  const int64_t dm = c.d_model, f = c.d_ff;
  const int64_t qd = c.head_dim() * c.num_heads;
  const int64_t kd = c.head_dim() * c.kv_heads();
  const std::string l = absl::StrCat(p, "layers.", i, ".");
  const std::string attn = l + "self_attn.";
  AddSlot(import, LayerSlot(i, "norm1.weight"), l + "input_layernorm.weight",
          {dm});
  AddConcatSlot(
      import, LayerSlot(i, "self_attn.in_proj_weight"),
      {attn + "q_proj.weight", attn + "k_proj.weight", attn + "v_proj.weight"},
      {{qd, dm}, {kd, dm}, {kd, dm}});
  if (layout.qkv_bias) {
    AddConcatSlot(
        import, LayerSlot(i, "self_attn.in_proj_bias"),
        {attn + "q_proj.bias", attn + "k_proj.bias", attn + "v_proj.bias"},
        {{qd}, {kd}, {kd}});
  }
  AddSlot(import, LayerSlot(i, "self_attn.out_proj.weight"),
          attn + "o_proj.weight", {dm, qd});
  if (layout.out_bias) {
    AddSlot(import, LayerSlot(i, "self_attn.out_proj.bias"),
            attn + "o_proj.bias", {dm});
  }
  if (layout.qk_norm) {
    AddSlot(import, LayerSlot(i, "self_attn.q_norm.weight"),
            attn + "q_norm.weight", {c.head_dim()});
    AddSlot(import, LayerSlot(i, "self_attn.k_norm.weight"),
            attn + "k_norm.weight", {c.head_dim()});
  }
  AddSlot(import, LayerSlot(i, "norm2.weight"),
          l + "post_attention_layernorm.weight", {dm});
  AddConcatSlot(import, LayerSlot(i, "linear1.weight"),
                {l + "mlp.gate_proj.weight", l + "mlp.up_proj.weight"},
                {{f, dm}, {f, dm}});
  AddSlot(import, LayerSlot(i, "linear2.weight"), l + "mlp.down_proj.weight",
          {dm, f});
  if (layout.mlp_bias) {
    AddConcatSlot(import, LayerSlot(i, "linear1.bias"),
                  {l + "mlp.gate_proj.bias", l + "mlp.up_proj.bias"},
                  {{f}, {f}});
    AddSlot(import, LayerSlot(i, "linear2.bias"), l + "mlp.down_proj.bias",
            {dm});
  }
}

}  // namespace

absl::Status ReadDecoderSizes(const ConfigReader& r, ModelConfig* c) {
  RETURN_IF_ERROR(r.Ints({{"vocab_size", &c->vocab_size},
                          {"hidden_size", &c->d_model},
                          {"num_attention_heads", &c->num_heads},
                          {"num_hidden_layers", &c->num_layers},
                          {"intermediate_size", &c->d_ff}}));
  RETURN_IF_ERROR(CheckLayerCount(c->num_layers));
  c->arch.num_kv_heads = r.IntOr("num_key_value_heads", c->num_heads);
  const int64_t kv = c->arch.num_kv_heads;
  if (kv < 1 || kv > c->num_heads || c->num_heads % kv != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("config.json num_key_value_heads ", kv,
                     " must divide num_attention_heads ", c->num_heads));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::optional<int64_t>> ReadSlidingWindow(
    const nlohmann::json& config, std::optional<int64_t> fallback) {
  if (!config.contains("sliding_window")) return fallback;
  const nlohmann::json& v = config["sliding_window"];
  if (v.is_null()) return std::optional<int64_t>();
  if (!v.is_number_integer() || v.get<int64_t>() < 1 ||
      v.get<int64_t>() > kMaxConfigSize) {
    return absl::InvalidArgumentError(
        absl::StrCat("config.json sliding_window ", v.dump(),
                     " must be a positive integer or null"));
  }
  return std::optional<int64_t>(v.get<int64_t>());
}

absl::StatusOr<std::vector<int64_t>> WindowsFromLayerTypes(
    const nlohmann::json& config, int64_t layers,
    std::optional<int64_t> window) {
  const nlohmann::json& types = config["layer_types"];
  if (!types.is_array() || static_cast<int64_t>(types.size()) != layers) {
    return absl::InvalidArgumentError(absl::StrCat(
        "config.json layer_types must list one type per layer (", layers, ")"));
  }
  std::vector<int64_t> windows;
  for (const nlohmann::json& t : types) {
    const std::string type = t.is_string() ? t.get<std::string>() : t.dump();
    if (type == "full_attention") {
      windows.push_back(0);
    } else if (type == "sliding_attention" && window.has_value()) {
      windows.push_back(*window);
    } else if (type == "sliding_attention") {
      return absl::InvalidArgumentError(
          "config.json layer_types has \"sliding_attention\" but no "
          "sliding_window (null, or use_sliding_window false)");
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("config.json layer_types has \"", type,
                       "\": full_attention and sliding_attention are served"));
    }
  }
  return windows;
}

absl::StatusOr<Import> ImportDecoder(const nlohmann::json& config,
                                     const WeightSource& source,
                                     const DecoderLayout& layout) {
  Import import;
  import.family = layout.family;
  ModelConfig& c = import.config;
  RETURN_IF_ERROR(ReadDecoderConfig(config, layout, &c));
  if (!layout.windows.empty() &&
      static_cast<int64_t>(layout.windows.size()) != c.num_layers) {
    return absl::InternalError("decoder windows do not match the layers");
  }
  const std::string p =
      DetectPrefix(source, {"model.", ""}, "embed_tokens.weight");
  AddSlot(&import, "embedding.weight", p + "embed_tokens.weight",
          {c.vocab_size, c.d_model});
  for (int64_t i = 0; i < c.num_layers; ++i) {
    AddLayerSlots(p, i, c, layout, &import);
  }
  AddSlot(&import, "encoder.norm.weight", p + "norm.weight", {c.d_model});
  // The language-model and classification heads are not the encoder's.
  import.ignored_prefixes = {"lm_head.", "score."};
  return import;
}

}  // namespace encoder::model::hf
