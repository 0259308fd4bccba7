#include "server/tokenizer/pair_encoding.h"

#include <algorithm>
#include <iterator>
#include <utility>

#include "absl/strings/str_cat.h"

namespace encoder::tokenizer {

PairLengths LongestFirst(size_t first, size_t second, size_t max_length) {
  if (first + second <= max_length) return {first, second};
  const bool swapped = first > second;
  size_t shorter = std::min(first, second);
  size_t longer =
      shorter > max_length ? shorter : std::max(shorter, max_length - shorter);
  if (shorter + longer > max_length) {
    shorter = max_length / 2;
    longer = shorter + max_length % 2;
  }
  return swapped ? PairLengths{longer, shorter} : PairLengths{shorter, longer};
}

PairLengths SlowLongestFirst(size_t first, size_t second, size_t max_length) {
  if (first + second <= max_length) return {first, second};
  const size_t remove = first + second - max_length;
  const size_t uneven =
      std::min(first > second ? first - second : second - first, remove);
  const size_t even = remove - uneven;
  size_t from_first = even / 2, from_second = even - even / 2;
  (first > second ? from_first : from_second) += uneven;
  return {first - std::min(first, from_first),
          second - std::min(second, from_second)};
}

absl::Status CheckPairRoom(int64_t max_length, int64_t added) {
  if (max_length >= added) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("max_length ", max_length, " cannot hold the ", added,
                   " special tokens of a text pair"));
}

void KeepTokens(size_t keep, TruncationSide side, Encoding* e) {
  if (e->size() <= keep) return;
  e->KeepWindow(side == TruncationSide::kRight ? 0 : e->size() - keep, keep);
}

void SetSequenceId(int8_t id, Encoding* e) {
  e->sequence_ids.assign(e->size(), id);
}

void Append(Encoding part, Encoding* out) {
  auto append = [](auto* from, auto* to) {
    to->insert(to->end(), std::make_move_iterator(from->begin()),
               std::make_move_iterator(from->end()));
  };
  append(&part.ids, &out->ids);
  append(&part.type_ids, &out->type_ids);
  append(&part.tokens, &out->tokens);
  append(&part.byte_offsets, &out->byte_offsets);
  append(&part.char_offsets, &out->char_offsets);
  append(&part.special_tokens_mask, &out->special_tokens_mask);
  append(&part.sequence_ids, &out->sequence_ids);
}

}  // namespace encoder::tokenizer
