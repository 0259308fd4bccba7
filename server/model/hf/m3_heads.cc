#include "server/model/hf/m3_heads.h"

#include <filesystem>
#include <map>
#include <utility>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "server/common/status_macros.h"
#include "server/model/hf/config_keys.h"
#include "server/model/weights/torch_pickle.h"

namespace encoder::model::hf {
namespace {

using json = nlohmann::json;

// The file's `weight` [out, d_model] and `bias` [out] (out == `rows` when
// `rows` > 0), in `dtype`.
absl::StatusOr<DenseLayer> ReadLinear(const std::string& path, int64_t d_model,
                                      int64_t rows, at::ScalarType dtype) {
  ASSIGN_OR_RETURN(auto state, ReadTorchStateDict(path));
  auto weight = state.find("weight");
  auto bias = state.find("bias");
  if (weight == state.end() || bias == state.end() || state.size() != 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": expected the state of a torch.nn.Linear (weight, bias)"));
  }
  const at::Tensor& w = weight->second;
  const at::Tensor& b = bias->second;
  if (w.dim() != 2 || w.size(1) != d_model || w.size(0) < 1 ||
      (rows > 0 && w.size(0) != rows) || b.dim() != 1 ||
      b.size(0) != w.size(0) || !w.is_floating_point() ||
      !b.is_floating_point()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": weight ", c10::str(w.sizes()), " and bias ",
                     c10::str(b.sizes()), " do not project width ", d_model,
                     rows > 0 ? absl::StrCat(" onto ", rows) : std::string()));
  }
  DenseLayer layer;
  layer.weight = w.to(dtype);
  layer.bias = b.to(dtype);
  return layer;
}

// The ids FlagEmbedding's sparse weights leave out: the tokenizer's cls,
// eos, pad and unk tokens (those it has).
absl::StatusOr<std::vector<int64_t>> DroppedIds(const std::string& dir) {
  // transformers reads special_tokens_map.json over tokenizer_config.json.
  ASSIGN_OR_RETURN(json map, ReadJsonFile(dir + "/special_tokens_map.json"));
  ASSIGN_OR_RETURN(json config, ReadJsonFile(dir + "/tokenizer_config.json"));
  const json files = json::array({map, config});
  const std::string tokenizer_path = dir + "/tokenizer.json";
  ASSIGN_OR_RETURN(json tokenizer, ReadJsonFile(tokenizer_path));
  std::vector<int64_t> ids;
  for (const char* key : {"cls_token", "eos_token", "pad_token", "unk_token"}) {
    const std::string text = TokenText(files, key);
    if (text.empty()) continue;
    const int64_t id =
        tokenizer.is_object() ? TokenizerJsonId(tokenizer, text) : -1;
    if (id < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          dir, "/", kSparseHeadFile, ": the tokenizer's ", key, " \"", text,
          "\" (whose weight FlagEmbedding drops) has no id in ",
          tokenizer_path));
    }
    ids.push_back(id);
  }
  return ids;
}

}  // namespace

std::string TokenText(const json& files, const std::string& key) {
  for (const json& file : files) {
    if (!file.is_object() || !file.contains(key)) continue;
    const json& v = file[key];
    if (v.is_string()) return v.get<std::string>();
    if (v.is_object() && v.contains("content") && v["content"].is_string()) {
      return v["content"].get<std::string>();
    }
  }
  return "";
}

// `text`'s id in tokenizer.json: an added token's, else the model's
// vocabulary entry (an object of text -> id, or Unigram's list of
// [piece, score]); -1 when it has none.
int64_t TokenizerJsonId(const nlohmann::json& tokenizer,
                        const std::string& text) {
  if (tokenizer.contains("added_tokens") &&
      tokenizer["added_tokens"].is_array()) {
    for (const json& t : tokenizer["added_tokens"]) {
      if (t.is_object() && t.value("content", "") == text && t.contains("id") &&
          t["id"].is_number_integer()) {
        return t["id"].get<int64_t>();
      }
    }
  }
  if (!tokenizer.contains("model") || !tokenizer["model"].is_object()) {
    return -1;
  }
  const json& vocab = tokenizer["model"].value("vocab", json());
  if (vocab.is_object() && vocab.contains(text) &&
      vocab[text].is_number_integer()) {
    return vocab[text].get<int64_t>();
  }
  if (vocab.is_array()) {
    for (size_t i = 0; i < vocab.size(); ++i) {
      if (vocab[i].is_array() && !vocab[i].empty() && vocab[i][0] == text) {
        return static_cast<int64_t>(i);
      }
    }
  }
  return -1;
}

absl::StatusOr<M3Heads> ReadM3Heads(const std::string& dir, int64_t d_model,
                                    int64_t vocab, at::ScalarType dtype) {
  M3Heads heads;
  const std::string colbert = absl::StrCat(dir, "/", kColbertHeadFile);
  const std::string sparse = absl::StrCat(dir, "/", kSparseHeadFile);
  if (std::filesystem::exists(colbert)) {
    ASSIGN_OR_RETURN(heads.colbert, ReadLinear(colbert, d_model, 0, dtype));
  }
  if (std::filesystem::exists(sparse)) {
    SparseHead head;
    head.kind = SparseHead::Kind::kTokenWeight;
    ASSIGN_OR_RETURN(DenseLayer layer, ReadLinear(sparse, d_model, 1, dtype));
    head.layers.push_back(std::move(layer));
    head.token_vocab = vocab;
    ASSIGN_OR_RETURN(head.dropped_ids, DroppedIds(dir));
    for (int64_t id : head.dropped_ids) {
      if (id >= vocab) {
        return absl::InvalidArgumentError(
            absl::StrCat(sparse, ": special token id ", id,
                         " is outside the model's vocabulary of ", vocab));
      }
    }
    heads.sparse = std::move(head);
  }
  return heads;
}

}  // namespace encoder::model::hf
