#include "server/tokenizer/post_processors.h"

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "server/common/status_macros.h"
#include "server/tokenizer/json_util.h"
#include "server/tokenizer/pair_encoding.h"
#include "server/tokenizer/pre_tokenizers.h"
#include "server/tokenizer/unicode.h"

namespace encoder::tokenizer {
namespace {

using json = nlohmann::json;

struct Special {
  std::vector<int64_t> ids;
  std::vector<std::string> tokens;
  int64_t type_id = 0;
};

// Byte-level offsets trimming: leading/trailing spaces ('Ġ') of a token are
// left out of its offsets, except the single space added as a prefix.
void TrimByteLevelOffsets(bool add_prefix_space, Encoding* e) {
  const char32_t space = ByteToChar()[' '];
  for (size_t i = 0; i < e->size(); ++i) {
    const std::u32string t = DecodeUtf8(e->tokens[i]);
    auto is_space = [space](char32_t c) {
      return c == space || IsWhitespace(c);
    };
    int64_t lead = 0, trail = 0;
    while (lead < static_cast<int64_t>(t.size()) && is_space(t[lead])) ++lead;
    while (trail < static_cast<int64_t>(t.size()) &&
           is_space(t[t.size() - 1 - trail])) {
      ++trail;
    }
    Offsets& o = e->byte_offsets[i];
    if (lead > 0) {
      const bool first = i == 0 || o.start == 0;
      if (first && add_prefix_space && lead == 1) lead = 0;
      o.start = std::min(o.start + lead, o.end);
    }
    if (trail > 0 && o.end >= trail) o.end = std::max(o.end - trail, o.start);
  }
}

// A part of special tokens only: no offsets, no sequence.
Encoding SpecialPart(const Special& s, int64_t type_id) {
  Encoding e;
  e.ids = s.ids;
  e.tokens = s.tokens;
  e.byte_offsets.assign(s.ids.size(), Offsets{0, 0});
  e.type_ids.assign(s.ids.size(), type_id);
  e.special_tokens_mask.assign(s.ids.size(), 1);
  e.sequence_ids.assign(s.ids.size(), -1);
  return e;
}

// `before` + `e` + `after` (either may be null), e's own tokens unmarked.
void Wrap(const Special* before, int64_t before_type, const Special* after,
          int64_t after_type, Encoding* e) {
  e->special_tokens_mask.assign(e->size(), 0);
  Encoding out;
  if (before != nullptr) out = SpecialPart(*before, before_type);
  Append(std::move(*e), &out);
  if (after != nullptr) Append(SpecialPart(*after, after_type), &out);
  *e = std::move(out);
}

// One item of a TemplateProcessing template: sequence A (0) or B (1), or a
// special token.
struct Piece {
  int sequence = -1;  // -1: `special`
  Special special;
  int64_t type_id = 0;
  bool last_use = true;  // no later piece takes the same sequence
};

// TemplateProcessing: each piece of the single or pair template becomes a
// part; a sequence takes the piece's type id.
class TemplateProcessor : public PostProcessor {
 public:
  TemplateProcessor(std::vector<Piece> single, std::vector<Piece> pair)
      : single_(std::move(single)), pair_(std::move(pair)) {}

  size_t AddedTokens(bool pair) const override {
    size_t n = 0;
    for (const Piece& p : pair ? pair_ : single_) n += p.special.ids.size();
    return n;
  }

  void Process(bool add_special, std::vector<Encoding>* parts) const override {
    std::vector<Encoding> out;
    for (const Piece& p : parts->size() == 2 ? pair_ : single_) {
      if (p.sequence < 0) {
        if (add_special) out.push_back(SpecialPart(p.special, p.type_id));
        continue;
      }
      if (static_cast<size_t>(p.sequence) >= parts->size()) continue;
      Encoding& source = (*parts)[p.sequence];
      out.push_back(p.last_use ? std::move(source) : source);
      out.back().type_ids.assign(out.back().size(), p.type_id);
      SetSequenceId(static_cast<int8_t>(p.sequence), &out.back());
    }
    *parts = std::move(out);
  }

 private:
  std::vector<Piece> single_, pair_;
};

// BertProcessing: [CLS] A [SEP] and B [SEP], the second [SEP] of type 1;
// sequences keep their type ids.
class BertProcessor : public PostProcessor {
 public:
  BertProcessor(Special cls, Special sep)
      : cls_(std::move(cls)), sep_(std::move(sep)) {}
  size_t AddedTokens(bool pair) const override { return pair ? 3 : 2; }
  void Process(bool add_special, std::vector<Encoding>* parts) const override {
    if (!add_special) return;
    for (size_t i = 0; i < parts->size(); ++i) {
      Encoding* e = &(*parts)[i];
      if (i == 0) {
        Wrap(&cls_, 0, &sep_, 0, e);
      } else {
        Wrap(nullptr, 0, &sep_, 1, e);
      }
    }
  }

 private:
  Special cls_, sep_;
};

// RobertaProcessing: <s> A </s> and </s> B </s>, every type id 0 (with or
// without the special tokens); byte-level offsets trimmed per sequence.
class RobertaProcessor : public PostProcessor {
 public:
  RobertaProcessor(Special cls, Special sep, int trim)
      : cls_(std::move(cls)), sep_(std::move(sep)), trim_(trim) {}
  size_t AddedTokens(bool pair) const override { return pair ? 4 : 2; }
  void Process(bool add_special, std::vector<Encoding>* parts) const override {
    for (size_t i = 0; i < parts->size(); ++i) {
      Encoding* e = &(*parts)[i];
      if (trim_ >= 0) TrimByteLevelOffsets(trim_ == 1, e);
      e->type_ids.assign(e->size(), 0);
      if (add_special) Wrap(i == 0 ? &cls_ : &sep_, 0, &sep_, 0, e);
    }
  }

