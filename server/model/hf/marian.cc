// The Marian encoder (MarianMTModel / MarianModel), as in transformers'
// modeling_marian: embeddings scaled by sqrt(d_model) plus a fixed
// sinusoidal table in [sin | cos] halves, post-norm layers with biases.
#include "absl/strings/str_cat.h"
#include "server/common/status_macros.h"
#include "server/model/hf/importer.h"
#include "server/model/positional/schemes.h"

namespace encoder::model::hf {

absl::StatusOr<Import> ImportMarian(const nlohmann::json& config,
                                    const WeightSource& source) {
  ConfigReader r(config);
  Import import;
  import.family = "marian";
  ModelConfig& c = import.config;
  RETURN_IF_ERROR(r.Ints({{"vocab_size", &c.vocab_size},
                          {"d_model", &c.d_model},
                          {"encoder_attention_heads", &c.num_heads},
                          {"encoder_layers", &c.num_layers},
                          {"encoder_ffn_dim", &c.d_ff},
                          {"max_position_embeddings", &c.max_positions}}));
  RETURN_IF_ERROR(CheckLayerCount(c.num_layers));
  if (r.BoolOr("normalize_before", false) ||
      r.BoolOr("normalize_embedding", false)) {
    return absl::InvalidArgumentError(
        "config.json normalize_before / normalize_embedding true is not "
        "supported for marian (post-norm encoders only)");
  }
  ASSIGN_OR_RETURN(auto act,
                   ParseActivation(r.StringOr("activation_function", "swish")));
  c.activation = act;
  c.layer_norm_eps = 1e-5;  // nn.LayerNorm's default, as modeling_marian
  c.max_input_tokens = c.max_positions;
  c.embedding_scale = r.BoolOr("scale_embedding", false);
  c.positional = SinusoidalConfig(SinusoidalLayout::kConcat,
                                  SinusoidalDenominator::kModelDim, 10000.0);

  const std::string p = DetectPrefix(source, {"model.encoder.", "encoder."},
                                     "layers.0.self_attn.q_proj.weight");
  const std::string model = p == "model.encoder." ? "model." : "";
  const int64_t d = c.d_model, f = c.d_ff;
  const std::string embed = source.Has(p + "embed_tokens.weight")
                                ? p + "embed_tokens.weight"
                                : model + "shared.weight";
  AddSlot(&import, "embedding.weight", embed, {c.vocab_size, d});
  for (int64_t i = 0; i < c.num_layers; ++i) {
    const std::string l = absl::StrCat(p, "layers.", i, ".");
    const std::string att = l + "self_attn.";
    AddConcatSlot(
        &import, LayerSlot(i, "self_attn.in_proj_weight"),
        {att + "q_proj.weight", att + "k_proj.weight", att + "v_proj.weight"},
        {{d, d}, {d, d}, {d, d}});
    AddConcatSlot(
        &import, LayerSlot(i, "self_attn.in_proj_bias"),
        {att + "q_proj.bias", att + "k_proj.bias", att + "v_proj.bias"},
        {{d}, {d}, {d}});
    AddSlot(&import, LayerSlot(i, "self_attn.out_proj.weight"),
            att + "out_proj.weight", {d, d});
    AddSlot(&import, LayerSlot(i, "self_attn.out_proj.bias"),
            att + "out_proj.bias", {d});
    AddSlot(&import, LayerSlot(i, "norm1.weight"),
            l + "self_attn_layer_norm.weight", {d});
    AddSlot(&import, LayerSlot(i, "norm1.bias"),
            l + "self_attn_layer_norm.bias", {d});
    AddSlot(&import, LayerSlot(i, "linear1.weight"), l + "fc1.weight", {f, d});
    AddSlot(&import, LayerSlot(i, "linear1.bias"), l + "fc1.bias", {f});
    AddSlot(&import, LayerSlot(i, "linear2.weight"), l + "fc2.weight", {d, f});
    AddSlot(&import, LayerSlot(i, "linear2.bias"), l + "fc2.bias", {d});
    AddSlot(&import, LayerSlot(i, "norm2.weight"),
            l + "final_layer_norm.weight", {d});
    AddSlot(&import, LayerSlot(i, "norm2.bias"), l + "final_layer_norm.bias",
            {d});
  }
  import.ignored_prefixes = {model + "decoder.",        "lm_head.",
                             "final_logits_bias",       model + "shared.weight",
                             p + "embed_tokens.weight", p + "embed_positions."};
  return import;
}

}  // namespace encoder::model::hf
