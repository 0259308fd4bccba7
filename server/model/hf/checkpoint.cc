#include "server/model/hf/checkpoint.h"

#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/common/status_macros.h"
#include "server/model/hf/answer_head.h"
#include "server/model/hf/colbert_files.h"
#include "server/model/hf/config_keys.h"
#include "server/model/hf/heads.h"
#include "server/model/hf/importer.h"
#include "server/model/hf/m3_heads.h"
#include "server/model/hf/rope_config.h"
#include "server/model/hf/sentence_transformers.h"
#include "server/model/torch_status.h"
#include "server/model/weights/weight_source.h"

namespace encoder::model {
namespace {

using nlohmann::json;
using Importer = absl::StatusOr<hf::Import> (*)(const json&,
                                                const WeightSource&);

const std::map<std::string, Importer>& Importers() {
  static const auto* importers = new std::map<std::string, Importer>{
      {"bert", &hf::ImportBert},
      {"roberta", &hf::ImportBert},
      {"xlm-roberta", &hf::ImportBert},
      {"camembert", &hf::ImportBert},
      {"electra", &hf::ImportBert},
      {"deberta-v2", &hf::ImportDebertaV2},
      {"mpnet", &hf::ImportMpnet},
      {"distilbert", &hf::ImportDistilBert},
      {"roformer", &hf::ImportRoformer},
      {"modernbert", &hf::ImportModernBert},
      {"qwen2", &hf::ImportQwen2},
      {"qwen3", &hf::ImportQwen3},
      {"llama", &hf::ImportLlama},
      {"mistral", &hf::ImportMistral},
      {"gemma3_text", &hf::ImportGemma3Text},
      {"t5", &hf::ImportT5},
      {"marian", &hf::ImportMarian}};
  return *importers;
}

// The families whose rotary scaling config.json sets (hf/rope_config.h).
absl::Status OverrideRopeScaling(const std::string& model_type,
                                 const std::string& scaling, json* config) {
  static const std::set<std::string> kScaled = {"qwen2", "qwen3", "llama",
                                                "mistral", "modernbert"};
  if (kScaled.count(model_type) == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a rope_scaling override needs a family whose rotary scaling "
        "config.json sets (",
        absl::StrJoin(kScaled, ", "), "); model_type is \"", model_type, "\""));
  }
  if (model_type == "modernbert") {
    return hf::OverrideModernBertRope(scaling, config);
  }
  return hf::OverrideRope(scaling, config);
}

std::string Shape(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

absl::StatusOr<json> ReadConfigJson(const std::string& dir) {
  const std::string path = dir + "/config.json";
  std::ifstream in(path);
  if (!in) {
    return absl::NotFoundError(absl::StrCat(
        dir, " has no config.json (is it a Hugging Face model directory?)"));
  }
  std::stringstream text;
  text << in.rdbuf();
  json config = json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (config.is_discarded() || !config.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": not a JSON object"));
  }
  return config;
}

// The stored name of `name`: itself, or the legacy LayerNorm spelling
// (".gamma" for ".weight", ".beta" for ".bias") that transformers also
// accepts for older BERT checkpoints.
std::string StoredName(const WeightSource& source, const std::string& name) {
  if (source.Has(name)) return name;
  std::string legacy;
  if (absl::EndsWith(name, ".weight")) {
    legacy = name.substr(0, name.size() - 7) + ".gamma";
  } else if (absl::EndsWith(name, ".bias")) {
    legacy = name.substr(0, name.size() - 5) + ".beta";
  }
  return !legacy.empty() && source.Has(legacy) ? legacy : name;
}

bool Ignored(const hf::Import& import, const std::string& name) {
  for (const std::string& p : import.ignored_prefixes) {
    if (absl::StartsWith(name, p)) return true;
  }
  for (const std::string& s : import.ignored_suffixes) {
    if (absl::EndsWith(name, s)) return true;
  }
  return false;
}

