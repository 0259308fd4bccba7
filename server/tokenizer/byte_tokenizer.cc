#include "server/tokenizer/byte_tokenizer.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "server/common/status_macros.h"
#include "server/tokenizer/pair_encoding.h"
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

namespace {

// A special token (no offsets) of type `type_id` and sequence id -1.
Encoding SpecialToken(int64_t id, int64_t type_id) {
  Encoding e;
  e.ids = {id};
  e.tokens = {ByteTokenizer::IdLabel(id)};
  e.byte_offsets = {Offsets{0, 0}};
  e.char_offsets = {Offsets{0, 0}};
  e.type_ids = {type_id};
  e.special_tokens_mask = {1};
  e.sequence_ids = {-1};
  return e;
}

// Marks `e` as a text of the input: type and sequence id `sequence`.
void AsSequence(int8_t sequence, Encoding* e) {
  e->type_ids.assign(e->size(), sequence);
  e->special_tokens_mask.assign(e->size(), 0);
  SetSequenceId(sequence, e);
}

}  // namespace

absl::StatusOr<Encoding> ByteTokenizer::Bytes(std::string_view text) const {
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
  return e;
}

absl::StatusOr<Encoding> ByteTokenizer::Encode(
    std::string_view text, const EncodeOptions& options) const {
  ASSIGN_OR_RETURN(Encoding bytes, Bytes(text));
  const int64_t added = options.add_special_tokens ? 2 : 0;
  if (options.truncate && options.max_length > 0) {
    KeepTokens(std::max<int64_t>(0, options.max_length - added), options.side,
               &bytes);
  }
  AsSequence(0, &bytes);
  if (!options.add_special_tokens) {
    bytes.sequence_ids.clear();
    return bytes;
  }
  Encoding e = SpecialToken(kCls, 0);
  Append(std::move(bytes), &e);
  Append(SpecialToken(kSep, 0), &e);
  e.sequence_ids.clear();
  return e;
}

absl::StatusOr<Encoding> ByteTokenizer::EncodePair(
    std::string_view first, std::string_view second,
    const EncodeOptions& options) const {
  ASSIGN_OR_RETURN(Encoding a, Bytes(first));
  ASSIGN_OR_RETURN(Encoding b, Bytes(second));
  const int64_t added = options.add_special_tokens ? 3 : 0;
  if (options.truncate && options.max_length > 0) {
    RETURN_IF_ERROR(CheckPairRoom(options.max_length, added));
    const PairLengths keep = LongestFirst(
        a.size(), b.size(), static_cast<size_t>(options.max_length - added));
    KeepTokens(keep.first, options.side, &a);
    KeepTokens(keep.second, options.side, &b);
  }
  AsSequence(0, &a);
  AsSequence(1, &b);
  if (!options.add_special_tokens) {
    Append(std::move(b), &a);
    return a;
  }
  Encoding e = SpecialToken(kCls, 0);
  Append(std::move(a), &e);
  Append(SpecialToken(kSep, 0), &e);
  Append(std::move(b), &e);
  Append(SpecialToken(kSep, 1), &e);
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
