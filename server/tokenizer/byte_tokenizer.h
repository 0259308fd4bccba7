// The built-in models' byte-level tokenizer: UTF-8 bytes shifted past a few
// special ids, so text works on any model whose vocabulary has at least
// kMinVocab ids.
#ifndef ENCODER_SERVER_TOKENIZER_BYTE_TOKENIZER_H_
#define ENCODER_SERVER_TOKENIZER_BYTE_TOKENIZER_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "server/tokenizer/tokenizer.h"

namespace encoder::tokenizer {

class ByteTokenizer : public Tokenizer {
 public:
  static constexpr int64_t kPad = 0;
  static constexpr int64_t kCls = 1;  // first token of every encoded text
  static constexpr int64_t kSep = 2;  // last token of every encoded text
  static constexpr int64_t kUnk = 3;
  static constexpr int64_t kByteOffset = 4;  // byte b -> id b + 4
  static constexpr int64_t kMinVocab = kByteOffset + 256;

  // [CLS] bytes... [SEP]. Fails (InvalidArgument) when the vocabulary is
  // smaller than kMinVocab. Bytes are taken as they are; invalid UTF-8 is
  // not rejected (it is still a byte sequence).
  static absl::StatusOr<std::vector<int64_t>> Encode(std::string_view text,
                                                     int64_t vocab_size);
  // A printable label per id ("[CLS]", "a", "\\xe4"), for attention plots.
  static std::string IdLabel(int64_t id);

  // As a Tokenizer for a model of `vocab_size` ids. Encode rejects invalid
  // UTF-8 (text requests are text); truncation keeps [CLS] / [SEP].
  explicit ByteTokenizer(int64_t vocab_size) : vocab_size_(vocab_size) {}
  absl::StatusOr<Encoding> Encode(std::string_view text,
                                  const EncodeOptions& options) const override;
  // [CLS] first [SEP] second [SEP], as BERT joins a pair: type id 0 up to
  // the first [SEP], 1 after it. Truncation is the tokenizers library's
  // longest_first, with max_length counting the three special tokens.
  absl::StatusOr<Encoding> EncodePair(
      std::string_view first, std::string_view second,
      const EncodeOptions& options) const override;
  absl::StatusOr<std::string> Decode(const std::vector<int64_t>& ids,
                                     bool skip_special_tokens) const override;
  std::string kind() const override { return "byte"; }
  int64_t vocab_size() const override { return vocab_size_; }
  std::string Label(int64_t id) const override { return IdLabel(id); }
  bool IsSpecial(int64_t id) const override {
    return id >= 0 && id < kByteOffset;
  }

 private:
  // The bytes of valid UTF-8 `text`, one token each (no special tokens,
  // type ids unset).
  absl::StatusOr<Encoding> Bytes(std::string_view text) const;

  int64_t vocab_size_;
};

}  // namespace encoder::tokenizer

#endif  // ENCODER_SERVER_TOKENIZER_BYTE_TOKENIZER_H_
