// WordPiece: greedy longest-match-first over the vocabulary, continuation
// pieces carry a prefix ("##"); a word that cannot be covered, or is longer
// than max_input_chars_per_word characters, becomes the unknown token.
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "server/tokenizer/json_util.h"
#include "server/tokenizer/model.h"
#include "server/tokenizer/unicode.h"

namespace encoder::tokenizer {
namespace {

class WordPiece : public Model {
 public:
  WordPiece(Vocab vocab, std::string unk, int64_t unk_id, std::string prefix,
            size_t max_chars)
      : vocab_(std::move(vocab)),
        unk_(std::move(unk)),
        unk_id_(unk_id),
        prefix_(std::move(prefix)),
        max_chars_(max_chars) {}

  absl::Status Tokenize(std::string_view word,
                        std::vector<Token>* out) const override {
    const size_t first = out->size();
    if (CountChars(word) <= max_chars_) {
      std::string candidate;
      size_t start = 0;
      while (start < word.size()) {
        size_t end = word.size();
        bool found = false;
        while (start < end) {
          candidate.clear();
          if (start > 0) candidate = prefix_;
          candidate.append(word.substr(start, end - start));
          if (auto id = vocab_.Find(candidate)) {
            out->push_back({*id, candidate, static_cast<uint32_t>(start),
                            static_cast<uint32_t>(end)});
            found = true;
            break;
          }
          do {
            --end;
          } while (end > start && (word[end] & 0xc0) == 0x80);
        }
        if (!found) break;
        start = end;
      }
      if (start == word.size()) return absl::OkStatus();
    }
    out->resize(first);
    out->push_back({unk_id_, unk_, 0, static_cast<uint32_t>(word.size())});
    return absl::OkStatus();
  }

  const Vocab& vocab() const override { return vocab_; }
  std::string kind() const override { return "wordpiece"; }

 private:
  static size_t CountChars(std::string_view s) {
    size_t n = 0;
    for (char c : s) n += (c & 0xc0) != 0x80;
    return n;
  }

  Vocab vocab_;
  std::string unk_;
  int64_t unk_id_;
  std::string prefix_;
  size_t max_chars_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Model>> MakeWordPiece(const nlohmann::json& j) {
  Vocab vocab;
  for (const auto& [token, id] : j.at("vocab").items()) {
    vocab.Add(token, TokenIdOf(id));
  }
  const std::string unk = j.value("unk_token", "[UNK]");
  auto unk_id = vocab.Find(unk);
  if (!unk_id) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tokenizer.json: WordPiece unk_token '", unk, "' is not in the vocab"));
  }
  return std::make_unique<WordPiece>(
      std::move(vocab), unk, *unk_id,
      j.value("continuing_subword_prefix", "##"),
      j.value("max_input_chars_per_word", size_t{100}));
}

}  // namespace encoder::tokenizer