 private:
  Special cls_, sep_;
  int trim_;  // -1 no trimming, else trim with add_prefix_space = trim_
};

// ByteLevel: trims offsets per part; part i is sequence i.
class ByteLevelProcessor : public PostProcessor {
 public:
  explicit ByteLevelProcessor(int trim) : trim_(trim) {}
  size_t AddedTokens(bool) const override { return 0; }
  void Process(bool, std::vector<Encoding>* parts) const override {
    for (size_t i = 0; i < parts->size(); ++i) {
      if (trim_ >= 0) TrimByteLevelOffsets(trim_ == 1, &(*parts)[i]);
      SetSequenceId(static_cast<int8_t>(i), &(*parts)[i]);
    }
  }

 private:
  int trim_;
};

class SequenceProcessor : public PostProcessor {
 public:
  explicit SequenceProcessor(std::vector<std::unique_ptr<PostProcessor>> v)
      : parts_(std::move(v)) {}
  size_t AddedTokens(bool pair) const override {
    size_t n = 0;
    for (const auto& p : parts_) n += p->AddedTokens(pair);
    return n;
  }
  void Process(bool add_special, std::vector<Encoding>* parts) const override {
    for (const auto& p : parts_) p->Process(add_special, parts);
  }

 private:
  std::vector<std::unique_ptr<PostProcessor>> parts_;
};

Special FromPair(const json& pair) {
  Special s;
  s.tokens.push_back(pair.at(0).get<std::string>());
  s.ids.push_back(TokenIdOf(pair.at(1)));
  return s;
}

absl::StatusOr<Special> TemplateSpecial(const json& j,
                                        const std::string& name) {
  if (!j.contains("special_tokens") || !j["special_tokens"].contains(name)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tokenizer.json: template special token '", name, "' is not defined"));
  }
  const json& def = j["special_tokens"][name];
  Special s;
  for (const json& id : def.at("ids")) s.ids.push_back(TokenIdOf(id));
  s.tokens = def.at("tokens").get<std::vector<std::string>>();
  if (s.ids.size() != s.tokens.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("tokenizer.json: template special token '", name, "' has ",
                     s.ids.size(), " ids but ", s.tokens.size(),
                     " tokens; they must be of the same length"));
  }
  return s;
}

// One template ("single" or "pair") of a TemplateProcessing `j`.
absl::StatusOr<std::vector<Piece>> ReadTemplate(const json& j,
                                                const json& items) {
  std::vector<Piece> pieces;
  for (const json& item : items) {
    Piece p;
    if (item.contains("Sequence")) {
      const json& seq = item["Sequence"];
      p.sequence = seq.value("id", "A") == "B" ? 1 : 0;
      p.type_id = IntegerOr(seq, "type_id", 0);
    } else {
      const json& sp = item.at("SpecialToken");
      ASSIGN_OR_RETURN(p.special,
                       TemplateSpecial(j, sp.at("id").get<std::string>()));
      p.type_id = IntegerOr(sp, "type_id", 0);
    }
    pieces.push_back(std::move(p));
  }
  for (size_t i = 0; i < pieces.size(); ++i) {
    for (size_t k = i + 1; k < pieces.size(); ++k) {
      if (pieces[i].sequence >= 0 && pieces[k].sequence == pieces[i].sequence) {
        pieces[i].last_use = false;
      }
    }
  }
  return pieces;
}

absl::StatusOr<std::unique_ptr<PostProcessor>> MakeTemplate(const json& j) {
  ASSIGN_OR_RETURN(auto single, ReadTemplate(j, j.at("single")));
  ASSIGN_OR_RETURN(auto pair, ReadTemplate(j, j.value("pair", json::array())));
  return std::make_unique<TemplateProcessor>(std::move(single),
                                             std::move(pair));
}

int TrimSetting(const json& j) {
  return j.value("trim_offsets", true) ? j.value("add_prefix_space", true) : -1;
}

}  // namespace

absl::StatusOr<std::unique_ptr<PostProcessor>> MakePostProcessor(
    const json& j) {
  const std::string type = j.value("type", "");
  if (type == "BertProcessing") {
    return std::make_unique<BertProcessor>(FromPair(j.at("cls")),
                                           FromPair(j.at("sep")));
  }
  if (type == "RobertaProcessing") {
    return std::make_unique<RobertaProcessor>(
        FromPair(j.at("cls")), FromPair(j.at("sep")), TrimSetting(j));
  }
  if (type == "ByteLevel") {
    return std::make_unique<ByteLevelProcessor>(TrimSetting(j));
  }
  if (type == "TemplateProcessing") return MakeTemplate(j);
  if (type == "Sequence") {
    std::vector<std::unique_ptr<PostProcessor>> parts;
    for (const json& part : j.at("processors")) {
      ASSIGN_OR_RETURN(auto p, MakePostProcessor(part));
      parts.push_back(std::move(p));
    }
    return std::make_unique<SequenceProcessor>(std::move(parts));
  }
  return UnknownType("post_processor", type);
}

}  // namespace encoder::tokenizer
