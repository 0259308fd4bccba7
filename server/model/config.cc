#include "server/model/config.h"

#include <cmath>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "server/common/status_macros.h"

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
  if (!layout.empty()) {
    if (pc.type == SchemeType::kSinusoidal && layout == "interleaved") {
      pc.sinusoidal_layout = SinusoidalLayout::kInterleaved;
    } else if (pc.type == SchemeType::kSinusoidal && layout == "concat") {
      pc.sinusoidal_layout = SinusoidalLayout::kConcat;
    } else if (pc.type == SchemeType::kRope && layout == "interleaved") {
      pc.rope_layout = RopeLayout::kInterleaved;
    } else if (pc.type == SchemeType::kRope && layout == "half") {
      pc.rope_layout = RopeLayout::kHalf;
    } else {
      return Invalid(absl::StrCat("layout \"", layout, "\" is not valid for ",
                                  type, " (sinusoidal: interleaved|concat; ",
                                  "rope: interleaved|half)"));
    }
  }
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
  if (c.arch.token_type_embedding && c.arch.type_vocab_size <= 0) {
    return Invalid("token type embeddings need type_vocab_size > 0");
  }
  if (c.rejects_beyond_max_positions() &&
      c.first_position() >= c.max_positions) {
    return Invalid(absl::StrCat("the position table of ", c.max_positions,
                                " rows has no room after padding_idx ",
                                c.arch.padding_idx));
  }
  const PositionalConfig& pc = c.positional;
  if (pc.type == SchemeType::kSinusoidal || pc.type == SchemeType::kRope) {
    if (!(pc.base > 1)) return Invalid("positional.base must be > 1");
  }
  if (pc.type == SchemeType::kSinusoidal) {
    if (c.d_model % 2 != 0) {
      return Invalid("sinusoidal codes need an even d_model");
    }
    if (pc.sinusoidal_denominator == SinusoidalDenominator::kHalfMinusOne &&
        c.d_model < 4) {
      return Invalid("denominator half_minus_one needs d_model >= 4");
    }
  }
  if (pc.type == SchemeType::kRope && c.head_dim() % 2 != 0) {
    return Invalid(
        absl::StrCat("rope needs an even head dim, got ", c.head_dim()));
  }
  if (pc.type == SchemeType::kDisentangled) {
    if (c.kv_heads() != c.num_heads) {
      return Invalid("disentangled attention needs a key head per query head");
    }
    if (pc.max_relative_positions < 1) {
      return Invalid("positional.max_relative_positions must be >= 1");
    }
    if (pc.position_buckets < 0 ||
        (pc.position_buckets > 0 &&
         (pc.position_buckets < 2 ||
          pc.max_relative_positions - 1 <= pc.position_buckets / 2))) {
      return Invalid(
          "positional.position_buckets must be 0, or >= 2 with "
          "max_relative_positions - 1 above position_buckets / 2");
    }
  }
  if (c.has_relative_buckets()) {
    if (pc.num_buckets < 4 || pc.num_buckets % 2 != 0) {
      return Invalid("positional.num_buckets must be even and >= 4");
    }
    if (pc.max_distance <= pc.num_buckets / 4) {
      return Invalid("positional.max_distance must exceed num_buckets / 4");
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
                 "causal", "num_kv_heads", "positional"},
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

const char* RopeScalingName(RopeScalingType type) {
  switch (type) {
    case RopeScalingType::kNone:
      return "none";
    case RopeScalingType::kLinear:
      return "linear";
    case RopeScalingType::kYarn:
      return "yarn";
    case RopeScalingType::kLlama3:
      return "llama3";
  }
  return "none";
}

std::string SchemeName(SchemeType type) {
  switch (type) {
    case SchemeType::kNone:
      return "none";
    case SchemeType::kSinusoidal:
      return "sinusoidal";
    case SchemeType::kLearned:
      return "learned";
    case SchemeType::kRope:
      return "rope";
    case SchemeType::kAlibi:
      return "alibi";
    case SchemeType::kRelative:
      return "relative";
    case SchemeType::kLearnedRelative:
      return "learned_relative";
    case SchemeType::kDisentangled:
      return "disentangled";
  }
  return "unknown";
}

absl::StatusOr<SchemeType> ParseSchemeName(const std::string& name) {
  for (SchemeType t :
       {SchemeType::kNone, SchemeType::kSinusoidal, SchemeType::kLearned,
        SchemeType::kRope, SchemeType::kAlibi, SchemeType::kRelative,
        SchemeType::kLearnedRelative, SchemeType::kDisentangled}) {
    if (SchemeName(t) == name) return t;
  }
  return Invalid(
      absl::StrCat("positional type \"", name,
                   "\" must be one of none, sinusoidal, learned, ",
                   "rope, alibi, relative, learned_relative, disentangled"));
}

std::string ActivationName(Activation a) {
  switch (a) {
    case Activation::kRelu:
      return "relu";
    case Activation::kGelu:
      return "gelu";
    case Activation::kGeluTanh:
      return "gelu_tanh";
    case Activation::kSilu:
      return "silu";
    case Activation::kGeluNew:
      return "gelu_new";
    case Activation::kGeluFast:
      return "gelu_fast";
    case Activation::kQuickGelu:
      return "quick_gelu";
    case Activation::kMish:
      return "mish";
  }
  return "unknown";
}

std::string ScoreActivationName(ScoreActivation a) {
  switch (a) {
    case ScoreActivation::kIdentity:
      return "identity";
    case ScoreActivation::kSigmoid:
      return "sigmoid";
    case ScoreActivation::kSoftmax:
      return "softmax";
  }
  return "identity";
}

std::string PoolingName(Pooling p) {
  switch (p) {
    case Pooling::kMean:
      return "mean";
    case Pooling::kFirst:
      return "first";
    case Pooling::kMax:
      return "max";
    case Pooling::kLastToken:
      return "last_token";
    case Pooling::kWeightedMean:
      return "weighted_mean";
    case Pooling::kMeanSqrtLen:
      return "mean_sqrt_len";
  }
  return "unknown";
}

absl::StatusOr<Pooling> ParsePoolingName(const std::string& name) {
  for (Pooling p :
       {Pooling::kMean, Pooling::kFirst, Pooling::kMax, Pooling::kLastToken,
        Pooling::kWeightedMean, Pooling::kMeanSqrtLen}) {
    if (PoolingName(p) == name) return p;
  }
  if (name == "cls") return Pooling::kFirst;
  return Invalid(absl::StrCat(
      "pooling \"", name,
      "\" must be mean, first (or cls), max, last_token, weighted_mean or "
      "mean_sqrt_len"));
}

}  // namespace encoder::model
