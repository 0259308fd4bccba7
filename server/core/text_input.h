// Text -> token ids with a hosted model's tokenizer, under the request's
// text options (special tokens, truncation side) and the model's length
// limit. Shared by Embed, Diagnose and Tokenize.
#ifndef ENCODER_SERVER_CORE_TEXT_INPUT_H_
#define ENCODER_SERVER_CORE_TEXT_INPUT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "server/api/served_model.h"
#include "server/tokenizer/tokenizer.h"

namespace encoder::core {

// How text becomes token ids.
struct TextOptions {
  bool add_special_tokens = true;  // the model's [CLS] ... [SEP] and kin
  // Used when truncating, for text and for token-id inputs alike (ids keep
  // the edge id when the model's tokenizer calls it special).
  tokenizer::TruncationSide truncation_side = tokenizer::TruncationSide::kRight;
  // Strip leading and trailing whitespace (Python's str.strip) whatever the
  // model's strip_text says.
  bool strip = false;
};

struct TokenizedText {
  tokenizer::Encoding encoding;
  bool truncated = false;
  int64_t dropped_tokens = 0;  // the whole encoding's length less the cut's
};

// With truncate, an encoding longer than max_length is cut on the requested
// side (special tokens stay); without it the encoding is returned whole and
// the caller checks the length. max_length <= 0: no limit. Invalid UTF-8 is
// INVALID_ARGUMENT naming the byte offset.
absl::StatusOr<TokenizedText> TokenizeText(const api::ServedModel& model,
                                           std::string_view text,
                                           const TextOptions& options,
                                           bool truncate, int64_t max_length);

// The same for a text pair, encoded with the model's pair template; a cut
// takes tokens from the longer text first (longest_first).
absl::StatusOr<TokenizedText> TokenizePair(const api::ServedModel& model,
                                           std::string_view first,
                                           std::string_view second,
                                           const TextOptions& options,
                                           bool truncate, int64_t max_length);

// The prompt text to prepend to a request's text inputs: `prompt` when
// given (even empty), else the model's prompt named `prompt_name`, else its
// default prompt; empty for none. INVALID_ARGUMENT for a name the model
// lacks (listing its prompts) and for both a prompt and a prompt_name.
absl::StatusOr<std::string> ResolvePrompt(
    const api::ServedModel& model, const std::string& prompt_name,
    const std::optional<std::string>& prompt);

// The tokens of `prompt` that a model pooling without its prompt
// (include_prompt false) leaves out, as sentence-transformers counts them:
// the prompt tokenized alone under `options`, less a trailing special
// token ([SEP], </s>). 0 for an empty prompt or a model that pools with it.
absl::StatusOr<int64_t> PromptPoolSkip(const api::ServedModel& model,
                                       const std::string& prompt,
                                       const TextOptions& options);

// Cuts token ids longer than max_length (> 0) on `side`. The id at the kept
// edge stays when the model's tokenizer calls it special: right truncation
// of [CLS] a b c [SEP] to 3 gives [CLS] a [SEP], left gives [CLS] c [SEP].
// Without a tokenizer the ids are cut plainly. Returns whether it cut.
bool TruncateIds(const api::ServedModel& model, tokenizer::TruncationSide side,
                 int64_t max_length, std::vector<int64_t>* ids);

}  // namespace encoder::core

#endif  // ENCODER_SERVER_CORE_TEXT_INPUT_H_
