#include "server/core/tokenize.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "server/common/status_macros.h"

namespace encoder::core {
namespace {

absl::Status Prefixed(const std::string& where, const absl::Status& s) {
  return absl::Status(s.code(), absl::StrCat(where, ": ", s.message()));
}

absl::StatusOr<const api::ServedModel*> FindModel(const api::ModelCatalog& host,
                                                  const std::string& name) {
  const api::ServedModel* model = host.Find(name);
  if (model == nullptr) {
    return absl::NotFoundError(UnknownModelMessage(name, host));
  }
  return model;
}

absl::Status CheckCount(size_t n, const char* what,
                        const ServiceLimits& limits) {
  if (static_cast<int64_t>(n) > limits.max_tokenize_texts_per_request) {
    return absl::InvalidArgumentError(
        absl::StrCat(n, " ", what, " in one request; at most ",
                     limits.max_tokenize_texts_per_request,
                     " (--max-tokenize-texts-per-request)"));
  }
  return absl::OkStatus();
}

absl::Status CheckTokenizer(const api::ServedModel& model) {
  if (model.tokenizer() == nullptr) {
    return absl::InvalidArgumentError(model.description().no_tokenizer_reason);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<TokenizeAnswer> Tokenize(const api::ModelCatalog& host,
                                        const TokenizeQuery& query,
                                        const ServiceLimits& limits) {
  TokenizeAnswer answer;
  ASSIGN_OR_RETURN(answer.model, FindModel(host, query.model));
  const api::ServedModel& model = *answer.model;
  if (query.texts.empty()) return absl::InvalidArgumentError("no texts");
  RETURN_IF_ERROR(CheckCount(query.texts.size(), "texts", limits));
  if (query.max_length < 0) {
    return absl::InvalidArgumentError("max_length must be >= 0");
  }
  RETURN_IF_ERROR(CheckTokenizer(model));
  std::string prompt;
  if (query.prompt_name.has_value()) {
    ASSIGN_OR_RETURN(prompt,
                     ResolvePrompt(model, *query.prompt_name, std::nullopt));
  }
  const int64_t max_length =
      query.max_length > 0 ? query.max_length : model.description().max_length;
  answer.texts.reserve(query.texts.size());
  answer.encodings.reserve(query.texts.size());
  for (const TokenizeQuery::Text& t : query.texts) {
    std::string text = prompt.empty() ? t.text : prompt + t.text;
    auto encoded =
        TokenizeText(model, text, query.options, query.truncate, max_length);
    if (!encoded.ok()) return Prefixed(t.where, encoded.status());
    answer.texts.push_back(std::move(text));
    answer.encodings.push_back(*std::move(encoded));
  }
  return answer;
}

absl::StatusOr<DecodeAnswer> Decode(const api::ModelCatalog& host,
                                    const DecodeQuery& query,
                                    const ServiceLimits& limits) {
  DecodeAnswer answer;
  ASSIGN_OR_RETURN(answer.model, FindModel(host, query.model));
  if (query.ids.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("no ", query.field, " to decode"));
  }
  RETURN_IF_ERROR(CheckCount(query.ids.size(), "id lists", limits));
  RETURN_IF_ERROR(CheckTokenizer(*answer.model));
  answer.texts.reserve(query.ids.size());
  for (size_t i = 0; i < query.ids.size(); ++i) {
    auto text = answer.model->tokenizer()->Decode(query.ids[i],
                                                  query.skip_special_tokens);
    if (!text.ok()) {
      return Prefixed(absl::StrCat(query.field, "[", i, "]"), text.status());
    }
    answer.texts.push_back(*std::move(text));
  }
  return answer;
}

}  // namespace encoder::core
