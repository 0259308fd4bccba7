// Tokenize and Decode for every front: the model's tokenizer, no forward
// pass, under one limit (ServiceLimits::max_tokenize_texts_per_request).
// A front parses its wire format into a query and renders the answer; the
// checks, their order and their messages are these.
#ifndef ENCODER_SERVER_CORE_TOKENIZE_H_
#define ENCODER_SERVER_CORE_TOKENIZE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/api/served_model.h"
#include "server/core/embed_request.h"
#include "server/core/text_input.h"

namespace encoder::core {

struct TokenizeQuery {
  std::string model;  // empty: the default model
  struct Text {
    std::string text;
    std::string where;  // how errors name it: "texts[2]", "inputs[0]"
  };
  std::vector<Text> texts;
  TextOptions options;
  bool truncate = false;
  // Longest encoding when truncating; 0: the model's max_length. < 0 is
  // refused.
  int64_t max_length = 0;
  // Set: the prompt an Embed call with this prompt_name would get (empty:
  // the model's default prompt, if any) goes before every text, as
  // text-embeddings-inference's /tokenize does. Unset: the text alone.
  std::optional<std::string> prompt_name;
};

struct TokenizeAnswer {
  const api::ServedModel* model = nullptr;
  // Per text: what was tokenized (the prompt included) and its encoding,
  // whose offsets index that string.
  std::vector<std::string> texts;
  std::vector<TokenizedText> encodings;
};

struct DecodeQuery {
  std::string model;  // empty: the default model
  std::vector<std::vector<int64_t>> ids;
  bool skip_special_tokens = false;
  // The request field that holds `ids`, for errors ("inputs", "ids").
  std::string field = "inputs";
};

struct DecodeAnswer {
  const api::ServedModel* model = nullptr;
  std::vector<std::string> texts;
};

// NOT_FOUND for an unknown model; INVALID_ARGUMENT for no texts, more than
// limits.max_tokenize_texts_per_request, a negative max_length, a model
// without a tokenizer, an unknown prompt name, or a text the tokenizer
// refuses (invalid UTF-8: the message names the text and the byte offset).
absl::StatusOr<TokenizeAnswer> Tokenize(const api::ModelCatalog& host,
                                        const TokenizeQuery& query,
                                        const ServiceLimits& limits);

// NOT_FOUND for an unknown model; INVALID_ARGUMENT for no id lists, more
// than limits.max_tokenize_texts_per_request, a model without a tokenizer,
// or an id outside the tokenizer's vocabulary (naming the list).
absl::StatusOr<DecodeAnswer> Decode(const api::ModelCatalog& host,
                                    const DecodeQuery& query,
                                    const ServiceLimits& limits);

}  // namespace encoder::core

#endif  // ENCODER_SERVER_CORE_TOKENIZE_H_
