#include "server/tokenizer/model.h"

#include <nlohmann/json.hpp>

#include "server/tokenizer/json_util.h"

namespace encoder::tokenizer {

void Vocab::Add(std::string token, int64_t id) {
  if (id < 0) return;
  if (id >= static_cast<int64_t>(by_id_.size())) {
    by_id_.resize(id + 1);
    present_.resize(id + 1, false);
  }
  by_id_[id] = token;
  present_[id] = true;
  ids_[std::move(token)] = id;
}

std::optional<int64_t> Vocab::Find(std::string_view token) const {
  auto it = ids_.find(absl::string_view(token.data(), token.size()));
  if (it == ids_.end()) return std::nullopt;
  return it->second;
}

const std::string* Vocab::Token(int64_t id) const {
  if (id < 0 || id >= static_cast<int64_t>(by_id_.size()) || !present_[id]) {
    return nullptr;
  }
  return &by_id_[id];
}

absl::StatusOr<std::unique_ptr<Model>> MakeModel(const nlohmann::json& j) {
  std::string type = j.value("type", "");
  if (type.empty()) {
    // Old files omit the type: infer it from the fields.
    if (j.contains("merges")) {
      type = "BPE";
    } else if (j.contains("continuing_subword_prefix")) {
      type = "WordPiece";
    } else if (j.contains("vocab") && j["vocab"].is_array()) {
      type = "Unigram";
    }
  }
  if (type == "WordPiece") return MakeWordPiece(j);
  if (type == "BPE") return MakeBpe(j);
  if (type == "Unigram") return MakeUnigram(j);
  return UnknownType("model", type);
}

}  // namespace encoder::tokenizer
