// The Hugging Face tokenizer pipeline: added tokens -> normalizer ->
// pre-tokenizer -> model -> truncation -> post-processor -> padding, with
// offsets kept against the caller's text throughout.
#ifndef ENCODER_SERVER_TOKENIZER_HF_TOKENIZER_H_
#define ENCODER_SERVER_TOKENIZER_HF_TOKENIZER_H_

#include <memory>
#include <optional>
#include <string>

#include "nlohmann/json_fwd.hpp"
#include "server/tokenizer/added_vocabulary.h"
#include "server/tokenizer/decoders.h"
#include "server/tokenizer/model.h"
#include "server/tokenizer/normalizers.h"
#include "server/tokenizer/post_processors.h"
#include "server/tokenizer/pre_tokenizers.h"
#include "server/tokenizer/tokenizer.h"

namespace encoder::tokenizer {

// Fills e->char_offsets from e->byte_offsets into `text`: byte offsets ->
// code point offsets (an end inside or at the end of the text maps past the
// code point holding its last byte).
void ComputeCharOffsets(std::string_view text, Encoding* e);
// The same for a pair encoding: tokens of sequence 1 index `second`, the
// others `first`.
void ComputeCharOffsets(std::string_view first, std::string_view second,
                        Encoding* e);

struct Components {
  std::unique_ptr<Normalizer> normalizer;       // may be null
  std::unique_ptr<PreTokenizer> pre_tokenizer;  // may be null
  std::unique_ptr<Model> model;
  std::unique_ptr<PostProcessor> post_processor;  // may be null
  std::unique_ptr<Decoder> decoder;               // may be null
  std::vector<AddedToken> added_tokens;
  std::optional<int64_t> truncation_max_length;
  TruncationSide truncation_side = TruncationSide::kRight;
  // Fixed-length padding from the "padding" section (none when unset).
  std::optional<int64_t> pad_length;
  int64_t pad_id = 0, pad_type_id = 0;
  std::string pad_token = "[PAD]";
  bool pad_left = false;
  std::string kind;  // reported kind; the model's when empty
};

class HfTokenizer : public Tokenizer {
 public:
  static absl::StatusOr<std::unique_ptr<HfTokenizer>> Create(Components c);
  // Parses a tokenizer.json document.
  static absl::StatusOr<std::unique_ptr<HfTokenizer>> FromJson(
      const nlohmann::json& j, const LoadOptions& options = {});

  absl::StatusOr<Encoding> Encode(std::string_view text,
                                  const EncodeOptions& options) const override;
  absl::StatusOr<Encoding> EncodePair(
      std::string_view first, std::string_view second,
      const EncodeOptions& options) const override;
  absl::StatusOr<std::string> Decode(const std::vector<int64_t>& ids,
                                     bool skip_special_tokens) const override;
  std::string kind() const override;
  int64_t vocab_size() const override;
  std::string Label(int64_t id) const override;
  bool IsSpecial(int64_t id) const override { return added_.IsSpecial(id); }

 private:
  explicit HfTokenizer(Components c) : c_(std::move(c)) {}
  struct Limit {
    int64_t max_length;
    TruncationSide side;
  };
  absl::Status Tokenize(std::string_view text, Encoding* e) const;
  // The truncation `options` ask for, with the file's as the default.
  std::optional<Limit> TruncationLimit(const EncodeOptions& options) const;
  // Tokens the post-processor adds, when `options` have it add them.
  int64_t AddedTokens(const EncodeOptions& options, bool pair) const;
  void Truncate(const EncodeOptions& options, Encoding* e) const;
  absl::Status TruncatePair(const EncodeOptions& options, Encoding* first,
                            Encoding* second) const;
  // Runs the post-processor over one encoding per sequence and joins them.
  Encoding PostProcess(bool add_special, std::vector<Encoding> parts) const;
  // Fixed-length padding; sequence ids too (-1) for a pair.
  void Pad(bool pair, Encoding* e) const;
  const std::string* IdToToken(int64_t id) const;

  Components c_;
  AddedVocabulary added_;
};

}  // namespace encoder::tokenizer

#endif  // ENCODER_SERVER_TOKENIZER_HF_TOKENIZER_H_