// Every slot's sources present, shaped and floating point; nothing else in
// the checkpoint but what the family ignores. Lists up to 8 problems.
absl::Status CheckTensors(const hf::Import& import,
                          const WeightSource& source) {
  std::vector<std::string> problems;
  std::set<std::string> used;
  for (const auto& [slot, src] : import.slots) {
    for (size_t i = 0; i < src.names.size(); ++i) {
      const std::string name = StoredName(source, src.names[i]);
      used.insert(name);
      auto it = source.tensors().find(name);
      if (it == source.tensors().end()) {
        problems.push_back(absl::StrCat("missing tensor \"", name,
                                        "\" (expected shape ",
                                        Shape(src.shapes[i]), ")"));
      } else if (it->second.shape != src.shapes[i]) {
        problems.push_back(absl::StrCat(
            "tensor \"", name, "\" has shape ", Shape(it->second.shape),
            ", but config.json implies ", Shape(src.shapes[i])));
      } else if (!at::isFloatingType(it->second.dtype)) {
        problems.push_back(absl::StrCat("tensor \"", name, "\" has dtype ",
                                        c10::toString(it->second.dtype),
                                        ", not a floating-point dtype"));
      }
    }
  }
  for (const auto& [name, t] : source.tensors()) {
    if (used.count(name) == 0 && !Ignored(import, name)) {
      problems.push_back(absl::StrCat("unexpected tensor \"", name, "\" ",
                                      Shape(t.shape), " for a ", import.family,
                                      " encoder"));
    }
  }
  if (problems.empty()) return absl::OkStatus();
  const size_t total = problems.size();
  if (total > 8) problems.resize(8);
  return absl::InvalidArgumentError(absl::StrCat(
      total, " problem", total > 1 ? "s" : "", " with the weights: ",
      absl::StrJoin(problems, "; "), total > 8 ? "; ..." : ""));
}

// tokenizer_config.json's model_max_length; 0 when the file or the key is
// absent or null, or holds the "unknown" sentinel transformers writes
// (int(1e30), beyond any integer type, so a floating-point number here).
absl::StatusOr<int64_t> TokenizerMaxLength(const std::string& dir) {
  const std::string path = dir + "/tokenizer_config.json";
  std::ifstream in(path);
  if (!in) return 0;
  std::stringstream text;
  text << in.rdbuf();
  const json cfg = json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (cfg.is_discarded() || !cfg.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": not a JSON object"));
  }
  if (!cfg.contains("model_max_length")) return 0;
  const json& v = cfg["model_max_length"];
  if (v.is_null()) return 0;
  if (v.is_number_unsigned() &&
      v.get<uint64_t>() > uint64_t{std::numeric_limits<int64_t>::max()}) {
    return 0;
  }
  if (v.is_number_float() && v.get<double>() >= 1e18) return 0;
  if (!v.is_number_integer() || v.get<int64_t>() <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": model_max_length ", v.dump(), " is not a positive integer"));
  }
  return v.get<int64_t>();
}

absl::Status Settle(const std::string& dir, const CheckpointOverrides& o,
                    ModelConfig* config, std::vector<DenseLayer>* dense,
                    std::optional<SpladeFiles>* splade,
                    std::vector<DenseLayer>* token_dense,
                    bool* normalize_tokens, LoadedCheckpoint* out) {
  ASSIGN_OR_RETURN(auto st, ReadSentenceTransformers(dir, config->d_model));
  // Without sentence-transformers files the family's pooling stands
  // (mean for most; the last token for causal embedders).
  config->pooling =
      o.pooling.value_or(st.present ? st.pooling : config->pooling);
  config->normalize = o.normalize.value_or(st.normalize);
  // sentence-transformers' rule: the Transformer module's max_seq_length
  // (sentence_bert_config.json) when it gives one, else the tokenizer's
  // model_max_length capped by the model's positions (the family's limit
  // here), which is all when the tokenizer's is the "unknown" sentinel.
  // transformers' tokenizers truncate at the same length.
  int64_t limit = st.max_seq_length;
  if (limit == 0) {
    ASSIGN_OR_RETURN(limit, TokenizerMaxLength(dir));
  }
  if (limit > 0) {
    config->max_input_tokens = std::min(config->max_input_tokens, limit);
  }
  *dense = std::move(st.dense);
  *splade = st.splade;
  *token_dense = std::move(st.token_dense);
  *normalize_tokens = st.normalize_tokens;
  ASSIGN_OR_RETURN(out->colbert, hf::ReadColbertFraming(dir, st.pylate));
  // PyLate normalizes every token vector (encode's normalize_embeddings).
  if (out->colbert.has_value()) *normalize_tokens = true;
  out->prompts = std::move(st.prompts);
  out->default_prompt_name = st.default_prompt_name;
  out->include_prompt = st.include_prompt;
  out->lowercase = st.lowercase;
  return absl::OkStatus();
}

