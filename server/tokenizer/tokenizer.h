// The tokenizer interface every hosted model owns: text (or a pair of texts,
// as cross-encoders read them) -> ids (with tokens, offsets and a
// special-token mask) and ids -> text. Implementations: the
// Hugging Face tokenizer.json pipeline, a legacy BERT vocab.txt, a
// SentencePiece .model (T5, XLM-R), and the byte-level tokenizer of the
// built-in models.
#ifndef ENCODER_SERVER_TOKENIZER_TOKENIZER_H_
#define ENCODER_SERVER_TOKENIZER_TOKENIZER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace encoder::tokenizer {

enum class TruncationSide { kRight, kLeft };

struct EncodeOptions {
  bool add_special_tokens = true;
  // With truncate, an encoding longer than max_length loses tokens on
  // `side` (special tokens stay). max_length 0: the tokenizer's own
  // truncation setting, if any.
  bool truncate = false;
  int64_t max_length = 0;
  TruncationSide side = TruncationSide::kRight;
  // Apply the tokenizer file's own "truncation" and "padding" sections
  // (fixed-length padding, a default max_length), as the tokenizers library
  // does. transformers' tokenizers ignore them and truncate or pad only when
  // a call asks; the server's text inputs do the same (false).
  bool file_settings = true;
};

struct Offsets {
  int64_t start = 0;  // [start, end) into the input text
  int64_t end = 0;
  bool operator==(const Offsets& o) const {
    return start == o.start && end == o.end;
  }
};

struct Encoding {
  std::vector<int64_t> ids;
  std::vector<int64_t> type_ids;
  std::vector<std::string> tokens;
  std::vector<Offsets> byte_offsets;  // UTF-8 bytes
  std::vector<Offsets> char_offsets;  // Unicode code points
  std::vector<uint8_t> special_tokens_mask;
  // Pair encodings only: 0 for tokens of the first text, 1 for tokens of
  // the second, -1 for the special tokens the template added (the
  // tokenizers library's Encoding.sequence_ids, None as -1).
  std::vector<int8_t> sequence_ids;
  size_t size() const { return ids.size(); }

  // Keeps tokens [from, from + count) of every per-token list that is
  // filled (lists not filled yet stay empty). Requires from + count <=
  // size().
  void KeepWindow(size_t from, size_t count) {
    const size_t n = size();
    auto cut = [n, from, count](auto* v) {
      if (v->size() != n) return;
      v->erase(v->begin() + static_cast<std::ptrdiff_t>(from + count),
               v->end());
      v->erase(v->begin(), v->begin() + static_cast<std::ptrdiff_t>(from));
    };
    cut(&type_ids);
    cut(&tokens);
    cut(&byte_offsets);
    cut(&char_offsets);
    cut(&special_tokens_mask);
    cut(&sequence_ids);
    cut(&ids);  // last: the others compare their size with it
  }
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  // InvalidArgument for text that is not valid UTF-8 (naming the byte
  // offset). Thread-safe.
  virtual absl::StatusOr<Encoding> Encode(
      std::string_view text, const EncodeOptions& options) const = 0;
  // Both texts as one input, the way the model family joins a pair ("[CLS]
  // A [SEP] B [SEP]" for BERT), with sequence_ids filled and offsets into
  // each token's own text. Truncation removes tokens from the longer text
  // first; max_length counts the special tokens, and one too small to hold
  // them is InvalidArgument. Thread-safe.
  virtual absl::StatusOr<Encoding> EncodePair(
      std::string_view first, std::string_view second,
      const EncodeOptions& options) const = 0;
  // InvalidArgument for an id outside the vocabulary. Thread-safe.
  virtual absl::StatusOr<std::string> Decode(
      const std::vector<int64_t>& ids, bool skip_special_tokens) const = 0;
  // "wordpiece", "bpe", "unigram", "sentencepiece" or "byte".
  virtual std::string kind() const = 0;
  // Number of ids (largest id + 1), added tokens included.
  virtual int64_t vocab_size() const = 0;
  // A printable label for one id, for attention plots.
  virtual std::string Label(int64_t id) const = 0;
  // Whether `id` is one of the special tokens ([CLS], [SEP], <s>, </s>,
  // [PAD], [UNK], ...), which truncation of token-id inputs keeps.
  virtual bool IsSpecial(int64_t id) const = 0;
};

// What a model's own files add to its tokenizer's. lowercase:
// sentence-transformers' do_lower_case, which lowercases every text first
// (its Transformer module puts a Lowercase normalizer before the
// tokenizer's own, unless that is a Lowercase or a sequence holding one).
struct LoadOptions {
  bool lowercase = false;
};

// A tokenizer.json file (Hugging Face tokenizers format).
absl::StatusOr<std::unique_ptr<Tokenizer>> LoadTokenizerJson(
    const std::string& path, const LoadOptions& options = {});
// A model directory: tokenizer.json; else vocab.txt (+ tokenizer_config.json
// do_lower_case); else spiece.model (T5) or sentencepiece.bpe.model (XLM-R)
// through SentencePiece (see sentencepiece.h).
absl::StatusOr<std::unique_ptr<Tokenizer>> LoadTokenizerFromDirectory(
    const std::string& dir, const LoadOptions& options = {});
// A file (tokenizer.json, or a spiece.model / sentencepiece.bpe.model read
// with its directory's configuration) or a directory, whichever `path` is.
absl::StatusOr<std::unique_ptr<Tokenizer>> LoadTokenizer(
    const std::string& path, const LoadOptions& options = {});

}  // namespace encoder::tokenizer

#endif  // ENCODER_SERVER_TOKENIZER_TOKENIZER_H_
