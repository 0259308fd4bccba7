// Sentence pairs: how much of each text longest_first truncation keeps (as
// the tokenizers library and as transformers' slow tokenizers decide it),
// and the joining of per-text encodings into one.
#ifndef ENCODER_SERVER_TOKENIZER_PAIR_ENCODING_H_
#define ENCODER_SERVER_TOKENIZER_PAIR_ENCODING_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "server/tokenizer/tokenizer.h"

namespace encoder::tokenizer {

struct PairLengths {
  size_t first = 0;
  size_t second = 0;
};

// The tokenizers library's longest_first (truncate_encodings): the shorter
// text stays whole when the longer one can give up every token over
// `max_length`; otherwise each keeps half of `max_length`, the longer text
// (the second when both are as long) the odd token.
PairLengths LongestFirst(size_t first, size_t second, size_t max_length);

// transformers' slow tokenizers (truncate_sequences, longest_first): the
// tokens over `max_length` come off the longer text until both are as long,
// the rest off both, the second text losing the odd one.
PairLengths SlowLongestFirst(size_t first, size_t second, size_t max_length);

// InvalidArgument when `max_length` cannot hold the `added` special tokens
// of a pair.
absl::Status CheckPairRoom(int64_t max_length, int64_t added);

// Keeps the first `keep` tokens of `e` (kRight) or its last `keep` (kLeft).
void KeepTokens(size_t keep, TruncationSide side, Encoding* e);

// Fills e->sequence_ids with `id`, one per token.
void SetSequenceId(int8_t id, Encoding* e);

// Appends every per-token list of `part` to `out`.
void Append(Encoding part, Encoding* out);

}  // namespace encoder::tokenizer

#endif  // ENCODER_SERVER_TOKENIZER_PAIR_ENCODING_H_