// Copies config_sentence_transformers.json's activation_fn (a CrossEncoder
// saved by sentence-transformers 6.x) into config's sentence_transformers
// object, where older releases wrote it and the head reads it; the 6.x
// file's value wins, as the library reads it first.
absl::Status TakeCrossEncoderActivation(const std::string& dir, json* config) {
  const std::string path = dir + "/config_sentence_transformers.json";
  ASSIGN_OR_RETURN(const json st, hf::ReadJsonFile(path));
  if (!st.is_object() || !st.contains("activation_fn") ||
      st["activation_fn"].is_null()) {
    return absl::OkStatus();
  }
  if (!st["activation_fn"].is_string()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": activation_fn must be a class path"));
  }
  if (!(*config)["sentence_transformers"].is_object()) {
    (*config)["sentence_transformers"] = json::object();
  }
  (*config)["sentence_transformers"]["activation_fn"] = st["activation_fn"];
  return absl::OkStatus();
}

// BGE-M3's heads may not stand beside heads of the same kind that the
// sentence-transformers modules or the checkpoint declare.
absl::Status CheckM3Heads(const std::string& dir, const hf::M3Heads& m3,
                          const std::vector<DenseLayer>& token_dense,
                          bool normalize_tokens, bool other_sparse) {
  if (m3.colbert.has_value() && (!token_dense.empty() || normalize_tokens)) {
    return absl::InvalidArgumentError(absl::StrCat(
        dir, ": ", hf::kColbertHeadFile,
        " and the sentence-transformers token modules both project the "
        "tokens; keep one"));
  }
  if (m3.sparse.has_value() && other_sparse) {
    return absl::InvalidArgumentError(absl::StrCat(
        dir, ": ", hf::kSparseHeadFile,
        " and the checkpoint's masked-LM (SPLADE) head are both sparse "
        "heads; keep one"));
  }
  return absl::OkStatus();
}

