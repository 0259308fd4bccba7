// Unigram language model: the Viterbi path of highest total log-probability
// over every segmentation into vocabulary pieces; a character no piece covers
// costs (lowest score - 10) and consecutive unknowns fuse into one token.
#include <limits>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "server/tokenizer/json_util.h"
#include "server/tokenizer/model.h"
#include "server/tokenizer/unicode.h"

namespace encoder::tokenizer {
namespace {

constexpr double kUnkPenalty = 10.0;

// Byte trie over the pieces, for common-prefix search.
class Trie {
 public:
  void Insert(std::string_view key, int64_t id) {
    int32_t node = 0;
    for (unsigned char c : key) {
      auto [it, inserted] = edges_.try_emplace(Key(node, c), next_);
      if (inserted) {
        ++next_;
        values_.push_back(-1);
      }
      node = it->second;
    }
    values_[node] = id;
  }
  // Calls f(length, id) for every piece that is a prefix of text.
  template <typename F>
  void Prefixes(std::string_view text, F f) const {
    int32_t node = 0;
    for (size_t i = 0; i < text.size(); ++i) {
      auto it = edges_.find(Key(node, static_cast<unsigned char>(text[i])));
      if (it == edges_.end()) return;
      node = it->second;
      if (values_[node] >= 0) f(i + 1, values_[node]);
    }
  }

 private:
  static uint64_t Key(int32_t node, unsigned char c) {
    return (static_cast<uint64_t>(node) << 8) | c;
  }
  absl::flat_hash_map<uint64_t, int32_t> edges_;
  std::vector<int64_t> values_{-1};
  int32_t next_ = 1;
};

class Unigram : public Model {
 public:
  Unigram(Vocab vocab, std::vector<double> scores, std::optional<int64_t> unk,
          bool byte_fallback)
      : vocab_(std::move(vocab)),
        scores_(std::move(scores)),
        unk_id_(unk),
        byte_fallback_(byte_fallback) {
    double min_score = std::numeric_limits<double>::max();
    for (int64_t id = 0; id < vocab_.size(); ++id) {
      if (const std::string* t = vocab_.Token(id)) trie_.Insert(*t, id);
      min_score = std::min(min_score, scores_[id]);
    }
    unk_score_ = min_score - kUnkPenalty;
  }

  absl::Status Tokenize(std::string_view word,
                        std::vector<Token>* out) const override {
    struct Node {
      double score = 0;
      int64_t start = -1;
      int64_t id = -1;
    };
    std::vector<Node> best(word.size() + 1);
    size_t pos = 0;
    while (pos < word.size()) {
      const double here = best[pos].score;
      const size_t mblen = Utf8Length(static_cast<unsigned char>(word[pos]));
      bool single = false;
      trie_.Prefixes(word.substr(pos), [&](size_t len, int64_t id) {
        Node& target = best[pos + len];
        const double cand = here + scores_[id];
        if (target.start < 0 || cand > target.score) {
          target = {cand, static_cast<int64_t>(pos), id};
        }
        single = single || len == mblen;
      });
      if (!single) {
        if (!unk_id_) {
          return absl::InvalidArgumentError(
              "Unigram model has no unk_id and met an unknown character");
        }
        Node& target = best[pos + mblen];
        const double cand = here + unk_score_;
        if (target.start < 0 || cand > target.score) {
          target = {cand, static_cast<int64_t>(pos), *unk_id_};
        }
      }
      pos += mblen;
    }
    // Walk back; consecutive unknowns fuse into one piece.
    std::vector<std::pair<size_t, size_t>> pieces;
    size_t end = word.size();
    bool last_unk = false;
    while (end > 0) {
      const Node& node = best[end];
      const bool unk = unk_id_ && node.id == *unk_id_;
      if (unk && last_unk) {
        pieces.back().first = node.start;
      } else {
        pieces.push_back({static_cast<size_t>(node.start), end});
      }
      last_unk = unk;
      end = node.start;
    }
    for (auto it = pieces.rbegin(); it != pieces.rend(); ++it) {
      Emit(word, it->first, it->second, out);
    }
    return absl::OkStatus();
  }

  const Vocab& vocab() const override { return vocab_; }
  std::string kind() const override { return "unigram"; }

 private:
  void Emit(std::string_view word, size_t start, size_t end,
            std::vector<Token>* out) const {
    const std::string piece(word.substr(start, end - start));
    const auto s = static_cast<uint32_t>(start), e = static_cast<uint32_t>(end);
    if (auto id = vocab_.Find(piece)) {
      out->push_back({*id, piece, s, e});
      return;
    }
    if (byte_fallback_) {
      std::vector<Token> bytes;
      for (unsigned char b : piece) {
        const std::string name = absl::StrFormat("<0x%02X>", b);
        auto id = vocab_.Find(name);
        if (!id) break;
        bytes.push_back({*id, name, s, e});
      }
      if (bytes.size() == piece.size()) {
        out->insert(out->end(), bytes.begin(), bytes.end());
        return;
      }
    }
    out->push_back({*unk_id_, piece, s, e});
  }

  Vocab vocab_;
  std::vector<double> scores_;
  std::optional<int64_t> unk_id_;
  bool byte_fallback_;
  double unk_score_ = 0;
  Trie trie_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Model>> MakeUnigram(const nlohmann::json& j) {
  Vocab vocab;
  std::vector<double> scores;
  int64_t id = 0;
  for (const nlohmann::json& entry : j.at("vocab")) {
    vocab.Add(entry.at(0).get<std::string>(), id++);
    scores.push_back(entry.at(1).get<double>());
  }
  std::optional<int64_t> unk;
  if (j.contains("unk_id") && !j["unk_id"].is_null()) {
    unk = IntegerOf(j["unk_id"]);
    if (*unk < 0 || *unk >= id) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tokenizer.json: Unigram unk_id ", *unk, " outside the vocab"));
    }
  }
  return std::make_unique<Unigram>(std::move(vocab), std::move(scores), unk,
                                   j.value("byte_fallback", false));
}

}  // namespace encoder::tokenizer
