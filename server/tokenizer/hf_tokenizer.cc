#include "server/tokenizer/hf_tokenizer.h"

#include "absl/strings/str_cat.h"
#include "server/common/status_macros.h"
#include "server/tokenizer/unicode.h"

namespace encoder::tokenizer {

void ComputeCharOffsets(std::string_view text, Encoding* e) {
  std::vector<int64_t> char_at(text.size() + 1, 0);
  int64_t chars = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    if ((text[i] & 0xc0) != 0x80 && i > 0) ++chars;
    char_at[i] = chars;
  }
  e->char_offsets.clear();
  e->char_offsets.reserve(e->size());
  for (const Offsets& o : e->byte_offsets) {
    if (text.empty() || o.start >= static_cast<int64_t>(text.size())) {
      e->char_offsets.push_back(o);
      continue;
    }
    const int64_t start = char_at[o.start];
    int64_t end = o.end < static_cast<int64_t>(text.size())
                      ? char_at[o.end]
                      : (o.end > 0 ? char_at[o.end - 1] + 1 : start + 1);
    e->char_offsets.push_back({start, end});
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
  e->type_ids.assign(e->ids.size(), 0);
  e->special_tokens_mask.assign(e->ids.size(), 0);
  return absl::OkStatus();
}

void HfTokenizer::Truncate(const EncodeOptions& options, Encoding* e) const {
  int64_t max_length = options.max_length;
  TruncationSide side = options.side;
  if (max_length <= 0) {
    if (!options.file_settings || !c_.truncation_max_length) return;
    max_length = *c_.truncation_max_length;
    side = c_.truncation_side;
  } else if (!options.truncate) {
    return;
  }
  const int64_t added =
      options.add_special_tokens && c_.post_processor != nullptr
          ? static_cast<int64_t>(c_.post_processor->AddedTokens())
          : 0;
  const int64_t keep = std::max<int64_t>(0, max_length - added);
  const int64_t n = static_cast<int64_t>(e->size());
  if (n <= keep) return;
  const int64_t from = side == TruncationSide::kRight ? 0 : n - keep;
  e->KeepWindow(static_cast<size_t>(from), static_cast<size_t>(keep));
}

void HfTokenizer::Pad(Encoding* e) const {
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
}

absl::StatusOr<Encoding> HfTokenizer::Encode(
    std::string_view text, const EncodeOptions& options) const {
  RETURN_IF_ERROR(ValidateUtf8(text));
  Encoding e;
  RETURN_IF_ERROR(Tokenize(text, &e));
  Truncate(options, &e);
  if (c_.post_processor != nullptr) {
    c_.post_processor->Process(options.add_special_tokens, &e);
  }
  ComputeCharOffsets(text, &e);
  if (options.file_settings) Pad(&e);
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
