#include "server/core/text_input.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/common/status_macros.h"

namespace encoder::core {

namespace {

// Encodes `first` (and `second`, when given) whole, and once more cut to
// max_length when truncate and the whole is longer.
absl::StatusOr<TokenizedText> Tokenize(const runner::ServedModel& model,
                                       std::string_view first,
                                       const std::string_view* second,
                                       const TextOptions& options,
                                       bool truncate, int64_t max_length) {
  tokenizer::EncodeOptions o;
  // As transformers (and so sentence-transformers) tokenize: a
  // tokenizer.json's fixed padding (all-MiniLM-L6-v2 pads to 128) and
  // default truncation are not applied; truncation is the request's.
  o.file_settings = false;
  o.add_special_tokens = options.add_special_tokens;
  o.side = options.truncation_side;
  const tokenizer::Tokenizer* tok = model.tokenizer();
  if (tok == nullptr) {
    return absl::InvalidArgumentError(model.description().no_tokenizer_reason);
  }
  auto encode = [&]() {
    return second == nullptr ? tok->Encode(first, o)
                             : tok->EncodePair(first, *second, o);
  };
  TokenizedText out;
  ASSIGN_OR_RETURN(auto whole, encode());
  out.encoding = std::move(whole);
  if (!truncate || max_length <= 0 ||
      static_cast<int64_t>(out.encoding.size()) <= max_length) {
    return out;
  }
  o.truncate = true;
  o.max_length = max_length;
  ASSIGN_OR_RETURN(auto cut, encode());
  out.encoding = std::move(cut);
  out.truncated = true;
  return out;
}

}  // namespace

absl::StatusOr<TokenizedText> TokenizeText(const runner::ServedModel& model,
                                           std::string_view text,
                                           const TextOptions& options,
                                           bool truncate, int64_t max_length) {
  return Tokenize(model, text, nullptr, options, truncate, max_length);
}

absl::StatusOr<TokenizedText> TokenizePair(const runner::ServedModel& model,
                                           std::string_view first,
                                           std::string_view second,
                                           const TextOptions& options,
                                           bool truncate, int64_t max_length) {
  return Tokenize(model, first, &second, options, truncate, max_length);
}

absl::StatusOr<std::string> ResolvePrompt(
    const runner::ServedModel& model, const std::string& prompt_name,
    const std::optional<std::string>& prompt) {
  const runner::ModelDescription& spec = model.description();
  if (prompt.has_value()) {
    if (!prompt_name.empty()) {
      return absl::InvalidArgumentError(
          "set prompt or prompt_name, not both: prompt is a text of its own, "
          "prompt_name names one of the model's prompts");
    }
    return *prompt;
  }
  const std::string& name =
      prompt_name.empty() ? spec.default_prompt_name : prompt_name;
  if (name.empty()) return std::string();
  auto it = spec.prompts.find(name);
  if (it == spec.prompts.end()) {
    std::vector<std::string> names;
    for (const auto& [n, text] : spec.prompts) names.push_back(n);
    return absl::InvalidArgumentError(absl::StrCat(
        "prompt_name \"", name, "\" is not a prompt of model \"", spec.name,
        "\"",
        names.empty()
            ? " (it has none)"
            : absl::StrCat("; its prompts: ", absl::StrJoin(names, ", "))));
  }
  return it->second;
}

absl::StatusOr<int64_t> PromptPoolSkip(const runner::ServedModel& model,
                                       const std::string& prompt,
                                       const TextOptions& options) {
  if (prompt.empty() || model.description().include_prompt) return 0;
  ASSIGN_OR_RETURN(TokenizedText t,
                   TokenizeText(model, prompt, options, /*truncate=*/false, 0));
  int64_t n = static_cast<int64_t>(t.encoding.ids.size());
  if (n > 0 && model.tokenizer()->IsSpecial(t.encoding.ids.back())) --n;
  return n;
}

bool TruncateIds(const runner::ServedModel& model,
                 tokenizer::TruncationSide side, int64_t max_length,
                 std::vector<int64_t>* ids) {
  const int64_t n = static_cast<int64_t>(ids->size());
  if (max_length <= 0 || n <= max_length) return false;
  const bool left = side == tokenizer::TruncationSide::kLeft;
  // The special token at the edge being cut: [SEP] on the right, [CLS] on
  // the left.
  const int64_t edge = left ? ids->front() : ids->back();
  const tokenizer::Tokenizer* tok = model.tokenizer();
  const bool keep_edge =
      max_length >= 2 && tok != nullptr && tok->IsSpecial(edge);
  if (left) {
    // Keep the last max_length ids (the last max_length - 1 plus the edge).
    const int64_t body = keep_edge ? max_length - 1 : max_length;
    ids->erase(ids->begin() + (keep_edge ? 1 : 0), ids->end() - body);
  } else {
    const int64_t body = keep_edge ? max_length - 1 : max_length;
    ids->erase(ids->begin() + body, ids->end() - (keep_edge ? 1 : 0));
  }
  return true;
}

}  // namespace encoder::core
