// tokenizer.json models: turn one pre-tokenized word into vocabulary tokens.
#ifndef ENCODER_SERVER_TOKENIZER_MODEL_H_
#define ENCODER_SERVER_TOKENIZER_MODEL_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json_fwd.hpp"

namespace encoder::tokenizer {

struct Token {
  int64_t id;
  std::string value;
  uint32_t start;  // byte offsets inside the word
  uint32_t end;
};

// Token strings <-> ids.
class Vocab {
 public:
  void Add(std::string token, int64_t id);
  std::optional<int64_t> Find(std::string_view token) const;
  // Null when the id has no token.
  const std::string* Token(int64_t id) const;
  int64_t size() const { return static_cast<int64_t>(by_id_.size()); }

 private:
  absl::flat_hash_map<std::string, int64_t> ids_;
  std::vector<std::string> by_id_;
  std::vector<bool> present_;
};

class Model {
 public:
  virtual ~Model() = default;
  // Appends the tokens of `word` (a non-empty pre-tokenized piece).
  virtual absl::Status Tokenize(std::string_view word,
                                std::vector<Token>* out) const = 0;
  virtual const Vocab& vocab() const = 0;
  virtual std::string kind() const = 0;  // "wordpiece", "bpe", "unigram"
};

absl::StatusOr<std::unique_ptr<Model>> MakeModel(const nlohmann::json& j);

// The individual models (one .cc each).
absl::StatusOr<std::unique_ptr<Model>> MakeWordPiece(const nlohmann::json& j);
absl::StatusOr<std::unique_ptr<Model>> MakeBpe(const nlohmann::json& j);
absl::StatusOr<std::unique_ptr<Model>> MakeUnigram(const nlohmann::json& j);

}  // namespace encoder::tokenizer

#endif  // ENCODER_SERVER_TOKENIZER_MODEL_H_
