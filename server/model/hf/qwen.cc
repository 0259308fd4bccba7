// Qwen2 and Qwen3, as in transformers' modeling_qwen2 and modeling_qwen3:
// decoder-only embedders. Causal attention, rotary codes (half layout) with
// the checkpoint's rope_theta, grouped-query attention, RMSNorm before
// attention and feed-forward and at the end, a SwiGLU feed-forward, no
// embedding norm. Qwen2 biases its q, k and v projections; Qwen3 biases
// none (attention_bias) and RMS-normalizes each head's queries and keys.
// The pooled vector is the last token's, the one that has seen the whole
// input (Qwen3-Embedding's sentence-transformers files say so too).
#include "absl/strings/str_cat.h"
#include "server/common/status_macros.h"
#include "server/model/hf/importer.h"
#include "server/model/hf/rope_config.h"
#include "server/model/positional/schemes.h"

namespace encoder::model::hf {
namespace {

// Sliding-window layers are refused: the window would change what each
// token sees, and no embedder of these families uses one.
absl::Status CheckNoSlidingWindow(const nlohmann::json& config,
                                  const ConfigReader& r) {
  bool sliding = r.BoolOr("use_sliding_window", false);
  if (r.Has("layer_types") && config["layer_types"].is_array()) {
    for (const auto& t : config["layer_types"]) {
      sliding = sliding || (t.is_string() && t.get<std::string>() != "" &&
                            t.get<std::string>() != "full_attention");
    }
  }
  if (sliding) {
    return absl::InvalidArgumentError(
        "config.json asks for sliding-window attention (use_sliding_window "
        "or layer_types); only full causal attention is served");
  }
  return absl::OkStatus();
}

absl::StatusOr<Import> ImportQwen(const nlohmann::json& config,
                                  const WeightSource& source, bool qwen3) {
  ConfigReader r(config);
  Import import;
  import.family = qwen3 ? "qwen3" : "qwen2";
  ModelConfig& c = import.config;
  RETURN_IF_ERROR(r.Ints({{"vocab_size", &c.vocab_size},
                          {"hidden_size", &c.d_model},
                          {"num_attention_heads", &c.num_heads},
                          {"num_hidden_layers", &c.num_layers},
                          {"intermediate_size", &c.d_ff}}));
  RETURN_IF_ERROR(CheckLayerCount(c.num_layers));
  RETURN_IF_ERROR(CheckNoSlidingWindow(config, r));
  ASSIGN_OR_RETURN(auto act, ParseActivation(r.StringOr("hidden_act", "silu")));
  c.activation = act;
  c.layer_norm_eps = r.NumberOr("rms_norm_eps", 1e-6);
  c.max_positions = r.IntOr("max_position_embeddings", 32768);
  c.max_input_tokens = c.max_positions;
  c.norm_first = true;  // and a final norm
  c.pooling = Pooling::kLastToken;
  ArchOptions& a = c.arch;
  a.norm = NormKind::kRmsNorm;
  a.norm_bias = false;
  a.gated_ffn = true;
  a.ffn_in_bias = a.ffn_out_bias = false;
  a.causal = true;
  a.num_kv_heads = r.IntOr("num_key_value_heads", c.num_heads);
  if (a.num_kv_heads < 1 || a.num_kv_heads > c.num_heads ||
      c.num_heads % a.num_kv_heads != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("config.json num_key_value_heads ", a.num_kv_heads,
                     " must divide num_attention_heads ", c.num_heads));
  }
  if (qwen3) {
    a.head_dim = r.IntOr("head_dim", 128);  // Qwen3Config's default
    a.attention_bias = r.BoolOr("attention_bias", false);
    a.qk_norm = true;
  } else {
    // Qwen2Attention: getattr(config, "head_dim", hidden / heads).
    a.head_dim = r.IntOr("head_dim", 0);
    a.attention_bias = true;  // q, k and v only
    a.attention_out_bias = false;
  }
  if (a.head_dim < 0 || a.head_dim > kMaxConfigSize) {
    return absl::InvalidArgumentError("config.json head_dim is out of range");
  }
  c.positional = RopeConfig(RopeLayout::kHalf, c.positional.base);
  RETURN_IF_ERROR(ReadRope(config, r, c.max_positions, &c.positional));

  const std::string p =
      DetectPrefix(source, {"model.", ""}, "embed_tokens.weight");
  const int64_t dm = c.d_model, f = c.d_ff;
  const int64_t qd = c.head_dim() * c.num_heads;
  const int64_t kd = c.head_dim() * a.num_kv_heads;
  AddSlot(&import, "embedding.weight", p + "embed_tokens.weight",
          {c.vocab_size, dm});
  for (int64_t i = 0; i < c.num_layers; ++i) {
    const std::string l = absl::StrCat(p, "layers.", i, ".");
    const std::string attn = l + "self_attn.";
    AddSlot(&import, LayerSlot(i, "norm1.weight"), l + "input_layernorm.weight",
            {dm});
    AddConcatSlot(&import, LayerSlot(i, "self_attn.in_proj_weight"),
                  {attn + "q_proj.weight", attn + "k_proj.weight",
                   attn + "v_proj.weight"},
                  {{qd, dm}, {kd, dm}, {kd, dm}});
    if (a.attention_bias) {
      AddConcatSlot(
          &import, LayerSlot(i, "self_attn.in_proj_bias"),
          {attn + "q_proj.bias", attn + "k_proj.bias", attn + "v_proj.bias"},
          {{qd}, {kd}, {kd}});
    }
    AddSlot(&import, LayerSlot(i, "self_attn.out_proj.weight"),
            attn + "o_proj.weight", {dm, qd});
    if (a.attention_bias && a.attention_out_bias) {
      AddSlot(&import, LayerSlot(i, "self_attn.out_proj.bias"),
              attn + "o_proj.bias", {dm});
    }
    if (a.qk_norm) {
      AddSlot(&import, LayerSlot(i, "self_attn.q_norm.weight"),
              attn + "q_norm.weight", {c.head_dim()});
      AddSlot(&import, LayerSlot(i, "self_attn.k_norm.weight"),
              attn + "k_norm.weight", {c.head_dim()});
    }
    AddSlot(&import, LayerSlot(i, "norm2.weight"),
            l + "post_attention_layernorm.weight", {dm});
    AddConcatSlot(&import, LayerSlot(i, "linear1.weight"),
                  {l + "mlp.gate_proj.weight", l + "mlp.up_proj.weight"},
                  {{f, dm}, {f, dm}});
    AddSlot(&import, LayerSlot(i, "linear2.weight"), l + "mlp.down_proj.weight",
            {dm, f});
  }
  AddSlot(&import, "encoder.norm.weight", p + "norm.weight", {dm});
  // The language-model and classification heads are not the encoder's.
  import.ignored_prefixes = {"lm_head.", "score."};
  return import;
}

}  // namespace

absl::StatusOr<Import> ImportQwen2(const nlohmann::json& config,
                                   const WeightSource& source) {
  return ImportQwen(config, source, /*qwen3=*/false);
}

absl::StatusOr<Import> ImportQwen3(const nlohmann::json& config,
                                   const WeightSource& source) {
  return ImportQwen(config, source, /*qwen3=*/true);
}

}  // namespace encoder::model::hf
