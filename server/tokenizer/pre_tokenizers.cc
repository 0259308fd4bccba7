#include "server/tokenizer/pre_tokenizers.h"

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "server/common/status_macros.h"
#include "server/tokenizer/json_util.h"
#include "server/tokenizer/unicode.h"

namespace encoder::tokenizer {
namespace {

using json = nlohmann::json;

// Matches: every character for which pred(c) holds, each on its own.
template <typename Pred>
std::vector<MatchSpan> CharMatches(const std::string& text, Pred pred) {
  std::vector<MatchSpan> spans;
  size_t prev = 0, pos = 0;
  while (pos < text.size()) {
    const size_t start = pos;
    if (pred(NextCodePoint(text, &pos))) {
      if (prev != start) spans.push_back({prev, start, false});
      spans.push_back({start, pos, true});
      prev = pos;
    }
  }
  if (prev != text.size() || spans.empty()) {
    spans.push_back({prev, text.size(), false});
  }
  return spans;
}

bool IsBertPunctuation(char32_t c) {
  if (c < 0x80) {
    return (c >= 33 && c <= 47) || (c >= 58 && c <= 64) ||
           (c >= 91 && c <= 96) || (c >= 123 && c <= 126);
  }
  return IsPunctuation(c);
}

template <typename Pred>
void SplitAll(std::vector<NormalizedString>* pieces, Pred pred,
              SplitBehavior behavior) {
  std::vector<NormalizedString> out;
  out.reserve(pieces->size() * 2);
  for (const NormalizedString& p : *pieces) {
    for (auto& s : SplitByMatches(p, CharMatches(p.get(), pred), behavior)) {
      out.push_back(std::move(s));
    }
  }
  *pieces = std::move(out);
}

absl::Status SplitAllRegex(std::vector<NormalizedString>* pieces,
                           const Regex& re, SplitBehavior behavior,
                           bool invert) {
  std::vector<NormalizedString> out;
  out.reserve(pieces->size() * 2);
  for (const NormalizedString& p : *pieces) {
    ASSIGN_OR_RETURN(auto spans, re.FindMatches(p.get()));
    if (invert) {
      for (MatchSpan& m : spans) m.is_match = !m.is_match;
    }
    for (auto& s : SplitByMatches(p, std::move(spans), behavior)) {
      out.push_back(std::move(s));
    }
  }
  *pieces = std::move(out);
  return absl::OkStatus();
}

absl::StatusOr<SplitBehavior> ParseBehavior(const std::string& name) {
  if (name == "Removed") return SplitBehavior::kRemoved;
  if (name == "Isolated") return SplitBehavior::kIsolated;
  if (name == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
  if (name == "MergedWithNext") return SplitBehavior::kMergedWithNext;
  if (name == "Contiguous") return SplitBehavior::kContiguous;
  return UnknownType("split behavior", name);
}

class BertPreTokenizer : public PreTokenizer {
 public:
  absl::Status PreTokenize(std::vector<NormalizedString>* p) const override {
    SplitAll(p, IsWhitespace, SplitBehavior::kRemoved);
    SplitAll(p, IsBertPunctuation, SplitBehavior::kIsolated);
    return absl::OkStatus();
  }
};

class CharSplitPreTokenizer : public PreTokenizer {
 public:
  using Pred = bool (*)(char32_t);
  CharSplitPreTokenizer(Pred pred, SplitBehavior behavior)
      : pred_(pred), behavior_(behavior) {}
  absl::Status PreTokenize(std::vector<NormalizedString>* p) const override {
    SplitAll(p, pred_, behavior_);
    return absl::OkStatus();
  }

 private:
  Pred pred_;
  SplitBehavior behavior_;
};

class RegexSplitPreTokenizer : public PreTokenizer {
 public:
  RegexSplitPreTokenizer(std::unique_ptr<Regex> re, SplitBehavior behavior,
                         bool invert)
      : re_(std::move(re)), behavior_(behavior), invert_(invert) {}
  absl::Status PreTokenize(std::vector<NormalizedString>* p) const override {
    return SplitAllRegex(p, *re_, behavior_, invert_);
  }

 private:
  std::unique_ptr<Regex> re_;
  SplitBehavior behavior_;
  bool invert_;
};

class ByteLevelPreTokenizer : public PreTokenizer {
 public:
  ByteLevelPreTokenizer(bool add_prefix_space, std::unique_ptr<Regex> re)
      : add_prefix_space_(add_prefix_space), re_(std::move(re)) {}
  absl::Status PreTokenize(std::vector<NormalizedString>* p) const override {
    if (add_prefix_space_) {
      for (NormalizedString& s : *p) {
        if (s.get().empty() || s.get()[0] != ' ') s.Prepend(" ");
      }
    }
    if (re_ != nullptr) {
      RETURN_IF_ERROR(SplitAllRegex(p, *re_, SplitBehavior::kIsolated, false));
    }
    const std::u32string& table = ByteToChar();
    std::vector<CharChange> chars;
    for (NormalizedString& s : *p) {
      chars.clear();
      const std::string& text = s.get();
      size_t pos = 0;
      while (pos < text.size()) {
        const size_t len = Utf8Length(static_cast<unsigned char>(text[pos]));
        for (size_t k = 0; k < len; ++k) {
          chars.push_back({table[static_cast<unsigned char>(text[pos + k])],
                           k > 0 ? 1 : 0});
        }
        pos += len;
      }
      s.Transform(chars, 0);
    }
    return absl::OkStatus();
  }

 private:
  bool add_prefix_space_;
  std::unique_ptr<Regex> re_;  // null: no regex split
};

enum class PrependScheme { kAlways, kFirst, kNever };

class MetaspacePreTokenizer : public PreTokenizer {
 public:
  MetaspacePreTokenizer(std::string replacement, PrependScheme scheme,
                        bool split, std::unique_ptr<Regex> space,
                        std::unique_ptr<Regex> marker)
      : replacement_(std::move(replacement)),
        scheme_(scheme),
        split_(split),
        space_(std::move(space)),
        marker_(std::move(marker)) {}
  absl::Status PreTokenize(std::vector<NormalizedString>* p) const override {
    const std::vector<CharChange> insert = [this] {
      std::vector<CharChange> v;
      for (char32_t c : DecodeUtf8(replacement_)) v.push_back({c, 1});
      return v;
    }();
    for (NormalizedString& s : *p) {
      ASSIGN_OR_RETURN(auto spans, space_->FindMatches(s.get()));
      for (auto it = spans.rbegin(); it != spans.rend(); ++it) {
        if (it->is_match) s.TransformRange(it->start, it->end, insert, 1);
      }
      const bool starts = s.get().rfind(replacement_, 0) == 0;
      const bool first =
          !s.alignments().empty() && s.alignments()[0].first == 0;
      if (!starts && (scheme_ == PrependScheme::kAlways ||
                      (scheme_ == PrependScheme::kFirst && first))) {
        s.Prepend(replacement_);
      }
    }
    if (split_) {
      return SplitAllRegex(p, *marker_, SplitBehavior::kMergedWithNext, false);
    }
    return absl::OkStatus();
  }

 private:
  std::string replacement_;
  PrependScheme scheme_;
  bool split_;
  std::unique_ptr<Regex> space_, marker_;
};

class SequencePreTokenizer : public PreTokenizer {
 public:
  explicit SequencePreTokenizer(std::vector<std::unique_ptr<PreTokenizer>> v)
      : parts_(std::move(v)) {}
  absl::Status PreTokenize(std::vector<NormalizedString>* p) const override {
    for (const auto& part : parts_) {
      RETURN_IF_ERROR(part->PreTokenize(p));
    }
    return absl::OkStatus();
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> parts_;
};

constexpr char kByteLevelPattern[] =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
// Rust's \w (Alphabetic, marks, decimal digits, connector punctuation,
// join controls), spelled out because PCRE2's \w leaves marks out.
constexpr char kWhitespacePattern[] =
    R"([\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\x{200C}\x{200D}]+|[^\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\x{200C}\x{200D}\s]+)";

absl::StatusOr<std::unique_ptr<PreTokenizer>> MakeMetaspace(const json& j) {
  const std::string replacement = j.value("replacement", "\xe2\x96\x81");
  PrependScheme scheme = PrependScheme::kAlways;
  if (j.contains("prepend_scheme")) {
    const std::string s = j["prepend_scheme"].get<std::string>();
    if (s == "first") {
      scheme = PrependScheme::kFirst;
    } else if (s == "never") {
      scheme = PrependScheme::kNever;
    } else if (s != "always") {
      return UnknownType("Metaspace prepend_scheme", s);
    }
  } else if (!j.value("add_prefix_space", true)) {
    scheme = PrependScheme::kNever;
  }
  ASSIGN_OR_RETURN(auto space, Regex::Literal(" "));
  ASSIGN_OR_RETURN(auto marker, Regex::Literal(replacement));
  return std::make_unique<MetaspacePreTokenizer>(
      replacement, scheme, j.value("split", true), std::move(space),
      std::move(marker));
}

}  // namespace

std::vector<NormalizedString> SplitByMatches(const NormalizedString& s,
                                             std::vector<MatchSpan> spans,
                                             SplitBehavior behavior) {
  std::vector<MatchSpan> splits;  // is_match here means "remove"
  splits.reserve(spans.size());
  bool previous_match = false;
  switch (behavior) {
    case SplitBehavior::kIsolated:
      for (MatchSpan m : spans) splits.push_back({m.start, m.end, false});
      break;
    case SplitBehavior::kRemoved:
      splits = std::move(spans);
      break;
    case SplitBehavior::kContiguous:
      for (const MatchSpan& m : spans) {
        if (m.is_match == previous_match && !splits.empty()) {
          splits.back().end = m.end;
        } else {
          splits.push_back({m.start, m.end, false});
        }
        previous_match = m.is_match;
      }
      break;
    case SplitBehavior::kMergedWithPrevious:
      for (const MatchSpan& m : spans) {
        if (m.is_match && !previous_match && !splits.empty()) {
          splits.back().end = m.end;
        } else {
          splits.push_back({m.start, m.end, false});
        }
        previous_match = m.is_match;
      }
      break;
    case SplitBehavior::kMergedWithNext:
      for (auto it = spans.rbegin(); it != spans.rend(); ++it) {
        if (it->is_match && !previous_match && !splits.empty()) {
          splits.back().start = it->start;
        } else {
          splits.push_back({it->start, it->end, false});
        }
        previous_match = it->is_match;
      }
      std::reverse(splits.begin(), splits.end());
      break;
  }
  std::vector<NormalizedString> out;
  out.reserve(splits.size());
  for (const MatchSpan& m : splits) {
    if (m.is_match || m.start == m.end) continue;
    out.push_back(s.Slice(m.start, m.end));
  }
  return out;
}

const std::u32string& ByteToChar() {
  static const std::u32string* table = [] {
    auto* t = new std::u32string(256, 0);
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable =
          (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
      (*t)[b] = printable ? static_cast<char32_t>(b) : next++;
    }
    return t;
  }();
  return *table;
}

absl::StatusOr<std::unique_ptr<PreTokenizer>> MakePreTokenizer(const json& j) {
  const std::string type = j.value("type", "");
  if (type == "BertPreTokenizer") return std::make_unique<BertPreTokenizer>();
  if (type == "WhitespaceSplit") {
    return std::make_unique<CharSplitPreTokenizer>(&IsWhitespace,
                                                   SplitBehavior::kRemoved);
  }
  if (type == "Whitespace") {
    ASSIGN_OR_RETURN(auto re, Regex::Compile(kWhitespacePattern));
    return std::make_unique<RegexSplitPreTokenizer>(
        std::move(re), SplitBehavior::kRemoved, true);
  }
  if (type == "Punctuation" || type == "Digits") {
    SplitBehavior behavior = SplitBehavior::kIsolated;
    if (type == "Punctuation" && j.contains("behavior")) {
      ASSIGN_OR_RETURN(auto b, ParseBehavior(j["behavior"].get<std::string>()));
      behavior = b;
    }
    if (type == "Digits") {
      if (!j.value("individual_digits", false)) {
        behavior = SplitBehavior::kContiguous;
      }
      return std::make_unique<CharSplitPreTokenizer>(&IsNumeric, behavior);
    }
    return std::make_unique<CharSplitPreTokenizer>(&IsBertPunctuation,
                                                   behavior);
  }
  if (type == "Split") {
    ASSIGN_OR_RETURN(auto re, MakePattern(j.at("pattern")));
    ASSIGN_OR_RETURN(auto b, ParseBehavior(j.value("behavior", "Isolated")));
    return std::make_unique<RegexSplitPreTokenizer>(std::move(re), b,
                                                    j.value("invert", false));
  }
  if (type == "ByteLevel") {
    std::unique_ptr<Regex> re;
    if (j.value("use_regex", true)) {
      ASSIGN_OR_RETURN(auto compiled, Regex::Compile(kByteLevelPattern));
      re = std::move(compiled);
    }
    return std::make_unique<ByteLevelPreTokenizer>(
        j.value("add_prefix_space", true), std::move(re));
  }
  if (type == "Metaspace") return MakeMetaspace(j);
  if (type == "Sequence") {
    std::vector<std::unique_ptr<PreTokenizer>> parts;
    for (const json& part : j.at("pretokenizers")) {
      ASSIGN_OR_RETURN(auto p, MakePreTokenizer(part));
      parts.push_back(std::move(p));
    }
    return std::make_unique<SequencePreTokenizer>(std::move(parts));
  }
  return UnknownType("pre_tokenizer", type);
}

}  // namespace encoder::tokenizer
