// ModernBERT, as in transformers' modeling_modernbert: pre-norm, no biases
// by default, GeGLU feed-forward, half-layout rotary codes with a global and
// a local base, and sliding-window attention on all but every n-th layer.
#include "absl/strings/str_cat.h"
#include "server/common/status_macros.h"
#include "server/model/hf_importer.h"

namespace encoder::model::hf {

absl::StatusOr<Import> ImportModernBert(const nlohmann::json& config,
                                        const WeightSource& source) {
  ConfigReader r(config);
  Import import;
  import.family = "modernbert";
  ModelConfig& c = import.config;
  RETURN_IF_ERROR(r.Ints({{"vocab_size", &c.vocab_size},
                          {"hidden_size", &c.d_model},
                          {"num_attention_heads", &c.num_heads},
                          {"num_hidden_layers", &c.num_layers},
                          {"intermediate_size", &c.d_ff}}));
  RETURN_IF_ERROR(CheckLayerCount(c.num_layers));
  ASSIGN_OR_RETURN(auto act,
                   ParseActivation(r.StringOr("hidden_activation", "gelu")));
  c.activation = act;
  c.layer_norm_eps = r.NumberOr("norm_eps", 1e-5);
  c.max_positions = r.IntOr("max_position_embeddings", 8192);
  c.max_input_tokens = c.max_positions;
  c.norm_first = true;  // and a final norm
  ArchOptions& a = c.arch;
  a.norm_bias = r.BoolOr("norm_bias", false);
  a.attention_bias = r.BoolOr("attention_bias", false);
  a.ffn_in_bias = a.ffn_out_bias = r.BoolOr("mlp_bias", false);
  a.gated_ffn = true;
  a.embedding_norm = true;
  a.first_layer_attention_norm = false;
  c.positional.type = SchemeType::kRope;
  c.positional.rope_layout = RopeLayout::kHalf;
  const double global_base = r.NumberOr("global_rope_theta", 160000.0);
  const double local_base = r.NumberOr("local_rope_theta", 10000.0);
  c.positional.base = global_base;
  const int64_t every = r.IntOr("global_attn_every_n_layers", 3);
  const int64_t local_attention = r.IntOr("local_attention", 128);
  if (every <= 0 || local_attention < 2) {
    return absl::InvalidArgumentError(
        "config.json global_attn_every_n_layers must be > 0 and "
        "local_attention >= 2");
  }
  for (int64_t i = 0; i < c.num_layers; ++i) {
    const bool global = i % every == 0;
    a.layer_rope_base.push_back(global ? global_base : local_base);
    a.layer_window.push_back(global ? 0 : local_attention / 2);
  }

  const std::string p =
      DetectPrefix(source, {"model.", ""}, "embeddings.tok_embeddings.weight");
  const int64_t d = c.d_model, f = c.d_ff;
  auto norm = [&](const std::string& slot, const std::string& name) {
    AddSlot(&import, slot + ".weight", name + ".weight", {d});
    if (a.norm_bias) AddSlot(&import, slot + ".bias", name + ".bias", {d});
  };
  auto linear = [&](const std::string& slot, const std::string& name,
                    int64_t out, int64_t in, bool bias) {
    AddSlot(&import, slot + "weight", name + ".weight", {out, in});
    if (bias) AddSlot(&import, slot + "bias", name + ".bias", {out});
  };
  AddSlot(&import, "embedding.weight", p + "embeddings.tok_embeddings.weight",
          {c.vocab_size, d});
  norm("embedding_norm", p + "embeddings.norm");
  for (int64_t i = 0; i < c.num_layers; ++i) {
    const std::string l = absl::StrCat(p, "layers.", i, ".");
    if (i > 0) norm(LayerSlot(i, "norm1"), l + "attn_norm");
    linear(LayerSlot(i, "self_attn.in_proj_"), l + "attn.Wqkv", 3 * d, d,
           a.attention_bias);
    linear(LayerSlot(i, "self_attn.out_proj."), l + "attn.Wo", d, d,
           a.attention_bias);
    norm(LayerSlot(i, "norm2"), l + "mlp_norm");
    linear(LayerSlot(i, "linear1."), l + "mlp.Wi", 2 * f, d, a.ffn_in_bias);
    linear(LayerSlot(i, "linear2."), l + "mlp.Wo", d, f, a.ffn_out_bias);
  }
  norm("encoder.norm", p + "final_norm");
  import.ignored_prefixes = {"head.", "decoder.", "classifier."};
  return import;
}

}  // namespace encoder::model::hf
