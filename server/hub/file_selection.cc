#include "server/hub/file_selection.h"

#include <set>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace encoder::hub {
namespace {

using nlohmann::json;

constexpr const char* kTokenizerFiles[] = {"tokenizer.json",
                                           "tokenizer_config.json",
                                           "special_tokens_map.json",
                                           "added_tokens.json",
                                           "vocab.txt",
                                           "vocab.json",
                                           "merges.txt"};

bool IsTokenizerFile(absl::string_view name) {
  for (const char* f : kTokenizerFiles) {
    if (name == f) return true;
  }
  // SentencePiece: spiece.model, sentencepiece.bpe.model, tokenizer.model.
  return absl::EndsWith(name, ".model") && name.size() > 6;
}

bool IsSafetensors(absl::string_view name) {
  return absl::EndsWith(name, ".safetensors") && name.size() > 12;
}

// pytorch_model.bin, its shards pytorch_model-0000N-of-0000M.bin and their
// index pytorch_model.bin.index.json.
bool IsPytorchPickle(absl::string_view name) {
  return absl::StartsWith(name, "pytorch_model") &&
         (absl::EndsWith(name, ".bin") ||
          absl::EndsWith(name, ".bin.index.json"));
}

// The last component of a '/'-separated path, and whether `path` lies
// directly in `dir` ("" for the root).
absl::string_view BaseName(absl::string_view path) {
  const size_t slash = path.rfind('/');
  return slash == absl::string_view::npos ? path : path.substr(slash + 1);
}
bool DirectlyIn(absl::string_view path, absl::string_view dir) {
  if (dir.empty()) return path.find('/') == absl::string_view::npos;
  return path.size() > dir.size() + 1 && absl::StartsWith(path, dir) &&
         path[dir.size()] == '/' &&
         path.find('/', dir.size() + 1) == absl::string_view::npos;
}

}  // namespace

absl::StatusOr<std::vector<std::string>> ModulePaths(
    absl::string_view modules_json) {
  json modules = json::parse(modules_json, nullptr, /*allow_exceptions=*/false);
  if (!modules.is_array()) {
    return absl::InvalidArgumentError(
        "modules.json is not a JSON list of modules");
  }
  std::vector<std::string> paths;
  for (const json& module : modules) {
    if (!module.is_object()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "modules.json: a module is not an object: ", module.dump()));
    }
    auto it = module.find("path");
    if (it == module.end() || !it->is_string()) continue;
    std::string path = it->get<std::string>();
    while (!path.empty() && path.back() == '/') path.pop_back();
    if (!path.empty()) paths.push_back(path);
  }
  return paths;
}

bool IsRootModelFile(absl::string_view name) {
  if (name == "config.json" || name == "modules.json" ||
      name == "config_sentence_transformers.json" ||
      name == "model.safetensors.index.json") {
    return true;
  }
  // BGE-M3's ColBERT and sparse heads (FlagEmbedding's layout), which the
  // server reads without Python (server/model/weights/torch_pickle.h).
  if (name == "colbert_linear.pt" || name == "sparse_linear.pt") return true;
  // sentence_bert_config.json and its per-family spellings.
  if (absl::StartsWith(name, "sentence_") &&
      absl::EndsWith(name, "_config.json")) {
    return true;
  }
  return IsTokenizerFile(name) || IsSafetensors(name);
}

absl::StatusOr<std::vector<std::string>> SelectModelFiles(
    const std::vector<std::string>& repo_files,
    const std::vector<std::string>& module_paths,
    absl::string_view repo_label) {
  std::set<std::string> small, weights;
  // The directories (root "", modules) holding pickles, and those holding
  // safetensors: a directory with pickles and no safetensors (the root
  // model beside a module's own safetensors, say) lacks its weights.
  std::set<std::string> pickle_dirs, safetensors_dirs;
  bool has_config = false;
  for (const std::string& path : repo_files) {
    const absl::string_view base = BaseName(path);
    const std::string* dir = nullptr;
    static const std::string kRoot;
    if (DirectlyIn(path, "")) {
      dir = &kRoot;
    } else {
      for (const std::string& module_dir : module_paths) {
        if (DirectlyIn(path, module_dir)) dir = &module_dir;
      }
    }
    if (dir == nullptr) continue;
    if (IsPytorchPickle(base)) pickle_dirs.insert(*dir);
    const bool chosen = dir->empty()
                            ? IsRootModelFile(base)
                            : absl::EndsWith(base, ".json") ||
                                  IsSafetensors(base) || IsTokenizerFile(base);
    if (!chosen) continue;
    has_config = has_config || base == "config.json";
    if (IsSafetensors(base)) {
      weights.insert(path);
      safetensors_dirs.insert(*dir);
    } else {
      small.insert(path);
    }
  }
  if (!has_config) {
    return absl::FailedPreconditionError(absl::StrCat(
        repo_label, " has no config.json: it is not a Transformers model"));
  }
  bool pickles_only = false;
  for (const std::string& dir : pickle_dirs) {
    pickles_only = pickles_only || safetensors_dirs.count(dir) == 0;
  }
  if (weights.empty() || pickles_only) {
    if (pickles_only) {
      return absl::FailedPreconditionError(absl::StrCat(
          repo_label,
          " has only PyTorch pickle weights (pytorch_model*.bin), which the "
          "server does not read: download the repository with its .bin "
          "files (e.g. huggingface_hub's snapshot_download) and convert it "
          "with `python scripts/convert_to_safetensors.py DIR`, then serve "
          "DIR"));
    }
    return absl::FailedPreconditionError(absl::StrCat(
        repo_label,
        " has no safetensors weights (*.safetensors) at its root or in a "
        "sentence-transformers module; the server reads no other format"));
  }
  std::vector<std::string> out(small.begin(), small.end());
  out.insert(out.end(), weights.begin(), weights.end());
  return out;
}

}  // namespace encoder::hub
