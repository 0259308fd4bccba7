#include "server/tokenizer/byte_tokenizer.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "server/common/status_macros.h"
#include "server/tokenizer/unicode.h"

namespace encoder::tokenizer {

absl::StatusOr<std::vector<int64_t>> ByteTokenizer::Encode(
    std::string_view text, int64_t vocab_size) {
  if (vocab_size < kMinVocab) {
    return absl::InvalidArgumentError(
        absl::StrCat("text input needs a vocabulary of at least ", kMinVocab,
                     " ids for the byte tokenizer; this model has ", vocab_size,
                     ": send token ids instead"));
  }
  std::vector<int64_t> ids;
  ids.reserve(text.size() + 2);
  ids.push_back(kCls);
  for (unsigned char c : text) ids.push_back(kByteOffset + c);
  ids.push_back(kSep);
  return ids;
}

std::string ByteTokenizer::IdLabel(int64_t id) {
  switch (id) {
    case kPad:
      return "[PAD]";
    case kCls:
      return "[CLS]";
    case kSep:
      return "[SEP]";
    case kUnk:
      return "[UNK]";
    default:
      break;
  }
  if (id >= kByteOffset && id < kByteOffset + 256) {
    const int b = static_cast<int>(id - kByteOffset);
    if (b >= 0x20 && b < 0x7f) return std::string(1, static_cast<char>(b));
    return absl::StrFormat("\\x%02x", b);
  }
  return absl::StrCat("#", id);
}

absl::StatusOr<Encoding> ByteTokenizer::Encode(
    std::string_view text, const EncodeOptions& options) const {
  RETURN_IF_ERROR(ValidateUtf8(text));
  ASSIGN_OR_RETURN(auto ids, Encode(text, vocab_size_));
  Encoding e;
  int64_t chars = -1;
  for (size_t i = 0; i < text.size(); ++i) {
    if ((text[i] & 0xc0) != 0x80) ++chars;
    e.ids.push_back(ids[i + 1]);
    e.tokens.push_back(IdLabel(ids[i + 1]));
    const auto b = static_cast<int64_t>(i);
    e.byte_offsets.push_back({b, b + 1});
    e.char_offsets.push_back({chars, chars + 1});
  }
  const int64_t added = options.add_special_tokens ? 2 : 0;
  if (options.truncate && options.max_length > 0 &&
      static_cast<int64_t>(e.size()) + added > options.max_length) {
    const size_t keep = std::max<int64_t>(0, options.max_length - added);
    const size_t from =
        options.side == TruncationSide::kRight ? 0 : e.size() - keep;
    auto cut = [from, keep](auto* v) {
      v->erase(v->begin() + from + keep, v->end());
      v->erase(v->begin(), v->begin() + from);
    };
    cut(&e.ids);
    cut(&e.tokens);
    cut(&e.byte_offsets);
    cut(&e.char_offsets);
  }
  e.special_tokens_mask.assign(e.size(), 0);
  if (options.add_special_tokens) {
    e.ids.insert(e.ids.begin(), kCls);
    e.ids.push_back(kSep);
    e.tokens.insert(e.tokens.begin(), "[CLS]");
    e.tokens.push_back("[SEP]");
    for (auto* o : {&e.byte_offsets, &e.char_offsets}) {
      o->insert(o->begin(), Offsets{0, 0});
      o->push_back(Offsets{0, 0});
    }
    e.special_tokens_mask.insert(e.special_tokens_mask.begin(), 1);
    e.special_tokens_mask.push_back(1);
  }
  e.type_ids.assign(e.size(), 0);
  return e;
}

absl::StatusOr<std::string> ByteTokenizer::Decode(
    const std::vector<int64_t>& ids, bool skip_special_tokens) const {
  std::string out;
  for (int64_t id : ids) {
    if (id < 0 || id >= vocab_size_) {
      return absl::InvalidArgumentError(
          absl::StrCat("token id ", id, " is outside the vocabulary (size ",
                       vocab_size_, ")"));
    }
    if (id >= kByteOffset && id < kByteOffset + 256) {
      out.push_back(static_cast<char>(id - kByteOffset));
    } else if (!skip_special_tokens) {
      out += IdLabel(id);
    }
  }
  return out;
}

}  // namespace encoder::tokenizer
