#include "server/model/hf/sentence_transformers.h"

#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/common/status_macros.h"
#include "server/model/hf/colbert_files.h"
#include "server/model/hf/config_keys.h"
#include "server/model/weights/weight_source.h"

namespace encoder::model {
namespace {

using nlohmann::json;

// A module's config file, which must hold a JSON object.
absl::StatusOr<json> ModuleConfig(const std::string& path) {
  ASSIGN_OR_RETURN(auto cfg, hf::ReadJsonFile(path));
  if (!cfg.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": missing"));
  }
  return cfg;
}

// sentence-transformers' pooling modes, by the name 6.x writes
// ("pooling_mode": "mean") and by the boolean 5.x and older wrote
// ("pooling_mode_mean_tokens": true), in the order the library concatenates
// them.
struct PoolingModeName {
  const char* name;
  const char* legacy_key;
  Pooling pooling;
};
constexpr PoolingModeName kPoolingModes[] = {
    {"cls", "pooling_mode_cls_token", Pooling::kFirst},
    {"max", "pooling_mode_max_tokens", Pooling::kMax},
    {"mean", "pooling_mode_mean_tokens", Pooling::kMean},
    {"mean_sqrt_len_tokens", "pooling_mode_mean_sqrt_len_tokens",
     Pooling::kMeanSqrtLen},
    {"weightedmean", "pooling_mode_weightedmean_tokens",
     Pooling::kWeightedMean},
    {"lasttoken", "pooling_mode_lasttoken", Pooling::kLastToken}};

// The Pooling module's config, as sentence-transformers 6.x reads it:
// "pooling_mode" (a name, or a list of names) or else the legacy booleans
// (none true: mean); "embedding_dimension" or the legacy
// "word_embedding_dimension". A file with both spellings must say the same
// in both; several modes (a concatenation) are refused.
absl::Status ReadPooling(const std::string& path, int64_t hidden,
                         SentenceTransformerFiles* st) {
  ASSIGN_OR_RETURN(auto cfg, ModuleConfig(path));
  for (const char* key : {"embedding_dimension", "word_embedding_dimension"}) {
    if (!cfg.contains(key)) continue;
    if (!cfg[key].is_number_integer() || cfg[key].get<int64_t>() != hidden) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": ", key, " ", cfg[key].dump(),
                       " differs from the model's hidden size ", hidden));
    }
  }
  auto known = [&](const std::string& name) -> absl::StatusOr<Pooling> {
    for (const PoolingModeName& m : kPoolingModes) {
      if (name == m.name) return m.pooling;
    }
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": pooling_mode \"", name,
                     "\" is not one of cls, max, mean, mean_sqrt_len_tokens, "
                     "weightedmean, lasttoken"));
  };
  std::vector<std::string> legacy;  // the legacy booleans that are true
  for (const PoolingModeName& m : kPoolingModes) {
    if (!cfg.contains(m.legacy_key)) continue;
    if (!cfg[m.legacy_key].is_boolean()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": ", m.legacy_key, " must be true or false, not ",
                       cfg[m.legacy_key].dump()));
    }
    if (cfg[m.legacy_key].get<bool>()) legacy.push_back(m.name);
  }
  std::vector<std::string> modes;
  if (cfg.contains("pooling_mode")) {
    const json& value = cfg["pooling_mode"];
    const json list = value.is_array() ? value : json::array({value});
    for (const json& v : list) {
      if (!v.is_string()) {
        return absl::InvalidArgumentError(absl::StrCat(
            path, ": pooling_mode must be a mode name or a list of them, not ",
            value.dump()));
      }
      modes.push_back(v.get<std::string>());
    }
    if (!legacy.empty() && legacy != modes) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": pooling_mode ", value.dump(),
                       " contradicts the legacy pooling_mode_* keys (true: ",
                       absl::StrJoin(legacy, ", "), ")"));
    }
  } else {
    modes = legacy;
    if (modes.empty()) modes.push_back("mean");  // the library's default
  }
  for (const std::string& mode : modes) {
    ASSIGN_OR_RETURN(st->pooling, known(mode));
  }
  if (modes.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": pooling_mode names no mode"));
  }
  if (modes.size() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": pooling modes ", absl::StrJoin(modes, " + "),
                     " concatenated are not supported (one mode per model)"));
  }
  if (cfg.contains("include_prompt") && !cfg["include_prompt"].is_boolean()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": include_prompt must be true or false"));
  }
  st->include_prompt = cfg.value("include_prompt", true);
  return absl::OkStatus();
}

