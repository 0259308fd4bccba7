// ModernBERT, as in transformers' modeling_modernbert: pre-norm, no biases
// by default, GeGLU feed-forward, half-layout rotary codes with a global and
// a local base, and sliding-window attention on all but every n-th layer.
#include "absl/strings/str_cat.h"
#include "server/common/status_macros.h"
#include "server/model/hf/importer.h"
#include "server/model/hf/rope_config.h"
#include "server/model/positional/schemes.h"

namespace encoder::model::hf {
namespace {

struct LayerRope {
  PositionalConfig full;     // full_attention layers
  PositionalConfig sliding;  // sliding_attention layers
};

// The rotary codes of both layer types, as ModernBertConfig reads them.
// The bases: transformers 5's rope_parameters {"full_attention":
// {"rope_type", "rope_theta", the type's keys}, "sliding_attention":
// {...}}, whose rope_theta wins over the older global_rope_theta /
// local_rope_theta (defaults 160000 / 10000). The scaling: each layer
// type's own entry; a rope_scaling object (what 4.x reads, and 5.x merges
// into both entries) scales both types alike, each on its own base. Both
// at once are refused by name: the two generations would read them
// differently.
absl::StatusOr<LayerRope> ReadLayerRope(const nlohmann::json& config,
                                        const ConfigReader& r,
                                        int64_t max_positions) {
  double global = r.NumberOr("global_rope_theta", 160000.0);
  double local = r.NumberOr("local_rope_theta", 10000.0);
  nlohmann::json full_params, sliding_params;  // null: unscaled
  if (r.Has("rope_parameters") && !config["rope_parameters"].is_null()) {
    const nlohmann::json& params = config["rope_parameters"];
    if (!params.is_object()) {
      return absl::InvalidArgumentError(
          "config.json \"rope_parameters\" must be an object");
    }
    for (const auto& [key, p] : params.items()) {
      if (key != "full_attention" && key != "sliding_attention") {
        return absl::InvalidArgumentError(absl::StrCat(
            "config.json rope_parameters has \"", key,
            "\"; ModernBERT's are per layer type: full_attention and "
            "sliding_attention"));
      }
      if (p.is_null()) continue;
      if (!p.is_object()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "config.json rope_parameters.", key, " must be an object"));
      }
      const bool is_full = key == "full_attention";
      if (p.contains("rope_theta")) {
        if (!p["rope_theta"].is_number() ||
            p["rope_theta"].get<double>() <= 0) {
          return absl::InvalidArgumentError(
              absl::StrCat("config.json rope_parameters.", key,
                           ".rope_theta must be a positive number"));
        }
        (is_full ? global : local) = p["rope_theta"].get<double>();
      }
      nlohmann::json scaling = p;
      scaling.erase("rope_theta");
      (is_full ? full_params : sliding_params) = scaling;
    }
  }
  if (r.Has("rope_scaling") && !config["rope_scaling"].is_null()) {
    const nlohmann::json& s = config["rope_scaling"];
    if (!s.is_object()) {
      return absl::InvalidArgumentError(
          "config.json \"rope_scaling\" must be an object");
    }
    auto scaled = [](const nlohmann::json& p) {
      for (const char* name : {"rope_type", "type"}) {
        if (p.is_object() && p.contains(name) &&
            p[name] != nlohmann::json("default")) {
          return true;
        }
      }
      return false;
    };
    if (scaled(full_params) || scaled(sliding_params)) {
      return absl::InvalidArgumentError(
          "config.json scales the rotary codes in both rope_scaling and "
          "rope_parameters (transformers 4.x reads only the first, 5.x "
          "merges them); give one");
    }
    full_params = sliding_params = s;
  }
  LayerRope out;
  RETURN_IF_ERROR(ReadLayerTypeRope(config, "full_attention", full_params,
                                    global, max_positions, &out.full));
  RETURN_IF_ERROR(ReadLayerTypeRope(config, "sliding_attention", sliding_params,
                                    local, max_positions, &out.sliding));
  return out;
}

