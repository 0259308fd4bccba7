// Tokenizers from SentencePiece .model files, as the Hugging Face "slow"
// tokenizers of two checkpoint families use them:
//  - spiece.model (T5Tokenizer): ids are SentencePiece's; every sequence
//    ends with </s>; <extra_id_N> sentinels when tokenizer_config.json or
//    special_tokens_map.json declare them.
//  - sentencepiece.bpe.model (XLMRobertaTokenizer): fairseq ids, piece id
//    + 1 with <s> 0, <pad> 1, </s> 2, <unk> 3 and <mask> last; "<s> A </s>".
// SentencePiece itself (libsentencepiece, through the module of
// spm_module.h) encodes and decodes.
#ifndef ENCODER_SERVER_TOKENIZER_SENTENCEPIECE_H_
#define ENCODER_SERVER_TOKENIZER_SENTENCEPIECE_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "server/tokenizer/tokenizer.h"

namespace encoder::tokenizer {

enum class SentencePieceFamily { kT5, kXlmRoberta };

// `dir`/`file` (spiece.model: T5, sentencepiece.bpe.model: XLM-R), with
// `dir`'s tokenizer_config.json and special_tokens_map.json when present.
// InvalidArgument for a file that is not a SentencePiece model, Unimplemented
// for a tokenizer_class of another family or a build without SentencePiece.
// options.lowercase lowercases every text as tokenizer_config.json's
// do_lower_case does.
absl::StatusOr<std::unique_ptr<Tokenizer>> LoadSentencePieceDirectory(
    const std::string& dir, const std::string& file,
    const LoadOptions& options = {});

}  // namespace encoder::tokenizer

#endif  // ENCODER_SERVER_TOKENIZER_SENTENCEPIECE_H_