// Whether the Dense or Normalize module in `dir` works on the token
// embeddings (module_input_name "token_embeddings") rather than the pooled
// one ("sentence_embedding", the default). Its output must go back to the
// same key, and a Dense may not add a residual.
absl::StatusOr<bool> OnTokens(const std::string& dir, bool dense) {
  const std::string path = dir + "/config.json";
  ASSIGN_OR_RETURN(auto cfg, hf::ReadJsonFile(path));
  if (!cfg.is_object()) return false;  // the defaults: the pooled vector
  const std::string in = cfg.value("module_input_name", "sentence_embedding");
  const json out_value = cfg.value("module_output_name", json(in));
  const std::string out =
      out_value.is_string() ? out_value.get<std::string>() : in;
  if ((in != "sentence_embedding" && in != "token_embeddings") || out != in) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": module_input_name \"", in, "\" -> module_output_name \"", out,
        "\" is not supported (sentence_embedding or token_embeddings, "
        "written back to the same key)"));
  }
  if (dense && cfg.value("use_residual", false)) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": use_residual true is not supported"));
  }
  return in == "token_embeddings";
}

absl::StatusOr<SpladeFiles> ReadSplade(const std::string& path) {
  ASSIGN_OR_RETURN(auto cfg, ModuleConfig(path));
  SpladeFiles splade;
  const std::string pooling = cfg.value("pooling_strategy", "max");
  const std::string act = cfg.value("activation_function", "relu");
  if (pooling != "max" && pooling != "sum") {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": pooling_strategy \"", pooling, "\" is not max or sum"));
  }
  if (act != "relu" && act != "log1p_relu") {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": activation_function \"", act, "\" is not relu or log1p_relu"));
  }
  splade.max = pooling == "max";
  splade.double_log = act == "log1p_relu";
  return splade;
}

absl::StatusOr<DenseLayer> ReadDense(const std::string& dir,
                                     int64_t in_features) {
  const std::string config_path = dir + "/config.json";
  ASSIGN_OR_RETURN(auto cfg, ModuleConfig(config_path));
  DenseLayer layer;
  const std::string act = cfg.value("activation_function", "");
  static const std::pair<const char*, DenseLayer::Act> kActs[] = {
      {"torch.nn.modules.linear.Identity", DenseLayer::Act::kIdentity},
      {"torch.nn.modules.activation.Tanh", DenseLayer::Act::kTanh},
      {"torch.nn.modules.activation.ReLU", DenseLayer::Act::kRelu},
      {"torch.nn.modules.activation.GELU", DenseLayer::Act::kGelu},
      {"torch.nn.modules.activation.Sigmoid", DenseLayer::Act::kSigmoid}};
  bool known = false;
  for (const auto& [name, value] : kActs) {
    if (act == name) {
      layer.act = value;
      known = true;
    }
  }
  if (!known) {
    return absl::InvalidArgumentError(absl::StrCat(
        config_path, ": activation_function \"", act,
        "\" is not supported (Identity, Tanh, ReLU, GELU, Sigmoid)"));
  }
  const int64_t in = cfg.value("in_features", int64_t{-1});
  const int64_t out = cfg.value("out_features", int64_t{-1});
  if (in != in_features || out <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(config_path, ": in_features ", in, " / out_features ", out,
                     " do not follow a ", in_features, "-wide input"));
  }
  ASSIGN_OR_RETURN(auto source, WeightSource::Open(dir));
  const bool bias = cfg.value("bias", true);
  for (const auto& [name, t] : source->tensors()) {
    if (name != "linear.weight" && !(bias && name == "linear.bias")) {
      return absl::InvalidArgumentError(
          absl::StrCat(dir, ": unexpected tensor \"", name, "\""));
    }
  }
  auto check = [&](const std::string& name,
                   std::vector<int64_t> shape) -> absl::StatusOr<at::Tensor> {
    auto it = source->tensors().find(name);
    if (it == source->tensors().end() || it->second.shape != shape) {
      return absl::InvalidArgumentError(
          absl::StrCat(dir, ": tensor \"", name, "\" must exist with shape [",
                       absl::StrJoin(shape, ", "), "]"));
    }
    return source->Load(name, at::kFloat);
  };
  ASSIGN_OR_RETURN(auto weight, check("linear.weight", {out, in}));
  layer.weight = weight;
  if (bias) {
    ASSIGN_OR_RETURN(auto b, check("linear.bias", {out}));
    layer.bias = b;
  }
  return layer;
}

