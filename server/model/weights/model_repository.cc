#include "server/model/weights/model_repository.h"

#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/common/status_macros.h"
#include "server/model/hf/checkpoint.h"
#include "server/model/positional/traits.h"
#include "server/model/weights/safetensors.h"

namespace encoder::model {
namespace {

using nlohmann::json;

absl::StatusOr<std::string> ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string Resolve(const std::string& base_dir, const std::string& path) {
  if (path.empty() || path[0] == '/' || base_dir.empty()) return path;
  return absl::StrCat(base_dir, "/", path);
}

absl::Status ModelError(const std::string& model, const std::string& msg) {
  return absl::InvalidArgumentError(
      absl::StrCat("model repository: model \"", model, "\": ", msg));
}

absl::StatusOr<BatchingOverrides> ParseBatching(const std::string& name,
                                                const json& batching) {
  using Field = std::optional<int64_t> BatchingOverrides::*;
  static const std::map<std::string, Field> kFields = {
      {"max_batch_sequences", &BatchingOverrides::max_batch_sequences},
      {"max_batch_tokens", &BatchingOverrides::max_batch_tokens},
      {"max_queue_delay_us", &BatchingOverrides::max_queue_delay_us},
      {"max_queued_sequences", &BatchingOverrides::max_queued_sequences},
      {"max_batch_memory_bytes", &BatchingOverrides::max_batch_memory_bytes},
      {"executions", &BatchingOverrides::executions},
      {"max_batch_ms", &BatchingOverrides::max_batch_ms}};
  if (!batching.is_object()) {
    return ModelError(name, "batching must be an object");
  }
  BatchingOverrides out;
  for (const auto& item : batching.items()) {
    auto field = kFields.find(item.key());
    if (field == kFields.end() || !item.value().is_number_integer() ||
        item.value().get<int64_t>() < 0) {
      return ModelError(name, absl::StrCat("batching.", item.key(),
                                           " is not a known non-negative "
                                           "integer option"));
    }
    out.*(field->second) = item.value().get<int64_t>();
  }
  if (out.executions && (*out.executions < 1 || *out.executions > 64)) {
    return ModelError(name, "batching.executions must be 1 to 64");
  }
  return out;
}

// The optional "max_extrapolation_tokens" of either entry form: > 0.
absl::Status ParseExtrapolationLimit(const json& m, ModelSpec* spec) {
  if (!m.contains("max_extrapolation_tokens")) return absl::OkStatus();
  const json& v = m["max_extrapolation_tokens"];
  if (!v.is_number_integer() || v.get<int64_t>() <= 0) {
    return ModelError(spec->name,
                      "max_extrapolation_tokens must be an integer > 0");
  }
  spec->max_extrapolation_tokens = v.get<int64_t>();
  return absl::OkStatus();
}

// The optional "long_input" of either entry form: a policy name.
absl::Status ParseLongInputPolicy(const json& m, ModelSpec* spec) {
  if (!m.contains("long_input")) return absl::OkStatus();
  const json& v = m["long_input"];
  spec->long_input = v.is_string()
                         ? encoder::ParseLongInputPolicy(v.get<std::string>())
                         : std::nullopt;
  if (!spec->long_input) {
    return ModelError(spec->name, absl::StrCat("long_input must be one of ",
                                               LongInputPolicyList()));
  }
  return absl::OkStatus();
}

// "prompts": {name: text} and "default_prompt_name" (one of them), when
// present.
absl::Status ParsePrompts(const json& m, ModelSpec* spec) {
  if (m.contains("prompts")) {
    if (!m["prompts"].is_object()) {
      return ModelError(spec->name, "prompts must be an object of strings");
    }
    spec->prompts.clear();
    for (const auto& [name, text] : m["prompts"].items()) {
      if (!text.is_string() || name.empty()) {
        return ModelError(spec->name,
                          "prompts must map non-empty names to strings");
      }
      spec->prompts[name] = text.get<std::string>();
    }
    spec->prompts_set = true;
  }
  if (m.contains("default_prompt_name")) {
    if (!m["default_prompt_name"].is_string()) {
      return ModelError(spec->name, "default_prompt_name must be a string");
    }
    if (!spec->prompts_set) {
      return ModelError(spec->name,
                        "default_prompt_name needs \"prompts\" beside it");
    }
    spec->default_prompt_name = m["default_prompt_name"].get<std::string>();
    if (!spec->default_prompt_name.empty() &&
        spec->prompts.count(spec->default_prompt_name) == 0) {
      return ModelError(spec->name, absl::StrCat("default_prompt_name \"",
                                                 spec->default_prompt_name,
                                                 "\" is not in prompts"));
    }
  }
  return absl::OkStatus();
}

// "strip_text": true | false, when present.
absl::Status ParseStripText(const json& m, ModelSpec* spec) {
  if (!m.contains("strip_text")) return absl::OkStatus();
  if (!m["strip_text"].is_boolean()) {
    return ModelError(spec->name, "strip_text must be true or false");
  }
  spec->strip_text = m["strip_text"].get<bool>();
  return absl::OkStatus();
}

// "quantize": "int8" | "none", when present.
absl::Status ParseQuantize(const json& m, ModelSpec* spec) {
  if (!m.contains("quantize")) return absl::OkStatus();
  if (!m["quantize"].is_string() ||
      (m["quantize"] != "int8" && m["quantize"] != "none")) {
    return ModelError(spec->name, "quantize must be \"int8\" or \"none\"");
  }
  spec->quantize = m["quantize"].get<std::string>();
  return absl::OkStatus();
}

// {"name", "path", "pooling", "normalize", "batching", "quantize",
//  "max_extrapolation_tokens"}: a checkpoint dir.
absl::StatusOr<ModelSpec> ParseCheckpointEntry(const json& m,
                                               const std::string& base_dir) {
  ModelSpec spec;
  spec.name = m["name"].get<std::string>();
  static const std::set<std::string> kKeys = {"name",
                                              "path",
                                              "pooling",
                                              "normalize",
                                              "batching",
                                              "quantize",
                                              "max_extrapolation_tokens",
                                              "long_input",
                                              "prompts",
                                              "default_prompt_name",
                                              "strip_text",
                                              "rope_scaling",
                                              "rerank_template"};
  for (const auto& item : m.items()) {
    if (kKeys.count(item.key()) == 0) {
      return ModelError(
          spec.name,
          absl::StrCat("unknown key \"", item.key(),
                       "\" for a checkpoint entry (name, path, "
                       "pooling, normalize, batching, "
                       "quantize, max_extrapolation_tokens, long_input, "
                       "prompts, default_prompt_name, strip_text, "
                       "rope_scaling, rerank_template)"));
    }
  }
  if (!m["path"].is_string() || m["path"].get<std::string>().empty()) {
    return ModelError(spec.name, "path must be a non-empty string");
  }
  spec.model_dir = Resolve(base_dir, m["path"].get<std::string>());
  if (m.contains("pooling")) {
    if (!m["pooling"].is_string()) {
      return ModelError(spec.name, "pooling must be a string");
    }
    auto p = ParsePoolingName(m["pooling"].get<std::string>());
    if (!p.ok())
      return ModelError(spec.name, std::string(p.status().message()));
    spec.pooling = *p;
  }
  if (m.contains("normalize")) {
    if (!m["normalize"].is_boolean()) {
      return ModelError(spec.name, "normalize must be true or false");
    }
    spec.normalize = m["normalize"].get<bool>();
  }
  if (m.contains("batching")) {
    ASSIGN_OR_RETURN(auto b, ParseBatching(spec.name, m["batching"]));
    spec.batching = std::move(b);
  }
  RETURN_IF_ERROR(ParseExtrapolationLimit(m, &spec));
  RETURN_IF_ERROR(ParseLongInputPolicy(m, &spec));
  RETURN_IF_ERROR(ParseQuantize(m, &spec));
  RETURN_IF_ERROR(ParsePrompts(m, &spec));
  RETURN_IF_ERROR(ParseStripText(m, &spec));
  if (m.contains("rope_scaling")) {
    if (!m["rope_scaling"].is_object()) {
      return ModelError(spec.name,
                        "rope_scaling must be an object such as "
                        "{\"rope_type\": \"yarn\", \"factor\": 4}");
    }
    spec.rope_scaling = m["rope_scaling"].dump();
  }
  if (m.contains("rerank_template")) {
    const json& t = m["rerank_template"];
    if (!t.is_string() && !t.is_object()) {
      return ModelError(spec.name,
                        "rerank_template must be a built-in name "
                        "(\"qwen3-reranker\") or an object");
    }
    auto parsed =
        ParseRerankTemplate(t.is_string() ? t.get<std::string>() : t.dump());
    if (!parsed.ok()) {
      return ModelError(spec.name, std::string(parsed.status().message()));
    }
    spec.rerank_template = std::move(*parsed);
  }
  return spec;
}

absl::StatusOr<ModelSpec> ParseModel(const json& m,
                                     const std::string& base_dir) {
  if (!m.is_object() || !m.contains("name") || !m["name"].is_string() ||
      m["name"].get<std::string>().empty()) {
    return absl::InvalidArgumentError(
        "model repository: every model needs a non-empty string \"name\"");
  }
  if (m.contains("path")) return ParseCheckpointEntry(m, base_dir);
  ModelSpec spec;
  spec.name = m["name"].get<std::string>();
  static const std::set<std::string> kKeys = {
      "name",       "config",   "config_file",
      "weights",    "seed",     "batching",
      "tokenizer",  "quantize", "max_extrapolation_tokens",
      "long_input", "prompts",  "default_prompt_name",
      "strip_text"};
  for (const auto& item : m.items()) {
    if (kKeys.count(item.key()) == 0) {
      return ModelError(spec.name,
                        absl::StrCat("unknown key \"", item.key(), "\""));
    }
  }
  std::string config_text = "{}";
  if (m.contains("config") && m.contains("config_file")) {
    return ModelError(spec.name, "give either config or config_file");
  }
  if (m.contains("config")) {
    if (!m["config"].is_object()) {
      return ModelError(spec.name, "config must be an object");
    }
    config_text = m["config"].dump();
  } else if (m.contains("config_file")) {
    if (!m["config_file"].is_string()) {
      return ModelError(spec.name, "config_file must be a string");
    }
    auto text =
        ReadText(Resolve(base_dir, m["config_file"].get<std::string>()));
    if (!text.ok())
      return ModelError(spec.name, std::string(text.status().message()));
    config_text = *text;
  }
  auto config = ParseModelConfig(config_text);
  if (!config.ok()) {
    return ModelError(spec.name, std::string(config.status().message()));
  }
  spec.config = *config;
  if (m.contains("weights")) {
    if (!m["weights"].is_string()) {
      return ModelError(spec.name, "weights must be a string path");
    }
    spec.weights_path = Resolve(base_dir, m["weights"].get<std::string>());
  }
  if (m.contains("tokenizer")) {
    if (!m["tokenizer"].is_string()) {
      return ModelError(spec.name,
                        "tokenizer must be a string path (tokenizer.json or "
                        "a directory)");
    }
    spec.tokenizer_path = Resolve(base_dir, m["tokenizer"].get<std::string>());
  }
  if (m.contains("seed")) {
    if (!m["seed"].is_number_unsigned()) {
      return ModelError(spec.name, "seed must be a non-negative integer");
    }
    spec.seed = m["seed"].get<uint64_t>();
  }
  if (m.contains("batching")) {
    ASSIGN_OR_RETURN(auto b, ParseBatching(spec.name, m["batching"]));
    spec.batching = std::move(b);
  }
  RETURN_IF_ERROR(ParseExtrapolationLimit(m, &spec));
  RETURN_IF_ERROR(ParseLongInputPolicy(m, &spec));
  RETURN_IF_ERROR(ParseQuantize(m, &spec));
  RETURN_IF_ERROR(ParsePrompts(m, &spec));
  RETURN_IF_ERROR(ParseStripText(m, &spec));
  return spec;
}

}  // namespace

Repository BuiltinRepository() {
  Repository repo;
  uint64_t seed = 20240601;
  for (const SchemeTraits* scheme : AllSchemes()) {
    if (!scheme->builtin) continue;
    ModelSpec spec;
    spec.name = std::string(scheme->name);
    spec.config.positional.type = scheme->type;
    spec.seed = seed++;
    repo.models.push_back(spec);
  }
  repo.default_model = "sinusoidal";
  return repo;
}

absl::StatusOr<Repository> ParseRepository(const std::string& json_text,
                                           const std::string& base_dir) {
  json obj = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (obj.is_discarded() || !obj.is_object()) {
    return absl::InvalidArgumentError(
        "model repository: not a valid JSON object");
  }
  for (const auto& item : obj.items()) {
    if (item.key() != "models" && item.key() != "default_model") {
      return absl::InvalidArgumentError(
          absl::StrCat("model repository: unknown key \"", item.key(), "\""));
    }
  }
  if (!obj.contains("models") || !obj["models"].is_array() ||
      obj["models"].empty()) {
    return absl::InvalidArgumentError(
        "model repository: \"models\" must be a non-empty array");
  }
  Repository repo;
  std::set<std::string> names;
  for (const json& m : obj["models"]) {
    ASSIGN_OR_RETURN(auto spec, ParseModel(m, base_dir));
    if (!names.insert(spec.name).second) {
      return ModelError(spec.name, "defined twice");
    }
    repo.models.push_back(std::move(spec));
  }
  repo.default_model = repo.models.front().name;
  if (obj.contains("default_model")) {
    if (!obj["default_model"].is_string() ||
        names.count(obj["default_model"].get<std::string>()) == 0) {
      return absl::InvalidArgumentError(
          "model repository: default_model must name a defined model");
    }
    repo.default_model = obj["default_model"].get<std::string>();
  }
  return repo;
}

absl::StatusOr<Repository> ReadRepository(const std::string& path) {
  ASSIGN_OR_RETURN(auto text, ReadText(path));
  const size_t slash = path.find_last_of('/');
  return ParseRepository(
      text, slash == std::string::npos ? "" : path.substr(0, slash));
}

absl::StatusOr<RerankTemplate> ParseRerankTemplate(const std::string& text) {
  const std::string names = absl::StrJoin(BuiltinRerankTemplateNames(), ", ");
  if (auto builtin = BuiltinRerankTemplate(text); builtin.has_value()) {
    return *builtin;
  }
  const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rerank template \"", text, "\" is neither a built-in name (", names,
        ") nor a JSON object"));
  }
  RerankTemplate t;
  t.name = "custom";
  if (j.contains("base")) {
    const std::string base =
        j["base"].is_string() ? j["base"].get<std::string>() : "";
    auto builtin = BuiltinRerankTemplate(base);
    if (!builtin.has_value()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "rerank template base must be a built-in name (", names, ")"));
    }
    t = *builtin;
  }
  const std::map<std::string, std::string*> fields = {
      {"prefix", &t.prefix},           {"body", &t.body}, {"suffix", &t.suffix},
      {"instruction", &t.instruction}, {"yes", &t.yes},   {"no", &t.no}};
  for (const auto& [key, value] : j.items()) {
    if (key == "base") continue;
    auto it = fields.find(key);
    if (it == fields.end() || !value.is_string()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "rerank template key \"", key,
          "\": the keys are base, prefix, body, suffix, instruction, yes and "
          "no, each a string"));
    }
    *it->second = value.get<std::string>();
    t.name = "custom";
  }
  RETURN_IF_ERROR(ValidateRerankTemplate(t));
  return t;
}

