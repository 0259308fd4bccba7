#include "server/tokenizer/decoders.h"

#include <cctype>

#include <nlohmann/json.hpp>

#include "absl/container/flat_hash_map.h"

#include "absl/strings/str_replace.h"
#include "server/common/status_macros.h"
#include "server/tokenizer/json_util.h"
#include "server/tokenizer/pre_tokenizers.h"
#include "server/tokenizer/regex.h"
#include "server/tokenizer/unicode.h"

namespace encoder::tokenizer {
namespace {

using json = nlohmann::json;
using Tokens = std::vector<std::string>;
constexpr char kReplacementChar[] = "\xef\xbf\xbd";

// Applies the cleanups one after the other, as the reference does.
std::string CleanupSequential(std::string s) {
  static const std::pair<const char*, const char*> kRules[] = {
      {" .", "."},   {" ?", "?"},     {" !", "!"},    {" ,", ","},
      {" ' ", "'"},  {" n't", "n't"}, {" 'm", "'m"},  {" do not", " don't"},
      {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
  for (const auto& [from, to] : kRules)
    s = absl::StrReplaceAll(s, {{from, to}});
  return s;
}

template <typename F>
class FnDecoder : public Decoder {
 public:
  explicit FnDecoder(F f) : f_(std::move(f)) {}
  absl::Status DecodeChain(Tokens* tokens) const override { return f_(tokens); }

 private:
  F f_;
};

template <typename F>
std::unique_ptr<Decoder> Make(F f) {
  return std::make_unique<FnDecoder<F>>(std::move(f));
}

std::unique_ptr<Decoder> WordPieceDecoder(std::string prefix, bool cleanup) {
  return Make([prefix, cleanup](Tokens* t) {
    for (size_t i = 0; i < t->size(); ++i) {
      std::string& s = (*t)[i];
      if (i != 0) {
        if (s.compare(0, prefix.size(), prefix) == 0) {
          s.erase(0, prefix.size());
        } else {
          s.insert(0, " ");
        }
      }
      if (cleanup) s = CleanupSequential(s);
    }
    return absl::OkStatus();
  });
}

std::unique_ptr<Decoder> ByteLevelDecoder() {
  return Make([](Tokens* t) {
    static const auto* to_byte = [] {
      auto* m = new absl::flat_hash_map<char32_t, char>();
      const std::u32string& table = ByteToChar();
      for (int b = 0; b < 256; ++b) (*m)[table[b]] = static_cast<char>(b);
      return m;
    }();
    std::string bytes;
    for (const std::string& token : *t) {
      std::string mapped;
      bool ok = true;
      for (char32_t c : DecodeUtf8(token)) {
        auto it = to_byte->find(c);
        if (it == to_byte->end()) {
          ok = false;
          break;
        }
        mapped.push_back(it->second);
      }
      bytes += ok ? mapped : token;
    }
    *t = {Utf8Lossy(bytes)};
    return absl::OkStatus();
  });
}

std::unique_ptr<Decoder> MetaspaceDecoder(std::string replacement,
                                          bool prepend) {
  const char32_t rep = DecodeUtf8(replacement)[0];
  return Make([rep, prepend](Tokens* t) {
    for (size_t i = 0; i < t->size(); ++i) {
      std::string out;
      for (char32_t c : DecodeUtf8((*t)[i])) {
        if (c != rep) {
          AppendUtf8(c, &out);
        } else if (i != 0 || !prepend) {
          out.push_back(' ');
        }
      }
      (*t)[i] = std::move(out);
    }
    return absl::OkStatus();
  });
}

std::unique_ptr<Decoder> ByteFallbackDecoder() {
  return Make([](Tokens* t) {
    Tokens out;
    std::string pending;
    auto flush = [&out, &pending] {
      if (pending.empty()) return;
      if (ValidateUtf8(pending).ok()) {
        out.push_back(pending);
      } else {
        for (size_t k = 0; k < pending.size(); ++k)
          out.push_back(kReplacementChar);
      }
      pending.clear();
    };
    for (std::string& s : *t) {
      if (s.size() == 6 && s.compare(0, 3, "<0x") == 0 && s[5] == '>' &&
          std::isxdigit(static_cast<unsigned char>(s[3])) &&
          std::isxdigit(static_cast<unsigned char>(s[4]))) {
        pending.push_back(
            static_cast<char>(std::stoi(s.substr(3, 2), nullptr, 16)));
        continue;
      }
      flush();
      out.push_back(std::move(s));
    }
    flush();
    *t = std::move(out);
    return absl::OkStatus();
  });
}

std::unique_ptr<Decoder> StripDecoder(std::string content, size_t start,
                                      size_t stop) {
  const char32_t c = DecodeUtf8(content)[0];
  return Make([c, start, stop](Tokens* t) {
    for (std::string& s : *t) {
      std::u32string chars = DecodeUtf8(s);
      size_t b = 0, e = chars.size();
      while (b < start && b < e && chars[b] == c) ++b;
      size_t k = 0;
      while (k < stop && e > b && chars[e - 1] == c) --e, ++k;
      std::string out;
      for (size_t i = b; i < e; ++i) AppendUtf8(chars[i], &out);
      s = std::move(out);
    }
    return absl::OkStatus();
  });
}

class SequenceDecoder : public Decoder {
 public:
  explicit SequenceDecoder(std::vector<std::unique_ptr<Decoder>> v)
      : parts_(std::move(v)) {}
  absl::Status DecodeChain(Tokens* t) const override {
    for (const auto& p : parts_) {
      RETURN_IF_ERROR(p->DecodeChain(t));
    }
    return absl::OkStatus();
  }

 private:
  std::vector<std::unique_ptr<Decoder>> parts_;
};

}  // namespace

std::string Utf8Lossy(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  size_t i = 0;
  while (i < bytes.size()) {
    // Longest valid prefix of the next sequence, as from_utf8_lossy does.
    const auto c = static_cast<unsigned char>(bytes[i]);
    size_t len = c < 0x80 ? 1 : Utf8Length(c);
    if (c >= 0x80 && (c < 0xc2 || c > 0xf4)) len = 0;
    size_t good = len > 0 ? 1 : 0;
    for (size_t k = 1; k < len && i + k < bytes.size(); ++k) {
      const auto n = static_cast<unsigned char>(bytes[i + k]);
      unsigned char lo = 0x80, hi = 0xbf;
      if (k == 1 && c == 0xe0) lo = 0xa0;
      if (k == 1 && c == 0xed) hi = 0x9f;
      if (k == 1 && c == 0xf0) lo = 0x90;
      if (k == 1 && c == 0xf4) hi = 0x8f;
      if (n < lo || n > hi) break;
      ++good;
    }
    if (len > 0 && good == len) {
      out.append(bytes.substr(i, len));
      i += len;
    } else {
      out += kReplacementChar;
      i += std::max<size_t>(good, 1);
    }
  }
  return out;
}

absl::StatusOr<std::unique_ptr<Decoder>> MakeDecoder(const json& j) {
  const std::string type = j.value("type", "");
  if (type == "WordPiece") {
    return WordPieceDecoder(j.value("prefix", "##"), j.value("cleanup", true));
  }
  if (type == "ByteLevel") return ByteLevelDecoder();
  if (type == "Metaspace") {
    bool prepend = j.value("add_prefix_space", true);
    if (j.contains("prepend_scheme")) {
      prepend = j["prepend_scheme"].get<std::string>() != "never";
    }
    return MetaspaceDecoder(j.value("replacement", "\xe2\x96\x81"), prepend);
  }
  if (type == "ByteFallback") return ByteFallbackDecoder();
  if (type == "Fuse") {
    return Make([](Tokens* t) {
      std::string all;
      for (const auto& s : *t) all += s;
      *t = {all};
      return absl::OkStatus();
    });
  }
  if (type == "Strip") {
    return StripDecoder(j.value("content", " "), j.value("start", size_t{0}),
                        j.value("stop", size_t{0}));
  }
  if (type == "Replace") {
    ASSIGN_OR_RETURN(auto re, MakePattern(j.at("pattern")));
    std::shared_ptr<Regex> pattern = std::move(re);
    const std::string content = j.value("content", "");
    return Make([pattern, content](Tokens* t) -> absl::Status {
      for (std::string& s : *t) {
        ASSIGN_OR_RETURN(auto spans, pattern->FindMatches(s));
        std::string out;
        for (const MatchSpan& m : spans) {
          out += m.is_match ? content : s.substr(m.start, m.end - m.start);
        }
        s = std::move(out);
      }
      return absl::OkStatus();
    });
  }
  if (type == "BPEDecoder") {
    const std::string suffix = j.value("suffix", "</w>");
    return Make([suffix](Tokens* t) {
      for (size_t i = 0; i < t->size(); ++i) {
        const std::string rep = i + 1 == t->size() ? "" : " ";
        (*t)[i] = absl::StrReplaceAll((*t)[i], {{suffix, rep}});
      }
      return absl::OkStatus();
    });
  }
  if (type == "Sequence") {
    std::vector<std::unique_ptr<Decoder>> parts;
    for (const json& part : j.at("decoders")) {
      ASSIGN_OR_RETURN(auto p, MakeDecoder(part));
      parts.push_back(std::move(p));
    }
    return std::make_unique<SequenceDecoder>(std::move(parts));
  }
  return UnknownType("decoder", type);
}

}  // namespace encoder::tokenizer