// sentence-transformers' LayerNorm module: torch's LayerNorm (eps 1e-5)
// over the pooled vector, `dimension` wide, its weights norm.weight and
// norm.bias.
absl::StatusOr<DenseLayer> ReadLayerNorm(const std::string& dir,
                                         int64_t width) {
  const std::string config_path = dir + "/config.json";
  ASSIGN_OR_RETURN(auto cfg, ModuleConfig(config_path));
  const json dimension = cfg.value("dimension", json());
  if (!dimension.is_number_integer() || dimension.get<int64_t>() != width) {
    return absl::InvalidArgumentError(
        absl::StrCat(config_path, ": dimension ", dimension.dump(),
                     " does not follow a ", width, "-wide input"));
  }
  ASSIGN_OR_RETURN(auto source, WeightSource::Open(dir));
  DenseLayer layer;
  for (const auto& [name, t] : source->tensors()) {
    if (name != "norm.weight" && name != "norm.bias") {
      return absl::InvalidArgumentError(
          absl::StrCat(dir, ": unexpected tensor \"", name, "\""));
    }
  }
  for (const char* name : {"norm.weight", "norm.bias"}) {
    auto it = source->tensors().find(name);
    if (it == source->tensors().end() ||
        it->second.shape != std::vector<int64_t>{width}) {
      return absl::InvalidArgumentError(absl::StrCat(
          dir, ": tensor \"", name, "\" must exist with shape [", width, "]"));
    }
    ASSIGN_OR_RETURN(auto t, source->Load(name, at::kFloat));
    (std::string(name) == "norm.weight" ? layer.norm_weight : layer.norm_bias) =
        t;
  }
  layer.norm_eps = 1e-5;  // torch.nn.LayerNorm's default
  return layer;
}

// A positive length, or nullopt for an absent or null value.
absl::StatusOr<std::optional<int64_t>> Length(const json& cfg,
                                              const std::string& where,
                                              const char* key) {
  if (!cfg.contains(key) || cfg[key].is_null()) return std::nullopt;
  const json& v = cfg[key];
  if (!v.is_number_integer() || v.get<int64_t>() <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, ": ", key, " ", v.dump(), " is not a positive integer"));
  }
  return v.get<int64_t>();
}

