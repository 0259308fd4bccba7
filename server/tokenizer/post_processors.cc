#include "server/tokenizer/post_processors.h"

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "server/common/status_macros.h"
#include "server/tokenizer/json_util.h"
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

// A single-sequence template: specials before and after the sequence.
class TemplateProcessor : public PostProcessor {
 public:
  TemplateProcessor(std::vector<Special> before, std::vector<Special> after,
                    int64_t sequence_type_id, int trim)
      : before_(std::move(before)),
        after_(std::move(after)),
        type_id_(sequence_type_id),
        trim_(trim) {}

  size_t AddedTokens() const override {
    size_t n = 0;
    for (const auto& s : before_) n += s.ids.size();
    for (const auto& s : after_) n += s.ids.size();
    return n;
  }

  void Process(bool add_special, Encoding* e) const override {
    if (trim_ >= 0) TrimByteLevelOffsets(trim_ == 1, e);
    if (!add_special) return;
    Encoding out;
    for (const Special& s : before_) Append(s, &out);
    for (size_t i = 0; i < e->size(); ++i) {
      out.ids.push_back(e->ids[i]);
      out.tokens.push_back(std::move(e->tokens[i]));
      out.byte_offsets.push_back(e->byte_offsets[i]);
      out.type_ids.push_back(type_id_);
      out.special_tokens_mask.push_back(e->special_tokens_mask[i]);
    }
    for (const Special& s : after_) Append(s, &out);
    *e = std::move(out);
  }

 private:
  static void Append(const Special& s, Encoding* out) {
    for (size_t k = 0; k < s.ids.size(); ++k) {
      out->ids.push_back(s.ids[k]);
      out->tokens.push_back(s.tokens[k]);
      out->byte_offsets.push_back({0, 0});
      out->type_ids.push_back(s.type_id);
      out->special_tokens_mask.push_back(1);
    }
  }

  std::vector<Special> before_, after_;
  int64_t type_id_;
  int trim_;  // -1 no trimming, else trim with add_prefix_space = trim_
};

class SequenceProcessor : public PostProcessor {
 public:
  explicit SequenceProcessor(std::vector<std::unique_ptr<PostProcessor>> v)
      : parts_(std::move(v)) {}
  size_t AddedTokens() const override {
    size_t n = 0;
    for (const auto& p : parts_) n += p->AddedTokens();
    return n;
  }
  void Process(bool add_special, Encoding* e) const override {
    for (const auto& p : parts_) p->Process(add_special, e);
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

absl::StatusOr<std::unique_ptr<PostProcessor>> MakeTemplate(const json& j) {
  std::vector<Special> before, after;
  int64_t seq_type = 0;
  bool seen_sequence = false;
  for (const json& item : j.at("single")) {
    if (item.contains("Sequence")) {
      seen_sequence = true;
      seq_type = IntegerOr(item["Sequence"], "type_id", 0);
      continue;
    }
    const json& sp = item.at("SpecialToken");
    const std::string name = sp.at("id").get<std::string>();
    if (!j.contains("special_tokens") || !j["special_tokens"].contains(name)) {
      return absl::InvalidArgumentError(
          absl::StrCat("tokenizer.json: template special token '", name,
                       "' is not defined"));
    }
    const json& def = j["special_tokens"][name];
    Special s;
    for (const json& id : def.at("ids")) s.ids.push_back(TokenIdOf(id));
    s.tokens = def.at("tokens").get<std::vector<std::string>>();
    if (s.ids.size() != s.tokens.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("tokenizer.json: template special token '", name,
                       "' has ", s.ids.size(), " ids but ", s.tokens.size(),
                       " tokens; they must be of the same length"));
    }
    s.type_id = IntegerOr(sp, "type_id", 0);
    (seen_sequence ? after : before).push_back(std::move(s));
  }
  return std::make_unique<TemplateProcessor>(std::move(before),
                                             std::move(after), seq_type, -1);
}

}  // namespace

absl::StatusOr<std::unique_ptr<PostProcessor>> MakePostProcessor(
    const json& j) {
  const std::string type = j.value("type", "");
  if (type == "BertProcessing") {
    return std::make_unique<TemplateProcessor>(
        std::vector<Special>{FromPair(j.at("cls"))},
        std::vector<Special>{FromPair(j.at("sep"))}, 0, -1);
  }
  if (type == "RobertaProcessing") {
    const int trim =
        j.value("trim_offsets", true) ? j.value("add_prefix_space", true) : -1;
    return std::make_unique<TemplateProcessor>(
        std::vector<Special>{FromPair(j.at("cls"))},
        std::vector<Special>{FromPair(j.at("sep"))}, 0, trim);
  }
  if (type == "ByteLevel") {
    const int trim =
        j.value("trim_offsets", true) ? j.value("add_prefix_space", true) : -1;
    return std::make_unique<TemplateProcessor>(std::vector<Special>{},
                                               std::vector<Special>{}, 0, trim);
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
