#include "server/service/tokenize_rpc.h"

#include "absl/strings/str_cat.h"
#include "server/common/status_macros.h"
#include "server/core/embed_request.h"
#include "server/core/text_input.h"
#include "server/core/tokenize.h"
#include "server/service/embed_proto.h"

namespace encoder::service {
namespace {

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
                         const api::ModelCatalog& host,
                         const core::ServiceLimits& limits,
                         v1::TokenizeResponse* response) {
  core::TokenizeQuery query;
  query.model = request.model();
  for (int i = 0; i < request.texts_size(); ++i) {
    query.texts.push_back({request.texts(i), absl::StrCat("texts[", i, "]")});
  }
  for (int i = 0; i < request.texts_bytes_size(); ++i) {
    query.texts.push_back(
        {request.texts_bytes(i), absl::StrCat("texts_bytes[", i, "]")});
  }
  query.options = ToTextOptions(request.text_options());
  query.truncate = request.truncate();
  query.max_length = request.max_length();
  ASSIGN_OR_RETURN(core::TokenizeAnswer answer,
                   core::Tokenize(host, query, limits));
  response->set_model(answer.model->name());
  response->set_tokenizer(answer.model->tokenizer()->kind());
  for (const core::TokenizedText& t : answer.encodings) {
    FillEncoding(t, response->add_encodings());
  }
  return absl::OkStatus();
}

absl::Status RunDecode(const v1::DecodeRequest& request,
                       const api::ModelCatalog& host,
                       const core::ServiceLimits& limits,
                       v1::DecodeResponse* response) {
  core::DecodeQuery query;
  query.model = request.model();
  query.skip_special_tokens = request.skip_special_tokens();
  for (const v1::TokenIds& input : request.inputs()) {
    query.ids.emplace_back(input.ids().begin(), input.ids().end());
  }
  ASSIGN_OR_RETURN(core::DecodeAnswer answer,
                   core::Decode(host, query, limits));
  response->set_model(answer.model->name());
  for (std::string& text : answer.texts) response->add_texts(std::move(text));
  return absl::OkStatus();
}

}  // namespace encoder::service
