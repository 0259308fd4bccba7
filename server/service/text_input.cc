#include "server/service/text_input.h"

namespace encoder::service {

absl::StatusOr<TokenizedText> TokenizeText(const runner::HostedModel& model,
                                           std::string_view text,
                                           const v1::TextOptions& options,
                                           bool truncate, int64_t max_length) {
  tokenizer::EncodeOptions o;
  o.add_special_tokens =
      !options.has_add_special_tokens() || options.add_special_tokens();
  o.side = options.truncation_side() == v1::TRUNCATION_SIDE_LEFT
               ? tokenizer::TruncationSide::kLeft
               : tokenizer::TruncationSide::kRight;
  if (model.tokenizer == nullptr) {
    return absl::InvalidArgumentError(model.no_tokenizer_reason);
  }
  TokenizedText out;
  auto whole = model.tokenizer->Encode(text, o);
  if (!whole.ok()) return whole.status();
  out.encoding = *std::move(whole);
  if (!truncate || max_length <= 0 ||
      static_cast<int64_t>(out.encoding.size()) <= max_length) {
    return out;
  }
  o.truncate = true;
  o.max_length = max_length;
  auto cut = model.tokenizer->Encode(text, o);
  if (!cut.ok()) return cut.status();
  out.encoding = *std::move(cut);
  out.truncated = true;
  return out;
}

}  // namespace encoder::service
