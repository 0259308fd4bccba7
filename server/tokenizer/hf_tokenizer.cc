#include "server/tokenizer/hf_tokenizer.h"

#include "absl/strings/str_cat.h"
#include "server/common/status_macros.h"
#include "server/tokenizer/pair_encoding.h"
#include "server/tokenizer/unicode.h"

namespace encoder::tokenizer {

namespace {

// Code point offsets of byte offsets into one text.
class CharIndex {
 public:
  explicit CharIndex(std::string_view text)
      : size_(static_cast<int64_t>(text.size())), char_at_(text.size() + 1) {
    for (size_t i = 0; i < text.size(); ++i) {
      if ((text[i] & 0xc0) != 0x80 && i > 0) ++chars_;
      char_at_[i] = chars_;
    }
    if (size_ > 0) ++chars_;
  }

  // An empty span at the end of the text (a trimmed trailing space) maps
  // to the end in code points.
  Offsets Map(const Offsets& o) const {
    if (size_ == 0) return o;
    if (o.start >= size_) return {chars_, chars_ + (o.end - o.start)};
    const int64_t start = char_at_[o.start];
    const int64_t end = o.end < size_
                            ? char_at_[o.end]
                            : (o.end > 0 ? char_at_[o.end - 1] + 1 : start + 1);
    return {start, end};
  }

