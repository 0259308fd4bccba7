#include "server/core/text_input.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/common/status_macros.h"

namespace encoder::core {

namespace {

// Python's str.isspace: the code points sentence-transformers' strip()
// removed.
bool IsPythonSpace(uint32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 ||
         c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) ||
         c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
         c == 0x3000;
}

// The UTF-8 sequence starting at s[i]: its code point and length; length 0
// for a byte that starts none (the tokenizer reports it).
std::pair<uint32_t, size_t> DecodeAt(std::string_view s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<uint8_t>(s[i + k]); };
  const size_t left = s.size() - i;
  const uint8_t c = b(0);
  if (c < 0x80) return {c, 1};
  size_t n = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 0;
  if (n == 0 || n > left) return {0, 0};
  uint32_t cp = c & (0x7F >> n);
  for (size_t k = 1; k < n; ++k) {
    if ((b(k) & 0xC0) != 0x80) return {0, 0};
    cp = (cp << 6) | (b(k) & 0x3F);
  }
  return {cp, n};
}

// `text` without its leading and trailing whitespace (Python's
// str.strip()), and the bytes and code points it lost at the front.
struct Stripped {
  std::string_view text;
  int64_t lead_bytes = 0;
  int64_t lead_chars = 0;
};

Stripped StripText(std::string_view text) {
  Stripped out;
  size_t begin = 0;
  while (begin < text.size()) {
    auto [cp, n] = DecodeAt(text, begin);
    if (n == 0 || !IsPythonSpace(cp)) break;
    begin += n;
    ++out.lead_chars;
  }
  size_t end = text.size();
  while (end > begin) {
    size_t start = end - 1;  // back to the sequence's first byte
    while (start > begin && (static_cast<uint8_t>(text[start]) & 0xC0) == 0x80)
      --start;
    auto [cp, n] = DecodeAt(text, start);
    if (n != end - start || !IsPythonSpace(cp)) break;
    end = start;
  }
  out.text = text.substr(begin, end - begin);
  out.lead_bytes = static_cast<int64_t>(begin);
  return out;
}

// Moves the offsets of `e`'s tokens of sequence `sequence` (-1: every
// token) back onto the unstripped text. Special tokens the template added
// keep their empty (0, 0) offsets.
void ShiftOffsets(const Stripped& s, int sequence, tokenizer::Encoding* e) {
  if (s.lead_bytes == 0) return;
  for (size_t i = 0; i < e->size(); ++i) {
    if (sequence >= 0 && i < e->sequence_ids.size() &&
        e->sequence_ids[i] != sequence) {
      continue;
    }
    const bool special =
        i < e->special_tokens_mask.size() && e->special_tokens_mask[i] != 0;
    if (i < e->byte_offsets.size()) {
      tokenizer::Offsets& o = e->byte_offsets[i];
      if (!(special && o.start == 0 && o.end == 0)) {
        o.start += s.lead_bytes;
        o.end += s.lead_bytes;
      }
    }
    if (i < e->char_offsets.size()) {
      tokenizer::Offsets& o = e->char_offsets[i];
      if (!(special && o.start == 0 && o.end == 0)) {
        o.start += s.lead_chars;
        o.end += s.lead_chars;
      }
    }
  }
}

// Encodes `first` (and `second`, when given) whole, and once more cut to
// max_length when truncate and the whole is longer.
absl::StatusOr<TokenizedText> Tokenize(const api::ServedModel& model,
                                       std::string_view first,
                                       const std::string_view* second,
                                       const TextOptions& options,
                                       bool truncate, int64_t max_length) {
  tokenizer::EncodeOptions o;
  // As transformers (and so sentence-transformers) tokenize: a
  // tokenizer.json's fixed padding (all-MiniLM-L6-v2 pads to 128) and
  // default truncation are not applied; truncation is the request's.
  o.file_settings = false;
  o.add_special_tokens = options.add_special_tokens;
  o.side = options.truncation_side;
  const tokenizer::Tokenizer* tok = model.tokenizer();
  if (tok == nullptr) {
    return absl::InvalidArgumentError(model.description().no_tokenizer_reason);
  }
  // sentence-transformers up to 5.3 stripped every text's leading and
  // trailing whitespace before tokenizing (ModelDescription.strip_text).
  const bool strip = options.strip || model.description().strip_text;
  const Stripped a = strip ? StripText(first) : Stripped{first};
  const std::string_view second_text =
      second == nullptr ? std::string_view() : *second;
  const Stripped b = strip ? StripText(second_text) : Stripped{second_text};
  auto encode = [&]() -> absl::StatusOr<tokenizer::Encoding> {
    auto e = second == nullptr ? tok->Encode(a.text, o)
                               : tok->EncodePair(a.text, b.text, o);
    if (!e.ok() && strip) {
      // Errors (invalid UTF-8 at a byte offset) name the text as sent.
      return second == nullptr ? tok->Encode(first, o)
                               : tok->EncodePair(first, *second, o);
    }
    if (e.ok() && strip) {
      ShiftOffsets(a, second == nullptr ? -1 : 0, &*e);
      if (second != nullptr) ShiftOffsets(b, 1, &*e);
    }
    return e;
  };
  TokenizedText out;
  ASSIGN_OR_RETURN(auto whole, encode());
  out.encoding = std::move(whole);
  if (!truncate || max_length <= 0 ||
      static_cast<int64_t>(out.encoding.size()) <= max_length) {
    return out;
  }
  o.truncate = true;
  o.max_length = max_length;
  const int64_t whole_size = static_cast<int64_t>(out.encoding.size());
  ASSIGN_OR_RETURN(auto cut, encode());
  out.encoding = std::move(cut);
  out.truncated = true;
  out.dropped_tokens = whole_size - static_cast<int64_t>(out.encoding.size());
  return out;
}

}  // namespace

