// A PyLate ColBERT model's queries and documents as sequences
// (model::ColbertFraming), for a late-interaction Rerank: the text
// stripped and cut, the marker after the first token, a query expanded
// with mask tokens, and which of a document's token vectors are scored.
#ifndef ENCODER_SERVER_CORE_COLBERT_INPUT_H_
#define ENCODER_SERVER_CORE_COLBERT_INPUT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/api/embed_types.h"
#include "server/api/served_model.h"
#include "server/tokenizer/tokenizer.h"

namespace encoder::core {

struct ColbertSequence {
  api::EmbedSpec spec;  // token ids (and attended_tokens) set, nothing else
  int64_t dropped_tokens = 0;  // the cut took these
  // Per token: whether its vector is scored (false: a document's skiplist
  // token), and its name as the tokenizer writes it.
  std::vector<bool> scored;
  std::vector<std::string> names;
};

// `text` as PyLate's ColBERT.encode(is_query) frames it on `model` (whose
// description has `colbert`): stripped of leading and trailing
// whitespace (sentence-transformers 5.3, which PyLate runs on, strips),
// tokenized and cut on `side` to one token fewer than the query or
// document length (the end token kept), the marker inserted after the
// first token; a query shorter than query_length padded with the
// expansion token to it, attended per attend_to_expansion. Always cut:
// the lengths are the model's own. INVALID_ARGUMENT for text the
// tokenizer refuses.
absl::StatusOr<ColbertSequence> FrameColbertText(
    const api::ServedModel& model, const std::string& text, bool is_query,
    tokenizer::TruncationSide side);

// Drops the rows of `tokens` ([rows, dim], row-major) whose `scored` is
// false; rows past `scored` stay.
void KeepScoredRows(const std::vector<bool>& scored, int64_t dim,
                    std::vector<float>* tokens);

}  // namespace encoder::core

#endif  // ENCODER_SERVER_CORE_COLBERT_INPUT_H_
