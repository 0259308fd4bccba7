#include "server/service/tokenize_rpc.h"

#include "absl/strings/str_cat.h"
#include "server/common/status_macros.h"
#include "server/core/embed_request.h"
#include "server/core/text_input.h"
#include "server/service/embed_proto.h"

namespace encoder::service {
namespace {

absl::Status Prefixed(const std::string& where, const absl::Status& s) {
  return absl::Status(s.code(), absl::StrCat(where, ": ", s.message()));
}

void FillEncoding(const core::TokenizedText& t, v1::Encoding* out) {
  const tokenizer::Encoding& e = t.encoding;
  out->mutable_ids()->Add(e.ids.begin(), e.ids.end());
  out->mutable_tokens()->Reserve(static_cast<int>(e.size()));
  for (const std::string& token : e.tokens) out->add_tokens(token);
  for (size_t i = 0; i < e.size(); ++i) {
    out->add_byte_offsets(e.byte_offsets[i].start);
    out->add_byte_offsets(e.byte_offsets[i].end);
    out->add_char_offsets(e.char_offsets[i].start);
    out->add_char_offsets(e.char_offsets[i].end);
    out->add_special_tokens_mask(e.special_tokens_mask[i] != 0);
  }
  out->mutable_type_ids()->Add(e.type_ids.begin(), e.type_ids.end());
  out->set_truncated(t.truncated);
}

}  // namespace

absl::Status RunTokenize(const v1::TokenizeRequest& request,
                         const runner::ModelCatalog& host,
                         const TokenizeLimits& limits,
                         v1::TokenizeResponse* response) {
  const runner::ServedModel* model = host.Find(request.model());
  if (model == nullptr) {
    return absl::NotFoundError(
        core::UnknownModelMessage(request.model(), host));
  }
  const int64_t n = request.texts_size() + request.texts_bytes_size();
  if (n == 0) {
    return absl::InvalidArgumentError("no texts: set texts or texts_bytes");
  }
  if (n > limits.max_texts_per_request) {
    return absl::InvalidArgumentError(absl::StrCat(
        n, " texts in one request; at most ", limits.max_texts_per_request));
  }
  if (request.max_length() < 0) {
    return absl::InvalidArgumentError("max_length must be >= 0");
  }
  const int64_t max_length = request.max_length() > 0
                                 ? request.max_length()
                                 : model->description().config.max_length();
  if (model->tokenizer() == nullptr) {
    return absl::InvalidArgumentError(model->description().no_tokenizer_reason);
  }
  response->set_model(model->name());
  response->set_tokenizer(model->tokenizer()->kind());
  auto one = [&](const std::string& text,
                 const std::string& where) -> absl::Status {
    auto t =
        core::TokenizeText(*model, text, ToTextOptions(request.text_options()),
                           request.truncate(), max_length);
    if (!t.ok()) return Prefixed(where, t.status());
    FillEncoding(*t, response->add_encodings());
    return absl::OkStatus();
  };
  for (int i = 0; i < request.texts_size(); ++i) {
    RETURN_IF_ERROR(one(request.texts(i), absl::StrCat("texts[", i, "]")));
  }
  for (int i = 0; i < request.texts_bytes_size(); ++i) {
    RETURN_IF_ERROR(
        one(request.texts_bytes(i), absl::StrCat("texts_bytes[", i, "]")));
  }
  return absl::OkStatus();
}

absl::Status RunDecode(const v1::DecodeRequest& request,
                       const runner::ModelCatalog& host,
                       const TokenizeLimits& limits,
                       v1::DecodeResponse* response) {
  const runner::ServedModel* model = host.Find(request.model());
  if (model == nullptr) {
    return absl::NotFoundError(
        core::UnknownModelMessage(request.model(), host));
  }
  if (request.inputs_size() == 0) {
    return absl::InvalidArgumentError("no inputs to decode");
  }
  if (request.inputs_size() > limits.max_texts_per_request) {
    return absl::InvalidArgumentError(
        absl::StrCat(request.inputs_size(), " inputs in one request; at most ",
                     limits.max_texts_per_request));
  }
  if (model->tokenizer() == nullptr) {
    return absl::InvalidArgumentError(model->description().no_tokenizer_reason);
  }
  response->set_model(model->name());
  for (int i = 0; i < request.inputs_size(); ++i) {
    const auto& ids = request.inputs(i).ids();
    auto text =
        model->tokenizer()->Decode(std::vector<int64_t>(ids.begin(), ids.end()),
                                   request.skip_special_tokens());
    if (!text.ok()) {
      return Prefixed(absl::StrCat("inputs[", i, "]"), text.status());
    }
    response->add_texts(*std::move(text));
  }
  return absl::OkStatus();
}

}  // namespace encoder::service
