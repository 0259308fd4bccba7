#include "client/tokenize.h"

#include <iostream>

#include "client/errors.h"
#include "client/json_output.h"
#include "encoder/v1/encoder.grpc.pb.h"

namespace encoder_client {

encoder::v1::TokenizeRequest BuildTokenizeRequest(
    const TokenizeOptions& options) {
  encoder::v1::TokenizeRequest request;
  request.set_model(options.model);
  for (const std::string& text : options.texts) request.add_texts_bytes(text);
  if (options.no_special_tokens) {
    request.mutable_text_options()->set_add_special_tokens(false);
  }
  request.mutable_text_options()->set_truncation_side(
      options.truncation_side == "left" ? encoder::v1::TRUNCATION_SIDE_LEFT
                                        : encoder::v1::TRUNCATION_SIDE_RIGHT);
  request.set_truncate(options.truncate);
  request.set_max_length(options.max_length);
  return request;
}

int RunTokenize(const ConnectionOptions& connection,
                const TokenizeOptions& options) {
  auto stub = encoder::v1::EncoderService::NewStub(CreateChannel(connection));
  encoder::v1::TokenizeResponse response;
  grpc::ClientContext context;
  SetDeadline(connection.deadline_ms, &context);
  const grpc::Status status =
      stub->Tokenize(&context, BuildTokenizeRequest(options), &response);
  if (!status.ok()) {
    PrintRpcError(status);
    return kExitRpcError;
  }
  PrintJson(MessageToJson(response, OutputJsonStyle().camel_case));
  return kExitOk;
}

int RunDecode(const ConnectionOptions& connection,
              const DecodeOptions& options) {
  auto stub = encoder::v1::EncoderService::NewStub(CreateChannel(connection));
  encoder::v1::DecodeRequest request;
  request.set_model(options.model);
  auto* ids = request.add_inputs();
  for (int64_t id : options.ids) ids->add_ids(id);
  request.set_skip_special_tokens(options.skip_special_tokens);
  encoder::v1::DecodeResponse response;
  grpc::ClientContext context;
  SetDeadline(connection.deadline_ms, &context);
  const grpc::Status status = stub->Decode(&context, request, &response);
  if (!status.ok()) {
    PrintRpcError(status);
    return kExitRpcError;
  }
  PrintJson(MessageToJson(response, OutputJsonStyle().camel_case));
  return kExitOk;
}

}  // namespace encoder_client