// Which layers attend globally: transformers 5's layer_types
// ("full_attention" / "sliding_attention", one per layer) when the config
// has them, else every global_attn_every_n_layers-th layer from the first.
absl::StatusOr<std::vector<bool>> GlobalLayers(const nlohmann::json& config,
                                               const ConfigReader& r,
                                               int64_t layers) {
  std::vector<bool> global;
  if (r.Has("layer_types") && !config["layer_types"].is_null()) {
    const nlohmann::json& types = config["layer_types"];
    if (!types.is_array() || static_cast<int64_t>(types.size()) != layers) {
      return absl::InvalidArgumentError(
          absl::StrCat("config.json layer_types must list one type per layer (",
                       layers, ")"));
    }
    for (const auto& t : types) {
      const std::string type = t.is_string() ? t.get<std::string>() : t.dump();
      if (type != "full_attention" && type != "sliding_attention") {
        return absl::InvalidArgumentError(absl::StrCat(
            "config.json layer_types has \"", type,
            "\"; ModernBERT layers are full_attention or sliding_attention"));
      }
      global.push_back(type == "full_attention");
    }
    return global;
  }
  const int64_t every = r.IntOr("global_attn_every_n_layers", 3);
  if (every <= 0) {
    return absl::InvalidArgumentError(
        "config.json global_attn_every_n_layers must be > 0");
  }
  for (int64_t i = 0; i < layers; ++i) global.push_back(i % every == 0);
  return global;
}

}  // namespace

absl::Status OverrideModernBertRope(const std::string& scaling,
                                    nlohmann::json* config) {
  ASSIGN_OR_RETURN(const nlohmann::json p, ParseRopeOverride(scaling));
  const ConfigReader r(*config);
  // The bases as the checkpoint gives them (its own scaling is replaced).
  ASSIGN_OR_RETURN(
      const LayerRope old,
      ReadLayerRope(*config, r, r.IntOr("max_position_embeddings", 8192)));
  nlohmann::json full = {{"rope_theta", old.full.base}};
  nlohmann::json sliding = {{"rope_theta", old.sliding.base}};
  full.update(p);
  sliding.update(p);
  config->erase("rope_scaling");
  (*config)["rope_parameters"] = {{"full_attention", full},
                                  {"sliding_attention", sliding}};
  return absl::OkStatus();
}

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
  ASSIGN_OR_RETURN(const LayerRope rope,
                   ReadLayerRope(config, r, c.max_positions));
  c.positional = RopeConfig(RopeLayout::kHalf, rope.full.base);
  c.positional.rope_scaling = rope.full.rope_scaling;
  ASSIGN_OR_RETURN(const std::vector<bool> global,
                   GlobalLayers(config, r, c.num_layers));
  const int64_t local_attention = r.IntOr("local_attention", 128);
  if (local_attention < 2) {
    return absl::InvalidArgumentError(
        "config.json local_attention must be >= 2");
  }
  // transformers 5 reads sliding_window as local_attention / 2 (its setter
  // overwrites local_attention); 4.x does not read it. Served only where
  // the two generations agree.
  if (r.Has("sliding_window") &&
      r.IntOr("sliding_window", -1) * 2 != local_attention) {
    return absl::InvalidArgumentError(absl::StrCat(
        "config.json sliding_window ", config["sliding_window"].dump(),
        " is not local_attention / 2 (", local_attention / 2,
        "): transformers 5 and 4.x would give different windows"));
  }
  // transformers 5 rotates head_dim dimensions of each head when the config
  // gives one; only the whole head is served.
  if (r.Has("head_dim") && r.IntOr("head_dim", -1) != c.d_model / c.num_heads) {
    return absl::InvalidArgumentError(absl::StrCat(
        "config.json head_dim ", config["head_dim"].dump(),
        " rotates part of each head; only hidden_size / num_attention_heads (",
        c.d_model / c.num_heads, ") is served"));
  }
  for (int64_t i = 0; i < c.num_layers; ++i) {
    const PositionalConfig& p = global[i] ? rope.full : rope.sliding;
    a.layer_rope_base.push_back(p.base);
    a.layer_rope_scaling.push_back(p.rope_scaling);
    a.layer_window.push_back(global[i] ? 0 : local_attention / 2);
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
