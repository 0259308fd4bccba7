#include "server/core/colbert_input.h"

#include <algorithm>
#include <utility>

#include "server/common/status_macros.h"
#include "server/core/text_input.h"

namespace encoder::core {

absl::StatusOr<ColbertSequence> FrameColbertText(
    const api::ServedModel& model, const std::string& text, bool is_query,
    tokenizer::TruncationSide side) {
  const model::ColbertFraming& f = *model.description().colbert;
  const int64_t marker = is_query ? f.query_prefix_id : f.document_prefix_id;
  const int64_t length = is_query ? f.query_length : f.document_length;
  TextOptions options;
  options.truncation_side = side;
  options.strip = true;
  ASSIGN_OR_RETURN(auto tokens,
                   TokenizeText(model, text, options, /*truncate=*/true,
                                marker >= 0 ? length - 1 : length));
  ColbertSequence out;
  out.dropped_tokens = tokens.dropped_tokens;
  std::vector<int64_t> ids = std::move(tokens.encoding.ids);
  std::vector<std::string> names = std::move(tokens.encoding.tokens);
  names.resize(ids.size());
  if (marker >= 0) {
    const size_t at = std::min<size_t>(1, ids.size());
    ids.insert(ids.begin() + at, marker);
    names.insert(names.begin() + at,
                 is_query ? f.query_prefix : f.document_prefix);
  }
  const int64_t real = static_cast<int64_t>(ids.size());
  if (is_query && f.query_expansion && real < length) {
    ids.resize(length, f.expansion_id);
    names.resize(length, model.tokenizer()->Label(f.expansion_id));
    if (!f.attend_to_expansion) out.spec.attended_tokens = real;
  }
  out.scored.assign(ids.size(), true);
  if (!is_query) {
    for (size_t k = 0; k < ids.size(); ++k) {
      out.scored[k] = !std::binary_search(f.skiplist_ids.begin(),
                                          f.skiplist_ids.end(), ids[k]);
    }
  }
  out.spec.token_ids = std::move(ids);
  out.names = std::move(names);
  return out;
}

void KeepScoredRows(const std::vector<bool>& scored, int64_t dim,
                    std::vector<float>* tokens) {
  if (dim <= 0) return;
  const size_t rows = tokens->size() / static_cast<size_t>(dim);
  size_t kept = 0;
  for (size_t r = 0; r < rows; ++r) {
    if (r < scored.size() && !scored[r]) continue;
    if (kept != r) {
      std::copy_n(tokens->begin() + r * dim, dim, tokens->begin() + kept * dim);
    }
    ++kept;
  }
  tokens->resize(kept * static_cast<size_t>(dim));
}

}  // namespace encoder::core
