#include "server/tokenizer/normalizers.h"

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "server/common/status_macros.h"
#include "server/tokenizer/json_util.h"
#include "server/tokenizer/precompiled.h"
#include "server/tokenizer/regex.h"
#include "server/tokenizer/unicode.h"

namespace encoder::tokenizer {
namespace {

using json = nlohmann::json;

bool IsBertControl(char32_t c) {
  if (c == '\t' || c == '\n' || c == '\r') return false;
  return IsOther(c);
}

bool IsChineseChar(char32_t c) {
  // The CJK ranges of the original BERT tokenizer.
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) ||
         (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B73F) ||
         (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

void Lowercase(NormalizedString* s) {
  s->MapChars([](char32_t c, std::u32string* out) { *out = ToLowerFull(c); });
}

// The StripAccents normalizer drops every combining mark (M*); the BERT
// normalizer's strip_accents only nonspacing ones (Mn), as in the reference.
void StripAccents(NormalizedString* s) {
  s->Filter([](char32_t c) { return !IsMark(c); });
}

class BertNormalizer : public Normalizer {
 public:
  BertNormalizer(bool clean, bool chinese, bool strip, bool lower)
      : clean_(clean), chinese_(chinese), strip_(strip), lower_(lower) {}
  absl::Status Normalize(NormalizedString* s) const override {
    if (clean_) {
      s->Filter([](char32_t c) {
        return !(c == 0 || c == 0xFFFD || IsBertControl(c));
      });
      s->MapChars([](char32_t c, std::u32string* out) {
        out->push_back(
            c == '\t' || c == '\n' || c == '\r' || IsWhitespace(c) ? U' ' : c);
      });
    }
    if (chinese_) {
      std::vector<CharChange> out;
      out.reserve(s->get().size());
      size_t pos = 0;
      while (pos < s->get().size()) {
        const char32_t c = NextCodePoint(s->get(), &pos);
        if (IsChineseChar(c)) {
          out.push_back({U' ', 1});
          out.push_back({c, 0});
          out.push_back({U' ', 1});
        } else {
          out.push_back({c, 0});
        }
      }
      s->Transform(out, 0);
    }
    if (strip_) {
      NormalizeUnicode(UnicodeForm::kNfd, s);
      s->Filter([](char32_t c) { return !IsMarkNonspacing(c); });
    }
    if (lower_) Lowercase(s);
    return absl::OkStatus();
  }

 private:
  bool clean_, chinese_, strip_, lower_;
};

class SimpleNormalizer : public Normalizer {
 public:
  using Fn = void (*)(NormalizedString*);
  explicit SimpleNormalizer(Fn fn) : fn_(fn) {}
  absl::Status Normalize(NormalizedString* s) const override {
    fn_(s);
    return absl::OkStatus();
  }

 private:
  Fn fn_;
};

class ReplaceNormalizer : public Normalizer {
 public:
  ReplaceNormalizer(std::unique_ptr<Regex> pattern, std::string content)
      : pattern_(std::move(pattern)), content_(DecodeUtf8(content)) {}
  absl::Status Normalize(NormalizedString* s) const override {
    ASSIGN_OR_RETURN(auto spans, pattern_->FindMatches(s->get()));
    std::vector<CharChange> insert;
    for (char32_t c : content_) insert.push_back({c, 1});
    // Right to left, so earlier byte ranges stay valid.
    for (auto it = spans.rbegin(); it != spans.rend(); ++it) {
      if (!it->is_match) continue;
      const std::string_view piece =
          std::string_view(s->get()).substr(it->start, it->end - it->start);
      const size_t chars = DecodeUtf8(piece).size();
      s->TransformRange(it->start, it->end, insert, chars);
    }
    return absl::OkStatus();
  }

 private:
  std::unique_ptr<Regex> pattern_;
  std::u32string content_;
};

class PrependNormalizer : public Normalizer {
 public:
  explicit PrependNormalizer(std::string prepend)
      : prepend_(std::move(prepend)) {}
  absl::Status Normalize(NormalizedString* s) const override {
    s->Prepend(prepend_);
    return absl::OkStatus();
  }

 private:
  std::string prepend_;
};

class StripNormalizer : public Normalizer {
 public:
  StripNormalizer(bool left, bool right) : left_(left), right_(right) {}
  absl::Status Normalize(NormalizedString* s) const override {
    std::u32string chars = DecodeUtf8(s->get());
    size_t lead = 0, trail = 0;
    if (left_) {
      while (lead < chars.size() && IsWhitespace(chars[lead])) ++lead;
    }
    if (right_) {
      while (trail < chars.size() - lead &&
             IsWhitespace(chars[chars.size() - 1 - trail])) {
        ++trail;
      }
    }
    if (lead == 0 && trail == 0) return absl::OkStatus();
    std::vector<CharChange> out;
    for (size_t i = lead; i < chars.size() - trail; ++i) {
      const bool last = i + 1 == chars.size() - trail;
      out.push_back({chars[i], last ? -static_cast<int>(trail) : 0});
    }
    s->Transform(out, lead);
    return absl::OkStatus();
  }

 private:
  bool left_, right_;
};

class SequenceNormalizer : public Normalizer {
 public:
  explicit SequenceNormalizer(std::vector<std::unique_ptr<Normalizer>> parts)
      : parts_(std::move(parts)) {}
  absl::Status Normalize(NormalizedString* s) const override {
    for (const auto& p : parts_) {
      RETURN_IF_ERROR(p->Normalize(s));
    }
    return absl::OkStatus();
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> parts_;
};

template <UnicodeForm kForm>
void Unicode(NormalizedString* s) {
  NormalizeUnicode(kForm, s);
}

}  // namespace

absl::StatusOr<std::unique_ptr<Normalizer>> MakeNormalizer(const json& j) {
  const std::string type = j.value("type", "");
  std::unique_ptr<Normalizer> n;
  if (type == "BertNormalizer") {
    const bool lower = j.value("lowercase", true);
    bool strip = lower;  // strip_accents null follows lowercase
    if (j.contains("strip_accents") && !j["strip_accents"].is_null()) {
      strip = j["strip_accents"].get<bool>();
    }
    n = std::make_unique<BertNormalizer>(j.value("clean_text", true),
                                         j.value("handle_chinese_chars", true),
                                         strip, lower);
  } else if (type == "Lowercase") {
    n = std::make_unique<SimpleNormalizer>(&Lowercase);
  } else if (type == "StripAccents") {
    n = std::make_unique<SimpleNormalizer>(&StripAccents);
  } else if (type == "NFD") {
    n = std::make_unique<SimpleNormalizer>(&Unicode<UnicodeForm::kNfd>);
  } else if (type == "NFKD") {
    n = std::make_unique<SimpleNormalizer>(&Unicode<UnicodeForm::kNfkd>);
  } else if (type == "NFC") {
    n = std::make_unique<SimpleNormalizer>(&Unicode<UnicodeForm::kNfc>);
  } else if (type == "NFKC") {
    n = std::make_unique<SimpleNormalizer>(&Unicode<UnicodeForm::kNfkc>);
  } else if (type == "Replace") {
    ASSIGN_OR_RETURN(auto pattern, MakePattern(j.at("pattern")));
    n = std::make_unique<ReplaceNormalizer>(std::move(pattern),
                                            j.value("content", ""));
  } else if (type == "Prepend") {
    n = std::make_unique<PrependNormalizer>(j.value("prepend", ""));
  } else if (type == "Strip") {
    n = std::make_unique<StripNormalizer>(j.value("strip_left", true),
                                          j.value("strip_right", true));
  } else if (type == "Precompiled") {
    const json& map =
        j.contains("precompiled_charsmap") ? j["precompiled_charsmap"] : json();
    if (!map.is_string()) {
      return absl::InvalidArgumentError(
          "Precompiled normalizer: precompiled_charsmap must be a base64 "
          "string");
    }
    ASSIGN_OR_RETURN(auto p, MakePrecompiledNormalizer(map.get<std::string>()));
    n = std::move(p);
  } else if (type == "Sequence") {
    std::vector<std::unique_ptr<Normalizer>> parts;
    for (const json& part : j.at("normalizers")) {
      ASSIGN_OR_RETURN(auto p, MakeNormalizer(part));
      parts.push_back(std::move(p));
    }
    n = std::make_unique<SequenceNormalizer>(std::move(parts));
  } else {
    return UnknownType("normalizer", type);
  }
  return n;
}

}  // namespace encoder::tokenizer