absl::StatusOr<TokenizedText> TokenizeText(const api::ServedModel& model,
                                           std::string_view text,
                                           const TextOptions& options,
                                           bool truncate, int64_t max_length) {
  return Tokenize(model, text, nullptr, options, truncate, max_length);
}

absl::StatusOr<TokenizedText> TokenizePair(const api::ServedModel& model,
                                           std::string_view first,
                                           std::string_view second,
                                           const TextOptions& options,
                                           bool truncate, int64_t max_length) {
  return Tokenize(model, first, &second, options, truncate, max_length);
}

absl::StatusOr<std::string> ResolvePrompt(
    const api::ServedModel& model, const std::string& prompt_name,
    const std::optional<std::string>& prompt) {
  const api::ModelDescription& spec = model.description();
  if (prompt.has_value()) {
    if (!prompt_name.empty()) {
      return absl::InvalidArgumentError(
          "set prompt or prompt_name, not both: prompt is a text of its own, "
          "prompt_name names one of the model's prompts");
    }
    return *prompt;
  }
  const std::string& name =
      prompt_name.empty() ? spec.default_prompt_name : prompt_name;
  if (name.empty()) return std::string();
  auto it = spec.prompts.find(name);
  if (it == spec.prompts.end()) {
    std::vector<std::string> names;
    for (const auto& [n, text] : spec.prompts) names.push_back(n);
    return absl::InvalidArgumentError(absl::StrCat(
        "prompt_name \"", name, "\" is not a prompt of model \"", spec.name,
        "\"",
        names.empty()
            ? " (it has none)"
            : absl::StrCat("; its prompts: ", absl::StrJoin(names, ", "))));
  }
  return it->second;
}

absl::StatusOr<int64_t> PromptPoolSkip(const api::ServedModel& model,
                                       const std::string& prompt,
                                       const TextOptions& options) {
  if (prompt.empty() || model.description().include_prompt) return 0;
  ASSIGN_OR_RETURN(TokenizedText t,
                   TokenizeText(model, prompt, options, /*truncate=*/false, 0));
  int64_t n = static_cast<int64_t>(t.encoding.ids.size());
  if (n > 0 && model.tokenizer()->IsSpecial(t.encoding.ids.back())) --n;
  return n;
}

bool TruncateIds(const api::ServedModel& model, tokenizer::TruncationSide side,
                 int64_t max_length, std::vector<int64_t>* ids) {
  const int64_t n = static_cast<int64_t>(ids->size());
  if (max_length <= 0 || n <= max_length) return false;
  const bool left = side == tokenizer::TruncationSide::kLeft;
  // The special token at the edge being cut: [SEP] on the right, [CLS] on
  // the left.
  const int64_t edge = left ? ids->front() : ids->back();
  const tokenizer::Tokenizer* tok = model.tokenizer();
  const bool keep_edge =
      max_length >= 2 && tok != nullptr && tok->IsSpecial(edge);
  if (left) {
    // Keep the last max_length ids (the last max_length - 1 plus the edge).
    const int64_t body = keep_edge ? max_length - 1 : max_length;
    ids->erase(ids->begin() + (keep_edge ? 1 : 0), ids->end() - body);
  } else {
    const int64_t body = keep_edge ? max_length - 1 : max_length;
    ids->erase(ids->begin() + body, ids->end() - (keep_edge ? 1 : 0));
  }
  return true;
}

}  // namespace encoder::core
