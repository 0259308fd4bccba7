#include "server/model/tokenizer.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace encoder::model {

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

std::string ByteTokenizer::Label(int64_t id) {
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

}  // namespace encoder::model
