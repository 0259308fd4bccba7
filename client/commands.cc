#include "client/commands.h"

#include <chrono>
#include <iostream>

#include "client/errors.h"
#include "client/json_output.h"
#include "encoder/v1/encoder.grpc.pb.h"

namespace encoder_client {
namespace {

double MillisecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now() - start)
      .count();
}

}  // namespace

encoder::v1::EmbedRequest BuildEmbedRequest(const EmbedOptions& options) {
  encoder::v1::EmbedRequest request;
  request.set_model(options.model);
  for (const encoder::v1::Input& input : options.inputs) {
    *request.add_inputs() = input;
  }
  if (options.pooling == "mean") {
    request.set_pooling(encoder::v1::POOLING_MEAN);
  } else if (options.pooling == "first") {
    request.set_pooling(encoder::v1::POOLING_FIRST);
  }
  if (options.normalize.has_value()) {
    request.set_normalize(*options.normalize);
  }
  request.set_return_token_embeddings(options.token_embeddings);
  request.set_project_token_embeddings(options.project_tokens);
  request.set_input_type(options.input_type);
  auto* attention = request.mutable_attention();
  for (int32_t layer : options.attention_layers) attention->add_layers(layer);
  for (int32_t head : options.attention_heads) attention->add_heads(head);
  attention->set_average_heads(options.average_heads);
  request.set_return_attention_stats(options.attention_stats);
  if (!options.hidden_states.empty() || options.pool_hidden_states) {
    auto* hidden = request.mutable_hidden_states();
    for (int32_t layer : options.hidden_states) hidden->add_layers(layer);
    hidden->set_pooled(options.pool_hidden_states);
  }
  if (options.truncate || options.no_truncate) {
    request.set_truncate(options.truncate);
  }
  request.set_prompt_name(options.prompt_name);
  if (options.prompt) request.set_prompt(*options.prompt);
  if (options.extrapolate) {
    request.mutable_long_input()->set_policy(
        encoder::v1::LongInput::POLICY_EXTRAPOLATE);
  }
  if (options.embedding_type == "binary") {
    request.set_embedding_type(encoder::v1::EMBEDDING_TYPE_BINARY);
  } else if (options.embedding_type == "ubinary") {
    request.set_embedding_type(encoder::v1::EMBEDDING_TYPE_UBINARY);
  } else if (options.embedding_type == "int8") {
    request.set_embedding_type(encoder::v1::EMBEDDING_TYPE_INT8);
  } else if (options.embedding_type == "uint8") {
    request.set_embedding_type(encoder::v1::EMBEDDING_TYPE_UINT8);
  }
  if (options.chunk || options.late_chunk) {
    auto* long_input = request.mutable_long_input();
    long_input->set_policy(options.late_chunk
                               ? encoder::v1::LongInput::POLICY_LATE_CHUNK
                               : encoder::v1::LongInput::POLICY_CHUNK);
    long_input->set_overlap_tokens(options.chunk_overlap);
    long_input->set_chunk_tokens(options.chunk_tokens);
    long_input->set_return_chunks(options.return_chunks);
    long_input->set_aggregation(options.chunk_aggregation == "max"
                                    ? encoder::v1::LongInput::AGGREGATION_MAX
                                    : encoder::v1::LongInput::AGGREGATION_MEAN);
  }
  return request;
}

int RunEmbed(const ConnectionOptions& connection, const EmbedOptions& options) {
  auto stub = encoder::v1::EncoderService::NewStub(CreateChannel(connection));
  const encoder::v1::EmbedRequest request = BuildEmbedRequest(options);
  encoder::v1::EmbedResponse response;
  grpc::ClientContext context;
  SetDeadline(connection.deadline_ms, &context);
  const auto start = std::chrono::steady_clock::now();
  const grpc::Status status = stub->Embed(&context, request, &response);
  const double round_trip_ms = MillisecondsSince(start);
  if (!status.ok()) {
    PrintRpcError(status);
    return kExitRpcError;
  }
  nlohmann::ordered_json out =
      EmbedResponseToJson(response, OutputJsonStyle().camel_case);
  out[OutputJsonStyle().camel_case ? "clientRoundTripMs"
                                   : "client_round_trip_ms"] = round_trip_ms;
  PrintJson(out);
  return kExitOk;
}

int RunModels(const ConnectionOptions& connection) {
  auto stub = encoder::v1::EncoderService::NewStub(CreateChannel(connection));
  encoder::v1::ListModelsResponse response;
  grpc::ClientContext context;
  SetDeadline(connection.deadline_ms, &context);
  const grpc::Status status =
      stub->ListModels(&context, encoder::v1::ListModelsRequest(), &response);
  if (!status.ok()) {
    PrintRpcError(status);
    return kExitRpcError;
  }
  PrintJson(MessageToJson(response, OutputJsonStyle().camel_case));
  return kExitOk;
}

encoder::v1::DiagnoseRequest BuildDiagnoseRequest(
    const DiagnoseOptions& options) {
  encoder::v1::DiagnoseRequest request;
  request.set_model(options.model);
  if (options.text.has_value()) {
    request.set_text(*options.text);
  } else if (options.ids.has_value()) {
    for (int64_t id : *options.ids) request.mutable_token_ids()->add_ids(id);
  } else if (options.random_length > 0) {
    request.mutable_random()->set_length(options.random_length);
    request.mutable_random()->set_seed(options.seed);
  }
  for (const std::string& probe : options.probes) {
    if (probe == "permutation") request.set_permutation(true);
    if (probe == "shift") request.set_shift(true);
    if (probe == "structure") request.set_structure(true);
    if (probe == "attention_stats") request.set_attention_stats(true);
  }
  for (int32_t position : options.permutation_order) {
    request.add_permutation_order(position);
  }
  request.set_permutation_seed(options.permutation_seed);
  request.set_shift_offset(options.shift_offset);
  request.set_structure_positions(options.structure_positions);
  request.set_return_attention_maps(options.attention_maps);
  request.set_tolerance(options.tolerance);
  if (options.extrapolation) {
    request.set_extrapolation(true);
    auto* e = request.mutable_extrapolation_options();
    for (int32_t length : options.extrapolation_lengths) e->add_lengths(length);
    e->set_max_multiple(options.max_multiple);
    e->set_points(options.points);
    e->set_prefix_length(options.prefix_length);
  }
  return request;
}

int RunDiagnose(const ConnectionOptions& connection,
                const DiagnoseOptions& options) {
  auto stub = encoder::v1::EncoderService::NewStub(CreateChannel(connection));
  encoder::v1::DiagnoseResponse response;
  grpc::ClientContext context;
  SetDeadline(connection.deadline_ms, &context);
  const grpc::Status status =
      stub->Diagnose(&context, BuildDiagnoseRequest(options), &response);
  if (!status.ok()) {
    PrintRpcError(status);
    return kExitRpcError;
  }
  PrintJson(MessageToJson(response, OutputJsonStyle().camel_case));
  return kExitOk;
}

}  // namespace encoder_client