 private:
  int64_t size_;
  int64_t chars_ = 0;  // code points in the text
  std::vector<int64_t> char_at_;
};

}  // namespace

void ComputeCharOffsets(std::string_view text, Encoding* e) {
  const CharIndex index(text);
  e->char_offsets.clear();
  e->char_offsets.reserve(e->size());
  for (const Offsets& o : e->byte_offsets) {
    e->char_offsets.push_back(index.Map(o));
  }
}

void ComputeCharOffsets(std::string_view first, std::string_view second,
                        Encoding* e) {
  const CharIndex a(first), b(second);
  const bool by_sequence = e->sequence_ids.size() == e->size();
  e->char_offsets.clear();
  e->char_offsets.reserve(e->size());
  for (size_t i = 0; i < e->size(); ++i) {
    const bool in_second = by_sequence && e->sequence_ids[i] == 1;
    e->char_offsets.push_back((in_second ? b : a).Map(e->byte_offsets[i]));
  }
}

absl::StatusOr<std::unique_ptr<HfTokenizer>> HfTokenizer::Create(Components c) {
  if (c.model == nullptr) {
    return absl::InvalidArgumentError("tokenizer has no model");
  }
  std::vector<std::string> normalized;
  for (const AddedToken& t : c.added_tokens) {
    NormalizedString s(t.content, 0);
    if (t.normalized && c.normalizer != nullptr) {
      RETURN_IF_ERROR(c.normalizer->Normalize(&s));
    }
    normalized.push_back(s.get());
  }
  std::unique_ptr<HfTokenizer> tok(new HfTokenizer(std::move(c)));
  tok->added_ = AddedVocabulary(tok->c_.added_tokens, std::move(normalized));
  return tok;
}

absl::Status HfTokenizer::Tokenize(std::string_view text, Encoding* e) const {
  std::vector<Piece> pieces;
  pieces.push_back({NormalizedString(text, 0), std::nullopt});
  added_.Split(false, &pieces);
  if (c_.normalizer != nullptr) {
    for (Piece& p : pieces) {
      if (p.id) continue;
      RETURN_IF_ERROR(c_.normalizer->Normalize(&p.text));
    }
  }
  added_.Split(true, &pieces);
  std::vector<NormalizedString> words;
  std::vector<Token> tokens;
  for (Piece& p : pieces) {
    if (p.text.empty()) continue;
    if (p.id) {
      const NormalizedString::Span span =
          p.text.OriginalSpan(0, p.text.get().size());
      e->ids.push_back(*p.id);
      e->tokens.push_back(p.text.get());
      e->byte_offsets.push_back({span.first, span.second});
      continue;
    }
    words.clear();
    words.push_back(std::move(p.text));
    if (c_.pre_tokenizer != nullptr) {
      RETURN_IF_ERROR(c_.pre_tokenizer->PreTokenize(&words));
    }
    for (const NormalizedString& w : words) {
      if (w.empty()) continue;
      tokens.clear();
      RETURN_IF_ERROR(c_.model->Tokenize(w.get(), &tokens));
      for (Token& t : tokens) {
        const NormalizedString::Span span = w.OriginalSpan(t.start, t.end);
        e->ids.push_back(t.id);
        e->tokens.push_back(std::move(t.value));
        e->byte_offsets.push_back({span.first, span.second});
      }
    }
  }
  e->special_tokens_mask.assign(e->ids.size(), 0);
  return absl::OkStatus();
}

std::optional<HfTokenizer::Limit> HfTokenizer::TruncationLimit(
    const EncodeOptions& options) const {
  if (options.max_length > 0) {
    if (!options.truncate) return std::nullopt;
    return Limit{options.max_length, options.side};
  }
  if (!options.file_settings || !c_.truncation_max_length) return std::nullopt;
  return Limit{*c_.truncation_max_length, c_.truncation_side};
}

int64_t HfTokenizer::AddedTokens(const EncodeOptions& options,
                                 bool pair) const {
  if (!options.add_special_tokens || c_.post_processor == nullptr) return 0;
  return static_cast<int64_t>(c_.post_processor->AddedTokens(pair));
}

void HfTokenizer::Truncate(const EncodeOptions& options, Encoding* e) const {
  const std::optional<Limit> limit = TruncationLimit(options);
  if (!limit) return;
  const int64_t keep =
      std::max<int64_t>(0, limit->max_length - AddedTokens(options, false));
  KeepTokens(static_cast<size_t>(keep), limit->side, e);
}

absl::Status HfTokenizer::TruncatePair(const EncodeOptions& options,
                                       Encoding* first,
                                       Encoding* second) const {
  const std::optional<Limit> limit = TruncationLimit(options);
  if (!limit) return absl::OkStatus();
  const int64_t added = AddedTokens(options, true);
  RETURN_IF_ERROR(CheckPairRoom(limit->max_length, added));
  const PairLengths keep =
      LongestFirst(first->size(), second->size(),
                   static_cast<size_t>(limit->max_length - added));
  KeepTokens(keep.first, limit->side, first);
  KeepTokens(keep.second, limit->side, second);
  return absl::OkStatus();
}

Encoding HfTokenizer::PostProcess(bool add_special,
                                  std::vector<Encoding> parts) const {
  for (size_t i = 0; i < parts.size(); ++i) {
    parts[i].type_ids.assign(parts[i].size(), static_cast<int64_t>(i));
    SetSequenceId(static_cast<int8_t>(i), &parts[i]);
  }
  if (c_.post_processor != nullptr) {
    c_.post_processor->Process(add_special, &parts);
  }
  if (parts.size() == 1) return std::move(parts[0]);
  Encoding e;
  for (Encoding& part : parts) Append(std::move(part), &e);
  return e;
}

void HfTokenizer::Pad(bool pair, Encoding* e) const {
  if (!c_.pad_length || static_cast<int64_t>(e->size()) >= *c_.pad_length) {
    return;
  }
  const size_t n = *c_.pad_length - e->size();
  auto pad = [this, n](auto* v, auto value) {
    v->insert(c_.pad_left ? v->begin() : v->end(), n, value);
  };
  pad(&e->ids, c_.pad_id);
  pad(&e->tokens, c_.pad_token);
  pad(&e->byte_offsets, Offsets{0, 0});
  pad(&e->char_offsets, Offsets{0, 0});
  pad(&e->type_ids, c_.pad_type_id);
  pad(&e->special_tokens_mask, uint8_t{1});
  if (pair) pad(&e->sequence_ids, int8_t{-1});
}

absl::StatusOr<Encoding> HfTokenizer::Encode(
    std::string_view text, const EncodeOptions& options) const {
  RETURN_IF_ERROR(ValidateUtf8(text));
  std::vector<Encoding> parts(1);
  RETURN_IF_ERROR(Tokenize(text, &parts[0]));
  Truncate(options, &parts[0]);
  Encoding e = PostProcess(options.add_special_tokens, std::move(parts));
  e.sequence_ids.clear();
  ComputeCharOffsets(text, &e);
  if (options.file_settings) Pad(false, &e);
  return e;
}

absl::StatusOr<Encoding> HfTokenizer::EncodePair(
    std::string_view first, std::string_view second,
    const EncodeOptions& options) const {
  RETURN_IF_ERROR(ValidateUtf8(first));
  RETURN_IF_ERROR(ValidateUtf8(second));
  std::vector<Encoding> parts(2);
  RETURN_IF_ERROR(Tokenize(first, &parts[0]));
  RETURN_IF_ERROR(Tokenize(second, &parts[1]));
  RETURN_IF_ERROR(TruncatePair(options, &parts[0], &parts[1]));
  Encoding e = PostProcess(options.add_special_tokens, std::move(parts));
  ComputeCharOffsets(first, second, &e);
  if (options.file_settings) Pad(true, &e);
  return e;
}

const std::string* HfTokenizer::IdToToken(int64_t id) const {
  if (const AddedToken* t = added_.Find(id)) return &t->content;
  return c_.model->vocab().Token(id);
}

absl::StatusOr<std::string> HfTokenizer::Decode(
    const std::vector<int64_t>& ids, bool skip_special_tokens) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (int64_t id : ids) {
    const std::string* t = IdToToken(id);
    if (t == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("token id ", id, " is outside the vocabulary (size ",
                       vocab_size(), ")"));
    }
    if (skip_special_tokens && added_.IsSpecial(id)) continue;
    tokens.push_back(*t);
  }
  if (c_.decoder == nullptr) {
    std::string out;
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (i > 0) out += ' ';
      out += tokens[i];
    }
    return out;
  }
  RETURN_IF_ERROR(c_.decoder->DecodeChain(&tokens));
  std::string out;
  for (const std::string& t : tokens) out += t;
  return out;
}

std::string HfTokenizer::kind() const {
  return c_.kind.empty() ? c_.model->kind() : c_.kind;
}

int64_t HfTokenizer::vocab_size() const {
  return std::max(c_.model->vocab().size(), added_.max_id() + 1);
}

std::string HfTokenizer::Label(int64_t id) const {
  const std::string* t = IdToToken(id);
  return t != nullptr ? *t : absl::StrCat("#", id);
}

}  // namespace encoder::tokenizer
