// Byte-pair encoding: characters (or byte-fallback tokens) are merged pair by
// pair in merge-rank order, as the Hugging Face library does it.
#include <queue>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "server/tokenizer/json_util.h"
#include "server/tokenizer/model.h"
#include "server/tokenizer/unicode.h"

namespace encoder::tokenizer {
namespace {

struct Symbol {
  int64_t id;
  int32_t prev, next;
  uint32_t start, len;  // bytes in the word; len 0 = merged away
};

struct Merge {
  int64_t rank;
  int64_t new_id;
};

struct QueueItem {
  int64_t rank;
  int32_t pos;
  int64_t new_id;
  bool operator<(const QueueItem& o) const {  // max-heap: lowest rank first
    return rank != o.rank ? rank > o.rank : pos > o.pos;
  }
};

uint64_t PairKey(int64_t a, int64_t b) {
  return (static_cast<uint64_t>(a) << 32) | static_cast<uint32_t>(b);
}

struct BpeOptions {
  std::optional<std::string> unk;
  std::string prefix, suffix;
  bool fuse_unk = false, byte_fallback = false, ignore_merges = false;
};

class Bpe : public Model {
 public:
  Bpe(Vocab vocab, absl::flat_hash_map<uint64_t, Merge> merges, BpeOptions o)
      : vocab_(std::move(vocab)), merges_(std::move(merges)), o_(o) {
    if (o_.unk) unk_id_ = vocab_.Find(*o_.unk);
  }

  absl::Status Tokenize(std::string_view word,
                        std::vector<Token>* out) const override {
    if (o_.ignore_merges) {
      if (auto id = vocab_.Find(word)) {
        out->push_back(
            {*id, std::string(word), 0, static_cast<uint32_t>(word.size())});
        return absl::OkStatus();
      }
    }
    std::vector<Symbol> symbols = Initial(word);
    MergeAll(&symbols);
    // Offsets are running sums of symbol lengths (a character without any
    // token is dropped and shifts the rest, as in the reference library).
    uint32_t offset = 0;
    for (const Symbol& s : symbols) {
      if (s.len == 0) continue;
      const std::string* value = vocab_.Token(s.id);
      out->push_back(
          {s.id, value ? *value : std::string(), offset, offset + s.len});
      offset += s.len;
    }
    return absl::OkStatus();
  }

  const Vocab& vocab() const override { return vocab_; }
  std::string kind() const override { return "bpe"; }

 private:
  void Add(std::vector<Symbol>* symbols, int64_t id, uint32_t start,
           uint32_t len) const {
    const auto n = static_cast<int32_t>(symbols->size());
    symbols->push_back({id, n - 1, n + 1, start, len});
  }

  std::vector<Symbol> Initial(std::string_view w) const {
    std::vector<Symbol> symbols;
    symbols.reserve(w.size());
    // A pending unknown run: [unk_start, unk_end), none when unk_start < 0.
    int64_t unk_start = -1;
    uint32_t unk_end = 0;
    auto flush_unk = [&] {
      if (unk_start < 0) return;
      Add(&symbols, *unk_id_, static_cast<uint32_t>(unk_start),
          unk_end - static_cast<uint32_t>(unk_start));
      unk_start = -1;
    };
    std::string s;
    size_t pos = 0;
    while (pos < w.size()) {
      const size_t start = pos;
      pos += Utf8Length(static_cast<unsigned char>(w[pos]));
      s.clear();
      if (start > 0) s = o_.prefix;
      s.append(w.substr(start, pos - start));
      if (pos == w.size()) s.append(o_.suffix);
      if (auto id = vocab_.Find(s)) {
        flush_unk();
        Add(&symbols, *id, start, pos - start);
        continue;
      }
      if (o_.byte_fallback && ByteFallback(s, start, &symbols)) continue;
      if (unk_id_) {
        if (unk_start >= 0 && o_.fuse_unk) {
          unk_end = pos;
          continue;
        }
        flush_unk();
        unk_start = static_cast<int64_t>(start);
        unk_end = pos;
      }
    }
    flush_unk();
    if (!symbols.empty()) symbols.back().next = -1;
    return symbols;
  }

