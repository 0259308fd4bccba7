#include "server/model/config.h"

#include <cmath>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "server/common/status_macros.h"
#include "server/model/positional/traits.h"

namespace encoder::model {
namespace {

using nlohmann::json;

absl::Status Invalid(const std::string& msg) {
  return absl::InvalidArgumentError(absl::StrCat("model config: ", msg));
}

absl::Status CheckKeys(const json& obj, const std::set<std::string>& allowed,
                       const std::string& where) {
  for (const auto& item : obj.items()) {
    if (allowed.count(item.key()) == 0) {
      return Invalid(
          absl::StrCat("unknown key \"", item.key(), "\" in ", where));
    }
  }
  return absl::OkStatus();
}

template <typename T>
absl::Status Read(const json& obj, const char* key, T* out) {
  auto it = obj.find(key);
  if (it == obj.end()) return absl::OkStatus();
  try {
    if constexpr (std::is_same_v<T, bool>) {
      if (!it->is_boolean()) return Invalid(absl::StrCat(key, " must be bool"));
    } else if constexpr (std::is_integral_v<T>) {
      if (!it->is_number_integer()) {
        return Invalid(absl::StrCat(key, " must be an integer"));
      }
    } else if constexpr (std::is_floating_point_v<T>) {
      if (!it->is_number())
        return Invalid(absl::StrCat(key, " must be a number"));
    } else {
      if (!it->is_string())
        return Invalid(absl::StrCat(key, " must be a string"));
    }
    *out = it->get<T>();
  } catch (const json::exception& e) {
    return Invalid(absl::StrCat(key, ": ", e.what()));
  }
  return absl::OkStatus();
}

// "layer_window": one integer >= 0 per layer (0: global).
absl::Status ReadLayerWindows(const json& obj, std::vector<int64_t>* out) {
  auto it = obj.find("layer_window");
  if (it == obj.end()) return absl::OkStatus();
  if (!it->is_array()) return Invalid("layer_window must be an array");
  for (const json& w : *it) {
    if (!w.is_number_integer() || w.get<int64_t>() < 0) {
      return Invalid("layer_window entries must be integers >= 0");
    }
    out->push_back(w.get<int64_t>());
  }
  return absl::OkStatus();
}

// The config's "layout", as the scheme's traits take it.
absl::Status SetLayout(const std::string& layout, const std::string& type,
                       PositionalConfig* pc) {
  const SchemeTraits& traits = Traits(pc->type);
  const std::string layouts(traits.layouts);
  for (absl::string_view name : absl::StrSplit(layouts, '|')) {
    if (!name.empty() && name == layout) {
      traits.set_layout(layout, pc);
      return absl::OkStatus();
    }
  }
  std::string valid;
  for (const SchemeTraits* t : AllSchemes()) {
    if (t->layouts.empty()) continue;
    absl::StrAppend(&valid, valid.empty() ? "" : "; ", std::string(t->name),
                    ": ", std::string(t->layouts));
  }
  return Invalid(absl::StrCat("layout \"", layout, "\" is not valid for ", type,
                              " (", valid, ")"));
}

absl::Status ParsePositional(const json& obj, ModelConfig* config) {
  if (!obj.is_object()) return Invalid("positional must be an object");
  RETURN_IF_ERROR(CheckKeys(obj,
                            {"type", "base", "layout", "denominator", "offset",
                             "num_buckets", "max_distance", "position_buckets",
                             "max_relative_positions", "absolute"},
                            "positional"));
  PositionalConfig& pc = config->positional;
  std::string type = SchemeName(pc.type);
  RETURN_IF_ERROR(Read(obj, "type", &type));
  ASSIGN_OR_RETURN(auto scheme, ParseSchemeName(type));
  pc.type = scheme;
  RETURN_IF_ERROR(Read(obj, "base", &pc.base));
  RETURN_IF_ERROR(Read(obj, "offset", &pc.sinusoidal_offset));
  RETURN_IF_ERROR(Read(obj, "num_buckets", &pc.num_buckets));
  RETURN_IF_ERROR(Read(obj, "max_distance", &pc.max_distance));
  RETURN_IF_ERROR(Read(obj, "position_buckets", &pc.position_buckets));
  RETURN_IF_ERROR(
      Read(obj, "max_relative_positions", &pc.max_relative_positions));
  RETURN_IF_ERROR(Read(obj, "absolute", &pc.absolute_input));
  std::string layout;
  RETURN_IF_ERROR(Read(obj, "layout", &layout));
  if (!layout.empty()) RETURN_IF_ERROR(SetLayout(layout, type, &pc));
  std::string denominator;
  RETURN_IF_ERROR(Read(obj, "denominator", &denominator));
  if (denominator == "d_model") {
    pc.sinusoidal_denominator = SinusoidalDenominator::kModelDim;
  } else if (denominator == "half_minus_one") {
    pc.sinusoidal_denominator = SinusoidalDenominator::kHalfMinusOne;
  } else if (!denominator.empty()) {
    return Invalid(absl::StrCat("denominator \"", denominator,
                                "\" must be d_model or half_minus_one"));
  }
  return absl::OkStatus();
}

}  // namespace

bool ModelConfig::rejects_beyond_max_positions() const {
  const SchemeTraits& traits = Traits(positional.type);
  return traits.table_bounds_length != nullptr &&
         traits.table_bounds_length(positional);
}

int64_t ModelConfig::score_scale_factor() const {
  const SchemeTraits& traits = Traits(positional.type);
  return traits.score_scale_factor ? traits.score_scale_factor(positional) : 1;
}

int64_t ModelConfig::content_bias_rows() const {
  const SchemeTraits& traits = Traits(positional.type);
  return traits.content_bias_rows ? traits.content_bias_rows(positional) : 0;
}

bool ModelConfig::has_relative_buckets() const {
  return Traits(positional.type).relative_buckets;
}

int64_t ModelConfig::max_length() const {
  if (rejects_beyond_max_positions()) {
    return std::min(max_positions - first_position(), max_input_tokens);
  }
  return max_input_tokens;
}

absl::Status ValidateConfig(const ModelConfig& c) {
  auto positive = [](int64_t v, const char* name) -> absl::Status {
    if (v <= 0) return Invalid(absl::StrCat(name, " must be > 0, got ", v));
    return absl::OkStatus();
  };
  RETURN_IF_ERROR(positive(c.vocab_size, "vocab_size"));
  RETURN_IF_ERROR(positive(c.d_model, "d_model"));
  RETURN_IF_ERROR(positive(c.num_heads, "num_heads"));
  RETURN_IF_ERROR(positive(c.num_layers, "num_layers"));
  RETURN_IF_ERROR(positive(c.d_ff, "d_ff"));
  RETURN_IF_ERROR(positive(c.max_positions, "max_positions"));
  RETURN_IF_ERROR(positive(c.max_input_tokens, "max_input_tokens"));
  if (c.arch.head_dim < 0) return Invalid("head_dim must be >= 0");
  if (c.arch.head_dim == 0 && c.d_model % c.num_heads != 0) {
    return Invalid(absl::StrCat(
        "d_model ", c.d_model, " is not divisible by num_heads ", c.num_heads));
  }
  if (!(c.layer_norm_eps > 0)) return Invalid("layer_norm_eps must be > 0");
  if (c.arch.num_kv_heads < 0 || c.num_heads % c.kv_heads() != 0) {
    return Invalid(absl::StrCat("num_kv_heads ", c.arch.num_kv_heads,
                                " must divide num_heads ", c.num_heads));
  }
  if (!c.arch.layer_window.empty() &&
      static_cast<int64_t>(c.arch.layer_window.size()) != c.num_layers) {
    return Invalid("layer_window needs one entry per layer");
  }
  if (!c.arch.layer_rope_base.empty() &&
      static_cast<int64_t>(c.arch.layer_rope_base.size()) != c.num_layers) {
    return Invalid("layer_rope_base needs one entry per layer");
  }
  if (!c.arch.layer_rope_scaling.empty() &&
      static_cast<int64_t>(c.arch.layer_rope_scaling.size()) != c.num_layers) {
    return Invalid("layer_rope_scaling needs one entry per layer");
  }
  if (c.arch.score_dim < 0) return Invalid("score_dim must be >= 0");
  if (c.arch.token_type_embedding && c.arch.type_vocab_size <= 0) {
    return Invalid("token type embeddings need type_vocab_size > 0");
  }
  if (c.rejects_beyond_max_positions() &&
      c.first_position() >= c.max_positions) {
    return Invalid(absl::StrCat("the position table of ", c.max_positions,
                                " rows has no room after padding_idx ",
                                c.arch.padding_idx));
  }
  const SchemeTraits& traits = Traits(c.positional.type);
  if (traits.validate != nullptr) {
    if (absl::Status s = traits.validate(c); !s.ok()) {
      return Invalid(std::string(s.message()));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<ModelConfig> ParseModelConfig(const std::string& json_text) {
  json obj = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (obj.is_discarded()) return Invalid("not valid JSON");
  if (!obj.is_object()) return Invalid("must be a JSON object");
  RETURN_IF_ERROR(
      CheckKeys(obj,
                {"vocab_size", "d_model", "num_heads", "num_layers", "d_ff",
                 "activation", "norm_first", "layer_norm_eps", "max_positions",
                 "max_input_tokens", "pooling", "normalize", "embedding_scale",
                 "causal", "num_kv_heads", "layer_window", "positional"},
                "config"));
  ModelConfig c;
  RETURN_IF_ERROR(Read(obj, "vocab_size", &c.vocab_size));
  RETURN_IF_ERROR(Read(obj, "d_model", &c.d_model));
  RETURN_IF_ERROR(Read(obj, "num_heads", &c.num_heads));
  RETURN_IF_ERROR(Read(obj, "num_layers", &c.num_layers));
  RETURN_IF_ERROR(Read(obj, "d_ff", &c.d_ff));
  RETURN_IF_ERROR(Read(obj, "norm_first", &c.norm_first));
  RETURN_IF_ERROR(Read(obj, "layer_norm_eps", &c.layer_norm_eps));
  RETURN_IF_ERROR(Read(obj, "max_positions", &c.max_positions));
  RETURN_IF_ERROR(Read(obj, "max_input_tokens", &c.max_input_tokens));
  RETURN_IF_ERROR(Read(obj, "normalize", &c.normalize));
  RETURN_IF_ERROR(Read(obj, "embedding_scale", &c.embedding_scale));
  RETURN_IF_ERROR(Read(obj, "causal", &c.arch.causal));
  RETURN_IF_ERROR(Read(obj, "num_kv_heads", &c.arch.num_kv_heads));
  RETURN_IF_ERROR(ReadLayerWindows(obj, &c.arch.layer_window));
  std::string activation = ActivationName(c.activation);
  RETURN_IF_ERROR(Read(obj, "activation", &activation));
  if (activation == "relu") {
    c.activation = Activation::kRelu;
  } else if (activation == "gelu") {
    c.activation = Activation::kGelu;
  } else {
    return Invalid(
        absl::StrCat("activation \"", activation, "\" must be relu or gelu"));
  }
  std::string pooling = PoolingName(c.pooling);
  RETURN_IF_ERROR(Read(obj, "pooling", &pooling));
  ASSIGN_OR_RETURN(auto parsed_pooling, ParsePoolingName(pooling));
  c.pooling = parsed_pooling;
  if (obj.contains("positional")) {
    RETURN_IF_ERROR(ParsePositional(obj["positional"], &c));
  }
  RETURN_IF_ERROR(ValidateConfig(c));
  return c;
}

std::string SchemeName(SchemeType type) {
  return std::string(Traits(type).name);
}

absl::StatusOr<SchemeType> ParseSchemeName(const std::string& name) {
  if (const SchemeTraits* t = FindScheme(name)) return t->type;
  return Invalid(absl::StrCat("positional type \"", name, "\" must be one of ",
                              SchemeNameList()));
}

}  // namespace encoder::model