absl::StatusOr<ModelSpec> ModelDirSpec(const std::string& flag) {
  ModelSpec spec;
  const size_t eq = flag.find('=');
  std::string dir = eq == std::string::npos ? flag : flag.substr(eq + 1);
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  if (dir.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--model-dir \"", flag, "\": give DIR or NAME=DIR"));
  }
  const size_t slash = dir.find_last_of('/');
  spec.name = eq == std::string::npos
                  ? (slash == std::string::npos ? dir : dir.substr(slash + 1))
                  : flag.substr(0, eq);
  if (spec.name.empty() || spec.name == "." || spec.name == "..") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--model-dir \"", flag, "\": cannot name the model; use NAME=DIR"));
  }
  spec.model_dir = dir;
  return spec;
}

namespace {

// TEI's --default-prompt-name / --default-prompt on a checkpoint's prompts.
absl::Status ApplyForcedPrompt(const ModelSpec& spec, ModelSpec* resolved) {
  if (spec.forced_default_prompt.has_value()) {
    resolved->prompts[kForcedPromptName] = *spec.forced_default_prompt;
    resolved->default_prompt_name = kForcedPromptName;
  }
  if (!spec.forced_default_prompt_name.has_value()) return absl::OkStatus();
  const std::string& name = *spec.forced_default_prompt_name;
  if (resolved->prompts.count(name) == 0) {
    std::vector<std::string> names;
    for (const auto& [known, text] : resolved->prompts) names.push_back(known);
    return absl::InvalidArgumentError(
        absl::StrCat("model \"", spec.name, "\": --default-prompt-name \"",
                     name, "\" is not one of its prompts (",
                     names.empty() ? "it has none" : absl::StrJoin(names, ", "),
                     "; config_sentence_transformers.json lists them)"));
  }
  resolved->default_prompt_name = name;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Encoder>> LoadModel(const ModelSpec& spec,
                                                   at::Device device,
                                                   at::ScalarType dtype,
                                                   ModelSpec* resolved) {
  if (!spec.model_dir.empty()) {
    CheckpointOverrides overrides;
    overrides.pooling = spec.pooling;
    overrides.normalize = spec.normalize;
    overrides.rope_scaling = spec.rope_scaling;
    if (spec.rerank_template.has_value()) {
      overrides.answer_yes = spec.rerank_template->yes;
      overrides.answer_no = spec.rerank_template->no;
    }
    auto loaded = LoadCheckpoint(spec.model_dir, overrides, device, dtype);
    if (!loaded.ok()) {
      return absl::Status(loaded.status().code(),
                          absl::StrCat("model \"", spec.name,
                                       "\": ", loaded.status().message()));
    }
    if (spec.rerank_template.has_value()) {
      const ScoreHead* head = loaded->encoder->score_head();
      if (head == nullptr || head->num_labels() != 1) {
        return absl::InvalidArgumentError(absl::StrCat(
            "model \"", spec.name,
            "\": a rerank template needs a reranker: a checkpoint with a "
            "one-logit classification head, or a causal language model "
            "scored by the template's answer tokens (yes, no); this one has ",
            head == nullptr ? "no head"
                            : absl::StrCat(head->num_labels(), " labels")));
      }
    }
    if (resolved != nullptr) {
      *resolved = spec;
      resolved->config = loaded->config;
      resolved->family = loaded->family;
      resolved->include_prompt = loaded->include_prompt;
      resolved->lowercase = loaded->lowercase;
      resolved->colbert = loaded->colbert;
      resolved->unread_config_keys = loaded->unread_keys;
      if (!spec.prompts_set) {
        resolved->prompts = loaded->prompts;
        resolved->default_prompt_name = loaded->default_prompt_name;
      }
      RETURN_IF_ERROR(ApplyForcedPrompt(spec, resolved));
    }
    return std::move(loaded->encoder);
  }
  if (resolved != nullptr) *resolved = spec;
  std::map<std::string, at::Tensor> weights;
  if (spec.weights_path.empty()) {
    weights = Encoder::RandomStateDict(spec.config, spec.seed);
  } else {
    ASSIGN_OR_RETURN(auto file, ReadSafetensors(spec.weights_path));
    weights = std::move(file.tensors);
  }
  auto encoder = Encoder::Create(spec.config, weights, device, dtype);
  if (!encoder.ok()) {
    return absl::Status(encoder.status().code(),
                        absl::StrCat("model \"", spec.name,
                                     "\": ", encoder.status().message()));
  }
  return encoder;
}

}  // namespace encoder::model
