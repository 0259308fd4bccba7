// The T5 encoder (T5EncoderModel, or the encoder half of
// T5ForConditionalGeneration), as in transformers' modeling_t5: RMSNorm
// pre-norm, no biases, no 1/sqrt(d) scaling, heads x d_kv wide attention,
// one relative-bias table in block 0 shared by every layer.
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "server/common/status_macros.h"
#include "server/model/hf/importer.h"
#include "server/model/positional/schemes.h"

namespace encoder::model::hf {

absl::StatusOr<Import> ImportT5(const nlohmann::json& config,
                                const WeightSource& source) {
  ConfigReader r(config);
  Import import;
  import.family = r.StringOr("model_type", "t5");
  ModelConfig& c = import.config;
  int64_t d_kv = 0;
  RETURN_IF_ERROR(r.Ints({{"vocab_size", &c.vocab_size},
                          {"d_model", &c.d_model},
                          {"num_heads", &c.num_heads},
                          {"num_layers", &c.num_layers},
                          {"d_ff", &c.d_ff},
                          {"d_kv", &d_kv}}));
  RETURN_IF_ERROR(CheckLayerCount(c.num_layers));
  if (d_kv <= 0)
    return absl::InvalidArgumentError("config.json d_kv must be > 0");
  // "relu", "gelu", "gated-gelu" (tanh GELU, as T5Config maps it), ...
  std::string ff = r.StringOr("feed_forward_proj", "relu");
  const bool gated = absl::StartsWith(ff, "gated-");
  std::string act_name = gated ? ff.substr(6) : ff;
  if (act_name == "gelu" && gated) act_name = "gelu_new";
  ASSIGN_OR_RETURN(auto act, ParseActivation(act_name));
  c.activation = act;
  c.layer_norm_eps = r.NumberOr("layer_norm_epsilon", 1e-6);
  c.max_positions = r.IntOr("n_positions", 512);
  c.max_input_tokens = c.max_positions;
  c.norm_first = true;
  ArchOptions& a = c.arch;
  a.norm = NormKind::kRmsNorm;
  a.norm_bias = a.attention_bias = a.ffn_in_bias = a.ffn_out_bias = false;
  a.gated_ffn = gated;
  a.attention_scale = false;
  a.head_dim = d_kv;
  c.positional =
      RelativeConfig(r.IntOr("relative_attention_num_buckets", 32),
                     r.IntOr("relative_attention_max_distance", 128));

  const int64_t d = c.d_model, f = c.d_ff, inner = c.num_heads * d_kv;
  const std::string embed = source.Has("shared.weight")
                                ? "shared.weight"
                                : "encoder.embed_tokens.weight";
  AddSlot(&import, "embedding.weight", embed, {c.vocab_size, d});
  for (int64_t i = 0; i < c.num_layers; ++i) {
    const std::string b = absl::StrCat("encoder.block.", i, ".layer.");
    const std::string att = b + "0.SelfAttention.";
    AddSlot(&import, LayerSlot(i, "norm1.weight"), b + "0.layer_norm.weight",
            {d});
    AddConcatSlot(&import, LayerSlot(i, "self_attn.in_proj_weight"),
                  {att + "q.weight", att + "k.weight", att + "v.weight"},
                  {{inner, d}, {inner, d}, {inner, d}});
    AddSlot(&import, LayerSlot(i, "self_attn.out_proj.weight"),
            att + "o.weight", {d, inner});
    AddSlot(&import, LayerSlot(i, "norm2.weight"), b + "1.layer_norm.weight",
            {d});
    const std::string ffn = b + "1.DenseReluDense.";
    if (gated) {
      // act(wi_0 x) * (wi_1 x), as the encoder's gated feed-forward.
      AddConcatSlot(&import, LayerSlot(i, "linear1.weight"),
                    {ffn + "wi_0.weight", ffn + "wi_1.weight"},
                    {{f, d}, {f, d}});
    } else {
      AddSlot(&import, LayerSlot(i, "linear1.weight"), ffn + "wi.weight",
              {f, d});
    }
    AddSlot(&import, LayerSlot(i, "linear2.weight"), ffn + "wo.weight", {d, f});
  }
  AddSlot(&import, "relative_attention_bias.weight",
          "encoder.block.0.layer.0.SelfAttention.relative_attention_bias."
          "weight",
          {c.positional.num_buckets, c.num_heads});
  AddSlot(&import, "encoder.norm.weight", "encoder.final_layer_norm.weight",
          {d});
  import.ignored_prefixes = {"decoder.", "lm_head.", "shared.weight",
                             "encoder.embed_tokens.weight"};
  return import;
}

}  // namespace encoder::model::hf
