// encoder-client rerank, classify and sparse: a model's classification
// head through the Rerank and Classify RPCs, its masked-LM head through
// EmbedSparse; the response as JSON on stdout, exit codes as in errors.h.
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "client/cli_commands.h"
#include "client/errors.h"
#include "client/json_output.h"
#include "client/report_rerank.h"
#include "encoder/v1/encoder.grpc.pb.h"

namespace encoder_client {
namespace {

struct ScoreOptions {
  std::string model;
  std::string query;
  std::vector<std::string> texts;  // documents, or texts to classify
  std::vector<std::string> pairs;  // classify: each text's pair
  int32_t top_n = 0;
  bool keep_order = false;
  bool return_documents = false;
  bool raw_scores = false;
  bool truncate = false;  // --truncate / --no-truncate; neither: the server's
  bool no_truncate = false;
  std::string truncation_side = "right";
  std::string attention_layers;  // rerank: comma-separated
  std::string attention_heads;
  bool average_heads = false;
  bool positional_probes = false;  // rerank
  // rerank on a late-interaction model: dense, sparse, colbert weights
  std::vector<float> weights;
  // rerank on a model with a rerank template (Qwen3-Reranker)
  std::optional<std::string> instruction;
  std::string report;   // rerank: an HTML page written here
  float threshold = 0;  // sparse
};

encoder::v1::TruncationSide Side(const std::string& side) {
  return side == "left" ? encoder::v1::TRUNCATION_SIDE_LEFT
                        : encoder::v1::TRUNCATION_SIDE_RIGHT;
}

// truncate as the flags set it; unset when neither was given.
template <typename Request>
void SetTruncate(const ScoreOptions& o, Request* request) {
  if (o.truncate || o.no_truncate) request->set_truncate(o.truncate);
}

void AddShared(CLI::App* command, ScoreOptions* o) {
  command->add_option("--model", o->model,
                      "Model name (default: the server's default model)");
  command->add_flag("--raw-scores", o->raw_scores,
                    "The head's logits, not its score activation");
  command
      ->add_flag("--truncate", o->truncate,
                 "Cut sequences over the model's length (the longer "
                 "text of a pair first)")
      ->excludes(command->add_flag(
          "--no-truncate", o->no_truncate,
          "Refuse sequences over the model's length (neither flag: the "
          "server's default for the model)"));
  command->add_option("--truncation-side", o->truncation_side, "right or left")
      ->check(CLI::IsMember({"right", "left"}))
      ->capture_default_str();
}

template <typename Response>
int Finish(const grpc::Status& status, const Response& response) {
  if (!status.ok()) {
    PrintRpcError(status);
    return kExitRpcError;
  }
  PrintJson(MessageToJson(response, OutputJsonStyle().camel_case));
  return kExitOk;
}

int RunRerank(const ConnectionOptions& connection, const ScoreOptions& o) {
  auto stub = encoder::v1::EncoderService::NewStub(CreateChannel(connection));
  encoder::v1::RerankRequest request;
  request.set_model(o.model);
  request.set_query(o.query);
  for (const std::string& d : o.texts) request.add_documents(d);
  request.set_top_n(o.top_n);
  request.set_keep_order(o.keep_order);
  request.set_return_documents(o.return_documents);
  request.set_raw_scores(o.raw_scores);
  SetTruncate(o, &request);
  request.set_truncation_side(Side(o.truncation_side));
  std::vector<int32_t> layers, heads;
  if (!ParseInt32Flag("--attention-layers", o.attention_layers, &layers) ||
      !ParseInt32Flag("--attention-heads", o.attention_heads, &heads)) {
    return kExitUsage;
  }
  encoder::v1::AttentionSelection* attention = request.mutable_attention();
  attention->mutable_layers()->Add(layers.begin(), layers.end());
  attention->mutable_heads()->Add(heads.begin(), heads.end());
  attention->set_average_heads(o.average_heads);
  request.set_positional_probes(o.positional_probes);
  if (!o.weights.empty()) {
    request.mutable_weights()->set_dense(o.weights[0]);
    request.mutable_weights()->set_sparse(o.weights[1]);
    request.mutable_weights()->set_colbert(o.weights[2]);
  }
  if (o.instruction.has_value()) request.set_instruction(*o.instruction);
  encoder::v1::RerankResponse response;
  grpc::ClientContext context;
  SetDeadline(connection.deadline_ms, &context);
  const grpc::Status status = stub->Rerank(&context, request, &response);
  if (status.ok() && !o.report.empty()) {
    std::ofstream file(o.report, std::ios::binary | std::ios::trunc);
    file << RerankReportHtml(request, response);
    if (!file.flush()) {
      PrintError("cannot write " + o.report);
      return kExitUsage;
    }
  }
  return Finish(status, response);
}

int RunClassify(const ConnectionOptions& connection, const ScoreOptions& o) {
  if (!o.pairs.empty() && o.pairs.size() != o.texts.size()) {
    PrintError("--pair: give one per --text, or none");
    return kExitUsage;
  }
  auto stub = encoder::v1::EncoderService::NewStub(CreateChannel(connection));
  encoder::v1::ClassifyRequest request;
  request.set_model(o.model);
  for (size_t i = 0; i < o.texts.size(); ++i) {
    encoder::v1::ClassifyInput* input = request.add_inputs();
    input->set_text(o.texts[i]);
    if (!o.pairs.empty()) input->set_text_pair(o.pairs[i]);
  }
  request.set_raw_scores(o.raw_scores);
  SetTruncate(o, &request);
  request.set_truncation_side(Side(o.truncation_side));
  encoder::v1::ClassifyResponse response;
  grpc::ClientContext context;
  SetDeadline(connection.deadline_ms, &context);
  return Finish(stub->Classify(&context, request, &response), response);
}

int RunSparse(const ConnectionOptions& connection, const ScoreOptions& o) {
  auto stub = encoder::v1::EncoderService::NewStub(CreateChannel(connection));
  encoder::v1::EmbedSparseRequest request;
  request.set_model(o.model);
  for (const std::string& t : o.texts) request.add_inputs()->set_text(t);
  request.set_top_k(o.top_n);
  request.set_threshold(o.threshold);
  SetTruncate(o, &request);
  request.mutable_text_options()->set_truncation_side(Side(o.truncation_side));
  encoder::v1::EmbedSparseResponse response;
  grpc::ClientContext context;
  SetDeadline(connection.deadline_ms, &context);
  return Finish(stub->EmbedSparse(&context, request, &response), response);
}

}  // namespace

Command AddSparse(CLI::App* app, ConnectionOptions* connection) {
  CLI::App* command = app->add_subcommand(
      "sparse",
      "Sparse (SPLADE) vectors of texts: vocabulary ids and weights (JSON)");
  AddConnectionFlags(command, connection);
  AddJsonFlags(command);
  auto o = std::make_shared<ScoreOptions>();
  command->add_option("--text", o->texts, "A text (repeatable)")->required();
  command->add_option("--model", o->model,
                      "Model name (default: the server's default model)");
  command
      ->add_option("--top-k", o->top_n,
                   "Keep the K largest weights (0: all above the "
                   "threshold)")
      ->check(CLI::NonNegativeNumber);
  command
      ->add_option("--threshold", o->threshold,
                   "Keep weights above this (default 0: every non-zero)")
      ->check(CLI::NonNegativeNumber);
  command
      ->add_flag("--truncate", o->truncate, "Cut texts over the model's length")
      ->excludes(command->add_flag(
          "--no-truncate", o->no_truncate,
          "Refuse texts over the model's length (neither flag: the "
          "server's default for the model)"));
  command->add_option("--truncation-side", o->truncation_side, "right or left")
      ->check(CLI::IsMember({"right", "left"}))
      ->capture_default_str();
  return {command, [=]() { return RunSparse(*connection, *o); }};
}

Command AddRerank(CLI::App* app, ConnectionOptions* connection) {
  CLI::App* command = app->add_subcommand(
      "rerank",
      "A cross-encoder's scores of documents against a query, best first "
      "(JSON)");
  AddConnectionFlags(command, connection);
  AddJsonFlags(command);
  auto o = std::make_shared<ScoreOptions>();
  command->add_option("--query", o->query, "The query")->required();
  command->add_option("--document", o->texts, "A document (repeatable)")
      ->required();
  command->add_option("--top-n", o->top_n, "Keep the best N (0: all)")
      ->check(CLI::NonNegativeNumber);
  command->add_flag("--keep-order", o->keep_order,
                    "Results in the documents' order");
  command->add_flag("--return-documents", o->return_documents,
                    "Echo each document in its result");
  command->add_option("--attention-layers", o->attention_layers,
                      "Explain each score: attention of these layers "
                      "(such as 0,5) from the query's tokens to the "
                      "document's");
  command->add_option("--attention-heads", o->attention_heads,
                      "Heads of the explained layers (default: all)");
  command->add_flag("--average-heads", o->average_heads,
                    "Average the explained attention over the heads");
  command->add_option("--report", o->report,
                      "Also write an HTML page explaining the ranking "
                      "(scores, probes, attention heatmaps)");
  command->add_flag("--positional-probes", o->positional_probes,
                    "Also score each pair with the query and document "
                    "swapped, and with the document's tokens reversed");
  command
      ->add_option("--weights", o->weights,
                   "A late-interaction model's (BGE-M3) weights of its "
                   "dense, sparse and ColBERT scores, such as 0.4,0.2,0.4 "
                   "(default: the server's 1,1,1)")
      ->delimiter(',')
      ->expected(3);
  command->add_option("--instruction", o->instruction,
                      "The instruction of a model with a rerank template "
                      "(Qwen3-Reranker; default: the template's own)");
  AddShared(command, o.get());
  return {command, [=]() { return RunRerank(*connection, *o); }};
}

Command AddClassify(CLI::App* app, ConnectionOptions* connection) {
  CLI::App* command = app->add_subcommand(
      "classify",
      "A classification head's labels with scores for texts or text pairs "
      "(JSON)");
  AddConnectionFlags(command, connection);
  AddJsonFlags(command);
  auto o = std::make_shared<ScoreOptions>();
  command->add_option("--text", o->texts, "A text (repeatable)")->required();
  command->add_option("--pair", o->pairs,
                      "The text paired with each --text (repeatable, one "
                      "per --text)");
  AddShared(command, o.get());
  return {command, [=]() { return RunClassify(*connection, *o); }};
}

}  // namespace encoder_client
