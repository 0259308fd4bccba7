// Tokenizers from files older than tokenizer.json: a BERT vocab.txt
// (SentencePiece .model files: sentencepiece.h).
#ifndef ENCODER_SERVER_TOKENIZER_LEGACY_H_
#define ENCODER_SERVER_TOKENIZER_LEGACY_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "server/tokenizer/tokenizer.h"

namespace encoder::tokenizer {

// BERT WordPiece from `dir`/vocab.txt, lower-casing unless `dir`/
// tokenizer_config.json says "do_lower_case": false (options.lowercase
// puts a Lowercase normalizer before the BERT one whatever it says).
absl::StatusOr<std::unique_ptr<Tokenizer>> LoadBertVocab(
    const std::string& dir, const LoadOptions& options = {});

}  // namespace encoder::tokenizer

#endif  // ENCODER_SERVER_TOKENIZER_LEGACY_H_