  // Each byte of s as a <0xNN> token, when all of them are in the vocab.
  bool ByteFallback(const std::string& s, size_t start,
                    std::vector<Symbol>* symbols) const {
    std::vector<int64_t> ids;
    for (unsigned char b : s) {
      auto id = vocab_.Find(absl::StrFormat("<0x%02X>", b));
      if (!id) return false;
      ids.push_back(*id);
    }
    // Offsets as the library gives them: one byte each from the start.
    for (size_t k = 0; k < ids.size(); ++k) {
      Add(symbols, ids[k], static_cast<uint32_t>(start + k), 1);
    }
    return true;
  }

  void MergeAll(std::vector<Symbol>* sym) const {
    std::vector<Symbol>& s = *sym;
    std::priority_queue<QueueItem> queue;
    for (size_t i = 0; i + 1 < s.size(); ++i) {
      auto it = merges_.find(PairKey(s[i].id, s[i + 1].id));
      if (it != merges_.end()) {
        queue.push(
            {it->second.rank, static_cast<int32_t>(i), it->second.new_id});
      }
    }
    while (!queue.empty()) {
      const QueueItem top = queue.top();
      queue.pop();
      Symbol& cur = s[top.pos];
      if (cur.len == 0 || cur.next == -1) continue;
      const Symbol right = s[cur.next];
      auto it = merges_.find(PairKey(cur.id, right.id));
      if (it == merges_.end() || it->second.new_id != top.new_id) continue;
      s[cur.next].len = 0;
      cur.id = top.new_id;
      cur.len += right.len;
      cur.next = right.next;
      if (right.next >= 0 && right.next < static_cast<int32_t>(s.size())) {
        s[right.next].prev = top.pos;
      }
      if (cur.prev >= 0) {
        auto m = merges_.find(PairKey(s[cur.prev].id, cur.id));
        if (m != merges_.end()) {
          queue.push({m->second.rank, cur.prev, m->second.new_id});
        }
      }
      if (cur.next >= 0 && cur.next < static_cast<int32_t>(s.size())) {
        auto m = merges_.find(PairKey(cur.id, s[cur.next].id));
        if (m != merges_.end()) {
          queue.push({m->second.rank, top.pos, m->second.new_id});
        }
      }
    }
  }

  Vocab vocab_;
  absl::flat_hash_map<uint64_t, Merge> merges_;
  BpeOptions o_;
  std::optional<int64_t> unk_id_;
};

std::string OptString(const nlohmann::json& j, const char* key) {
  if (!j.contains(key) || j[key].is_null()) return "";
  return j[key].get<std::string>();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Model>> MakeBpe(const nlohmann::json& j) {
  Vocab vocab;
  for (const auto& [token, id] : j.at("vocab").items()) {
    vocab.Add(token, TokenIdOf(id));
  }
  BpeOptions o;
  if (j.contains("unk_token") && !j["unk_token"].is_null()) {
    o.unk = j["unk_token"].get<std::string>();
  }
  o.prefix = OptString(j, "continuing_subword_prefix");
  o.suffix = OptString(j, "end_of_word_suffix");
  o.fuse_unk = j.value("fuse_unk", false);
  o.byte_fallback = j.value("byte_fallback", false);
  o.ignore_merges = j.value("ignore_merges", false);
  absl::flat_hash_map<uint64_t, Merge> merges;
  int64_t rank = 0;
  const size_t prefix_len = o.prefix.size();
  for (const nlohmann::json& m : j.at("merges")) {
    std::string a, b;
    if (m.is_array()) {
      a = m.at(0).get<std::string>();
      b = m.at(1).get<std::string>();
    } else {
      const std::string line = m.get<std::string>();
      const size_t sp = line.find(' ');
      if (sp == std::string::npos) {
        return absl::InvalidArgumentError(
            absl::StrCat("tokenizer.json: bad BPE merge '", line, "'"));
      }
      a = line.substr(0, sp);
      b = line.substr(sp + 1);
    }
    auto ia = vocab.Find(a), ib = vocab.Find(b);
    const std::string merged =
        a +
        (b.compare(0, prefix_len, o.prefix) == 0 ? b.substr(prefix_len) : b);
    auto im = vocab.Find(merged);
    if (!ia || !ib || !im) {
      return absl::InvalidArgumentError(
          absl::StrCat("tokenizer.json: BPE merge '", a, " ", b,
                       "' uses a token not in the vocab"));
    }
    // A repeated pair keeps its last rank, as in the reference library.
    merges.insert_or_assign(PairKey(*ia, *ib), Merge{rank++, *im});
  }
  return std::make_unique<Bpe>(std::move(vocab), std::move(merges), o);
}

}  // namespace encoder::tokenizer