absl::StatusOr<LoadedCheckpoint> Load(const std::string& dir,
                                      const CheckpointOverrides& overrides,
                                      at::Device device, at::ScalarType dtype) {
  ASSIGN_OR_RETURN(auto config, ReadConfigJson(dir));
  const std::string model_type =
      config.contains("model_type") && config["model_type"].is_string()
          ? config["model_type"].get<std::string>()
          : "";
  auto importer = Importers().find(model_type);
  if (importer == Importers().end()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "config.json model_type \"", model_type, "\" is not supported; ",
        "supported: ", absl::StrJoin(SupportedModelTypes(), ", ")));
  }
  // Every key the libraries write is read, known to change nothing, or
  // refused here by name (hf_config_keys.h); the rest are reported.
  ASSIGN_OR_RETURN(auto key_reports, hf::ClassifyModelDir(dir));
  std::vector<std::string> unread_keys;
  for (const auto& [file, report] : key_reports) {
    RETURN_IF_ERROR(hf::RefusedKeys(file, report));
    for (const std::string& key : report.unread) {
      unread_keys.push_back(absl::StrCat(file, ": ", key));
    }
  }
  if (!overrides.rope_scaling.empty()) {
    RETURN_IF_ERROR(
        OverrideRopeScaling(model_type, overrides.rope_scaling, &config));
  }
  ASSIGN_OR_RETURN(auto source, WeightSource::Open(dir));
  ASSIGN_OR_RETURN(auto import, importer->second(config, *source));
  import.config.positional.rope_scaling.overridden =
      !overrides.rope_scaling.empty();
  if (absl::Status s = ValidateConfig(import.config); !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("config.json is inconsistent: ", s.message()));
  }
  // sentence-transformers 6.x keeps a CrossEncoder's activation in
  // config_sentence_transformers.json, and reads it before config.json's.
  RETURN_IF_ERROR(TakeCrossEncoderActivation(dir, &config));
  ASSIGN_OR_RETURN(auto head, hf::FindScoreHead(config, import.family, *source,
                                                import.config.d_model));
  if (head.has_value()) {
    for (const std::string& name : head->tensors()) {
      import.ignored_prefixes.push_back(name);
    }
  }
  RETURN_IF_ERROR(CheckTensors(import, *source));
  LoadedCheckpoint out;
  out.unread_keys = std::move(unread_keys);
  out.family = import.family;
  out.config = import.config;
  out.stored_bytes = source->stored_bytes();
  std::vector<DenseLayer> dense;
  std::optional<SpladeFiles> splade;
  std::vector<DenseLayer> token_dense;
  bool normalize_tokens = false;
  RETURN_IF_ERROR(Settle(dir, overrides, &out.config, &dense, &splade,
                         &token_dense, &normalize_tokens, &out));
  // The stored token embedding table, when the encoder's is that one
  // tensor (a sparse head's tied decoder shares it).
  std::string embedding_name;
  if (auto it = import.slots.find("embedding.weight");
      it != import.slots.end() && it->second.names.size() == 1) {
    embedding_name = StoredName(*source, it->second.names[0]);
  }
  ASSIGN_OR_RETURN(
      auto sparse,
      hf::FindSparseHead(config, import.family, *source, import.config.d_model,
                         import.config.vocab_size, embedding_name, splade));
  std::map<std::string, at::Tensor> state;
  std::optional<ScoreHead> score_head;
  std::optional<SparseHead> sparse_head;
  hf::M3Heads m3;
  try {
    ASSIGN_OR_RETURN(m3, hf::ReadM3Heads(dir, import.config.d_model,
                                         import.config.vocab_size, dtype));
    RETURN_IF_ERROR(CheckM3Heads(dir, m3, token_dense, normalize_tokens,
                                 sparse.has_value()));
    for (const auto& [slot, src] : import.slots) {
      std::vector<at::Tensor> parts;
      for (const std::string& name : src.names) {
        ASSIGN_OR_RETURN(auto t,
                         source->Load(StoredName(*source, name),
                                      src.add != 0 ? at::kFloat : dtype));
        parts.push_back(std::move(t));
      }
      state[slot] = parts.size() == 1 ? parts[0] : at::cat(parts, 0);
      if (src.add != 0) state[slot] = (state[slot] + src.add).to(dtype);
    }
    if (head.has_value()) {
      ASSIGN_OR_RETURN(auto loaded, hf::LoadScoreHead(*head, *source, dtype));
      score_head = std::move(loaded);
    } else if (!overrides.answer_yes.empty()) {
      ASSIGN_OR_RETURN(auto loaded,
                       hf::LoadAnswerHead(
                           dir, config, import.family, *source, embedding_name,
                           import.config.d_model, import.config.vocab_size,
                           overrides.answer_yes, overrides.answer_no, dtype));
      score_head = std::move(loaded);
    }
    if (sparse.has_value()) {
      ASSIGN_OR_RETURN(auto loaded,
                       hf::LoadSparseHead(*sparse, *source, dtype));
      sparse_head = std::move(loaded);
    }
  } catch (const c10::Error& e) {
    return StatusFromTorchError(e, "loading the checkpoint");
  }
  source.reset();
  ASSIGN_OR_RETURN(auto encoder,
                   Encoder::Create(out.config, state, device, dtype));
  out.encoder = std::move(encoder);
  out.encoder->set_output_dense(std::move(dense));
  if (!token_dense.empty() || normalize_tokens) {
    out.encoder->set_token_dense(std::move(token_dense), normalize_tokens);
  }
  if (score_head.has_value()) {
    out.encoder->set_score_head(std::move(*score_head));
  }
  if (sparse_head.has_value()) {
    RETURN_IF_ERROR(out.encoder->set_sparse_head(std::move(*sparse_head)));
  }
  if (m3.colbert.has_value()) {
    // FlagEmbedding's ColBERT vectors: the tokens after CLS, normalized.
    out.encoder->set_token_dense({std::move(*m3.colbert)}, /*normalize=*/true,
                                 /*skip_first=*/true);
  }
  if (m3.sparse.has_value()) {
    RETURN_IF_ERROR(out.encoder->set_sparse_head(std::move(*m3.sparse)));
  }
  return out;
}

}  // namespace

std::vector<std::string> SupportedModelTypes() {
  std::vector<std::string> types;
  for (const auto& [name, importer] : Importers()) types.push_back(name);
  return types;
}

absl::StatusOr<LoadedCheckpoint> LoadCheckpoint(
    const std::string& dir, const CheckpointOverrides& overrides,
    at::Device device, at::ScalarType dtype) {
  auto loaded = Load(dir, overrides, device, dtype);
  if (!loaded.ok()) {
    return absl::Status(
        loaded.status().code(),
        absl::StrCat("checkpoint ", dir, ": ", loaded.status().message()));
  }
  return loaded;
}

}  // namespace encoder::model