// The Transformer module's config (sentence_bert_config.json, or the first
// of the older names sentence-transformers still reads). The tokenizer's
// length is processor_kwargs' (or the legacy tokenizer_args')
// model_max_length, else max_seq_length: sentence-transformers passes
// either to the tokenizer as its model_max_length. do_lower_case lowercases
// every text before the tokenizer's own normalizer.
absl::Status ReadTransformerConfig(const std::string& dir,
                                   SentenceTransformerFiles* st) {
  json cfg;
  std::string path;
  for (const char* name : hf::kTransformerConfigFiles) {
    path = absl::StrCat(dir, "/", name);
    ASSIGN_OR_RETURN(cfg, hf::ReadJsonFile(path));
    if (!cfg.is_null() && !cfg.empty()) break;
  }
  if (cfg.is_null() || cfg.empty()) return absl::OkStatus();
  if (!cfg.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": must be a JSON object"));
  }
  ASSIGN_OR_RETURN(auto length, Length(cfg, path, "max_seq_length"));
  // sentence-transformers renames tokenizer_args to processor_kwargs.
  for (const char* key : {"processor_kwargs", "tokenizer_args"}) {
    if (!cfg.contains(key) || !cfg[key].is_object()) continue;
    ASSIGN_OR_RETURN(auto given, Length(cfg[key], absl::StrCat(path, " ", key),
                                        "model_max_length"));
    if (given.has_value()) length = given;
  }
  st->max_seq_length = length.value_or(0);
  if (cfg.contains("do_lower_case") && !cfg["do_lower_case"].is_null()) {
    if (!cfg["do_lower_case"].is_boolean()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": do_lower_case must be true or false"));
    }
    st->lowercase = cfg["do_lower_case"].get<bool>();
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<SentenceTransformerFiles> ReadSentenceTransformers(
    const std::string& dir, int64_t hidden) {
  SentenceTransformerFiles st;
  ASSIGN_OR_RETURN(auto modules, hf::ReadJsonFile(dir + "/modules.json"));
  if (modules.is_null()) return st;
  if (!modules.is_array()) {
    return absl::InvalidArgumentError(
        absl::StrCat(dir, "/modules.json: must be an array of modules"));
  }
  st.present = true;
  int64_t width = hidden, token_width = hidden;
  for (const json& m : modules) {
    const std::string type = m.value("type", "");
    const std::string path = absl::StrCat(dir, "/", m.value("path", ""));
    if (absl::EndsWith(type, ".Transformer") ||
        absl::EndsWith(type, ".MLMTransformer")) {
      continue;
    }
    if (absl::EndsWith(type, ".MultiVectorMask")) {
      // Which tokens a multi-vector model scores (skiplist words): the
      // server returns every token's vector and leaves the choice to the
      // caller.
      continue;
    }
    if (absl::EndsWith(type, ".SpladePooling")) {
      ASSIGN_OR_RETURN(st.splade, ReadSplade(path + "/config.json"));
      continue;
    }
    if (absl::EndsWith(type, ".Pooling")) {
      RETURN_IF_ERROR(ReadPooling(path + "/config.json", hidden, &st));
    } else if (absl::EndsWith(type, ".Dense")) {
      ASSIGN_OR_RETURN(bool tokens, OnTokens(path, /*dense=*/true));
      // PyLate's Dense projects the token embeddings, naming no key.
      if (hf::IsPylateModule(type)) st.pylate = tokens = true;
      int64_t& in = tokens ? token_width : width;
      ASSIGN_OR_RETURN(auto layer, ReadDense(path, in));
      in = layer.weight.size(0);
      (tokens ? st.token_dense : st.dense).push_back(std::move(layer));
    } else if (absl::EndsWith(type, ".LayerNorm")) {
      ASSIGN_OR_RETURN(auto layer, ReadLayerNorm(path, width));
      st.dense.push_back(std::move(layer));
    } else if (absl::EndsWith(type, ".Normalize")) {
      ASSIGN_OR_RETURN(const bool tokens, OnTokens(path, /*dense=*/false));
      (tokens ? st.normalize_tokens : st.normalize) = true;
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat(dir, "/modules.json: module type \"", type,
                       "\" is not supported (Transformer, MLMTransformer, "
                       "Pooling, SpladePooling, Dense, LayerNorm, Normalize, "
                       "MultiVectorMask)"));
    }
  }
  RETURN_IF_ERROR(ReadTransformerConfig(dir, &st));
  ASSIGN_OR_RETURN(
      auto cst, hf::ReadJsonFile(dir + "/config_sentence_transformers.json"));
  if (cst.is_object() && cst.contains("prompts") &&
      cst["prompts"].is_object()) {
    for (const auto& [name, text] : cst["prompts"].items()) {
      if (text.is_string()) st.prompts[name] = text.get<std::string>();
    }
  }
  if (cst.is_object() && cst.contains("default_prompt_name") &&
      cst["default_prompt_name"].is_string()) {
    st.default_prompt_name = cst["default_prompt_name"].get<std::string>();
    if (!st.default_prompt_name.empty() &&
        st.prompts.count(st.default_prompt_name) == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          dir, "/config_sentence_transformers.json: default_prompt_name \"",
          st.default_prompt_name, "\" is not one of its prompts"));
    }
  }
  return st;
}

}  // namespace encoder::model
