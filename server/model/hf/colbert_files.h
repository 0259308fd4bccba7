// A PyLate ColBERT checkpoint's framing (model/colbert_framing.h): its
// config_sentence_transformers.json keys query_prefix, document_prefix,
// query_length, document_length, do_query_expansion,
// attend_to_expansion_tokens and skiplist_words, each null or absent
// taking pylate.models.ColBERT's default ("[Q] ", "[D] ", 32, 180, true,
// false, Python's string.punctuation), with the token ids looked up in
// tokenizer.json as transformers' convert_tokens_to_ids does.
#ifndef ENCODER_SERVER_MODEL_HF_COLBERT_FILES_H_
#define ENCODER_SERVER_MODEL_HF_COLBERT_FILES_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "server/model/colbert_framing.h"

namespace encoder::model::hf {

// Whether `type` (a modules.json entry's) is one of PyLate's modules.
bool IsPylateModule(const std::string& type);

// The framing of the model in `dir` when it is PyLate's (`pylate`: its
// modules.json names a PyLate module; or its
// config_sentence_transformers.json has one of the keys above); nullopt
// otherwise. Errors name the file and the key.
absl::StatusOr<std::optional<ColbertFraming>> ReadColbertFraming(
    const std::string& dir, bool pylate);

}  // namespace encoder::model::hf

#endif  // ENCODER_SERVER_MODEL_HF_COLBERT_FILES_H_
