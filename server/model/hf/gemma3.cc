// Gemma 3 text models (model_type gemma3_text), as in transformers'
// modeling_gemma3: EmbeddingGemma's encoder and the Gemma 3 decoders.
// Pre-norm layers that also normalize the attention and feed-forward
// outputs (four RMSNorms a layer, each scaling by 1 + its stored weight),
// per-head q/k norms, grouped key/value heads, a GeGLU feed-forward, the
// embeddings times sqrt(hidden_size), scores divided by
// sqrt(query_pre_attn_scalar). Layers are full_attention or
// sliding_attention (layer_types), each type with its own rotary base and
// scaling; use_bidirectional_attention (EmbeddingGemma) lets every token
// see both sides, the sliding layers within |i - j| <= sliding_window / 2
// (transformers halves the window of a bidirectional config at load).
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/common/status_macros.h"
#include "server/model/hf/decoder.h"
#include "server/model/hf/importer.h"
#include "server/model/hf/rope_config.h"
#include "server/model/positional/schemes.h"

namespace encoder::model::hf {
namespace {

struct LayerRope {
  PositionalConfig full, sliding;
};

// The rotary code of each layer type. transformers 5: rope_parameters
// {"full_attention": {...}, "sliding_attention": {...}}; 4.x: rope_theta
// and rope_scaling for the full layers, rope_local_base_freq (unscaled)
// for the sliding ones.
absl::StatusOr<LayerRope> ReadLayerRope(const nlohmann::json& config,
                                        const ConfigReader& r,
                                        int64_t max_positions) {
  LayerRope out;
  const nlohmann::json* nested = nullptr;
  // Nested when any entry is an object (a layer type's parameters).
  if (r.Has("rope_parameters") && config["rope_parameters"].is_object()) {
    for (const auto& [key, p] : config["rope_parameters"].items()) {
      if (p.is_object()) nested = &config["rope_parameters"];
    }
  }
  if (nested != nullptr) {
    for (const auto& [key, p] : nested->items()) {
      if (key != "full_attention" && key != "sliding_attention") {
        return absl::InvalidArgumentError(
            absl::StrCat("config.json rope_parameters has \"", key,
                         "\"; Gemma 3's are per layer type: full_attention and "
                         "sliding_attention"));
      }
    }
    const nlohmann::json none;
    auto entry = [&](const char* key) -> const nlohmann::json& {
      return nested->contains(key) ? (*nested)[key] : none;
    };
    // Each entry on its type's default base (Gemma3TextConfig: 1e6 full,
    // 1e4 sliding) when it gives no rope_theta.
    RETURN_IF_ERROR(ReadLayerTypeRope(config, "full_attention",
                                      entry("full_attention"), 1e6,
                                      max_positions, &out.full));
    RETURN_IF_ERROR(ReadLayerTypeRope(config, "sliding_attention",
                                      entry("sliding_attention"), 1e4,
                                      max_positions, &out.sliding));
    return out;
  }
  nlohmann::json global = config;
  if (!r.Has("rope_theta")) global["rope_theta"] = 1e6;
  RETURN_IF_ERROR(
      ReadRope(global, ConfigReader(global), max_positions, &out.full));
  out.sliding.base = r.NumberOr("rope_local_base_freq", 1e4);
  return out;
}

// Which layers slide: layer_types, else every layer but each
// sliding_window_pattern-th (6 by default).
absl::StatusOr<std::vector<bool>> SlidingLayers(const nlohmann::json& config,
                                                const ConfigReader& r,
                                                int64_t layers) {
  std::vector<bool> sliding;
  if (r.Has("layer_types")) {
    ASSIGN_OR_RETURN(auto windows, WindowsFromLayerTypes(config, layers, 2));
    for (int64_t w : windows) sliding.push_back(w > 0);
    return sliding;
  }
  const int64_t pattern =
      r.IntOr("sliding_window_pattern", r.IntOr("_sliding_window_pattern", 6));
  if (pattern < 1) {
    return absl::InvalidArgumentError(
        "config.json sliding_window_pattern must be >= 1");
  }
  for (int64_t i = 0; i < layers; ++i) {
    sliding.push_back((i + 1) % pattern != 0);
  }
  return sliding;
}

absl::Status ReadGemmaConfig(const nlohmann::json& config,
                             const ConfigReader& r, ModelConfig* c) {
  RETURN_IF_ERROR(ReadDecoderSizes(r, c));
  if (r.Has("attn_logit_softcapping")) {
    return absl::InvalidArgumentError(
        "config.json attn_logit_softcapping is not served (null only)");
  }
  ASSIGN_OR_RETURN(auto act, ParseActivation(r.StringOr("hidden_activation",
                                                        "gelu_pytorch_tanh")));
  c->activation = act;
  c->layer_norm_eps = r.NumberOr("rms_norm_eps", 1e-6);
  c->max_positions = r.IntOr("max_position_embeddings", 131072);
  c->max_input_tokens = c->max_positions;
  c->norm_first = true;
  c->embedding_scale = true;
  ArchOptions& a = c->arch;
  a.norm = NormKind::kRmsNorm;
  a.norm_bias = false;
  a.sandwich_norm = true;
  a.gated_ffn = true;
  a.ffn_in_bias = a.ffn_out_bias = false;
  a.attention_bias = a.attention_out_bias = r.BoolOr("attention_bias", false);
  a.qk_norm = true;
  a.causal = !r.BoolOr("use_bidirectional_attention", false);
  c->pooling = a.causal ? Pooling::kLastToken : Pooling::kMean;
  a.head_dim = r.IntOr("head_dim", 256);
  a.score_dim = r.IntOr("query_pre_attn_scalar", 256);
  if (a.head_dim < 1 || a.head_dim > kMaxConfigSize || a.score_dim < 1) {
    return absl::InvalidArgumentError(
        "config.json head_dim and query_pre_attn_scalar must be positive");
  }
  ASSIGN_OR_RETURN(const std::optional<int64_t> window,
                   ReadSlidingWindow(config, 4096));
  ASSIGN_OR_RETURN(const std::vector<bool> sliding,
                   SlidingLayers(config, r, c->num_layers));
  ASSIGN_OR_RETURN(const LayerRope rope,
                   ReadLayerRope(config, r, c->max_positions));
  c->positional = RopeConfig(RopeLayout::kHalf, rope.full.base);
  c->positional.rope_scaling = rope.full.rope_scaling;
  for (bool s : sliding) {
    if (s && !window.has_value()) {
      return absl::InvalidArgumentError(
          "config.json has sliding_attention layers but sliding_window is "
          "null");
    }
    if (s && *window < 2) {
      return absl::InvalidArgumentError(
          "config.json sliding_window 1 (each token seeing only itself) is "
          "not served");
    }
    // Causal: kv > q - w, so |i - j| <= w - 1 beside the causal mask.
    // Bidirectional: Gemma3TextConfig reads w as w // 2 + 1 (both
    // generations, at every load) and masks |q - kv| < w // 2 + 1.
    a.layer_window.push_back(!s ? 0 : a.causal ? *window - 1 : *window / 2);
    const PositionalConfig& p = s ? rope.sliding : rope.full;
    a.layer_rope_base.push_back(p.base);
    a.layer_rope_scaling.push_back(p.rope_scaling);
  }
  return absl::OkStatus();
}

// A Gemma RMSNorm's stored weight w scales by 1 + w.
void AddGemmaNorm(Import* import, const std::string& slot,
                  const std::string& name, int64_t width) {
  AddSlot(import, slot, name, {width});
  import->slots[slot].add = 1.0;
}

}  // namespace

absl::StatusOr<Import> ImportGemma3Text(const nlohmann::json& config,
                                        const WeightSource& source) {
  ConfigReader r(config);
  Import import;
  import.family = "gemma3_text";
  ModelConfig& c = import.config;
  RETURN_IF_ERROR(ReadGemmaConfig(config, r, &c));
  const std::string p =
      DetectPrefix(source, {"model.", ""}, "embed_tokens.weight");
  const int64_t dm = c.d_model, f = c.d_ff;
  const int64_t qd = c.head_dim() * c.num_heads;
  const int64_t kd = c.head_dim() * c.kv_heads();
  AddSlot(&import, "embedding.weight", p + "embed_tokens.weight",
          {c.vocab_size, dm});
  for (int64_t i = 0; i < c.num_layers; ++i) {
    const std::string l = absl::StrCat(p, "layers.", i, ".");
    const std::string attn = l + "self_attn.";
    AddGemmaNorm(&import, LayerSlot(i, "norm1.weight"),
                 l + "input_layernorm.weight", dm);
    AddGemmaNorm(&import, LayerSlot(i, "norm3.weight"),
                 l + "post_attention_layernorm.weight", dm);
    AddGemmaNorm(&import, LayerSlot(i, "norm2.weight"),
                 l + "pre_feedforward_layernorm.weight", dm);
    AddGemmaNorm(&import, LayerSlot(i, "norm4.weight"),
                 l + "post_feedforward_layernorm.weight", dm);
    AddGemmaNorm(&import, LayerSlot(i, "self_attn.q_norm.weight"),
                 attn + "q_norm.weight", c.head_dim());
    AddGemmaNorm(&import, LayerSlot(i, "self_attn.k_norm.weight"),
                 attn + "k_norm.weight", c.head_dim());
    AddConcatSlot(&import, LayerSlot(i, "self_attn.in_proj_weight"),
                  {attn + "q_proj.weight", attn + "k_proj.weight",
                   attn + "v_proj.weight"},
                  {{qd, dm}, {kd, dm}, {kd, dm}});
    AddSlot(&import, LayerSlot(i, "self_attn.out_proj.weight"),
            attn + "o_proj.weight", {dm, qd});
    if (c.arch.attention_bias) {
      AddConcatSlot(
          &import, LayerSlot(i, "self_attn.in_proj_bias"),
          {attn + "q_proj.bias", attn + "k_proj.bias", attn + "v_proj.bias"},
          {{qd}, {kd}, {kd}});
      AddSlot(&import, LayerSlot(i, "self_attn.out_proj.bias"),
              attn + "o_proj.bias", {dm});
    }
    AddConcatSlot(&import, LayerSlot(i, "linear1.weight"),
                  {l + "mlp.gate_proj.weight", l + "mlp.up_proj.weight"},
                  {{f, dm}, {f, dm}});
    AddSlot(&import, LayerSlot(i, "linear2.weight"), l + "mlp.down_proj.weight",
            {dm, f});
  }
  AddGemmaNorm(&import, "encoder.norm.weight", p + "norm.weight", dm);
  import.ignored_prefixes = {"lm_head.", "score."};
  return import;
}

}  // namespace encoder::model::hf
