#include "client/bench.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <future>
#include <iostream>
#include <random>
#include <thread>
#include <vector>

#include "client/bench_stats.h"
#include "client/errors.h"
#include "encoder/v1/encoder.grpc.pb.h"

namespace encoder_client {
namespace {

using Clock = std::chrono::steady_clock;
using encoder::v1::EmbedRequest;
using encoder::v1::EmbedResponse;
using encoder::v1::EncoderService;

constexpr double kDefaultDurationS = 10.0;
constexpr int64_t kMaxStreamDeadlineMs = int64_t{1} << 40;

double MillisecondsBetween(Clock::time_point start, Clock::time_point end) {
  return std::chrono::duration<double, std::milli>(end - start).count();
}

// Random token-id requests of one caller. Not thread-safe.
class RequestSource {
 public:
  RequestSource(const BenchOptions& options, const std::string& model,
                int32_t vocab_size, uint64_t seed)
      : options_(options),
        model_(model),
        engine_(seed),
        length_(options.min_length, options.max_length),
        token_(0, vocab_size - 1) {}

  // The next request; `tokens` receives its total input length.
  EmbedRequest Next(int64_t* tokens) {
    EmbedRequest request;
    request.set_model(model_);
    *tokens = 0;
    for (int i = 0; i < options_.inputs_per_request; ++i) {
      const int length = length_(engine_);
      auto* ids = request.add_inputs()->mutable_token_ids();
      for (int t = 0; t < length; ++t) ids->add_ids(token_(engine_));
      *tokens += length;
    }
    request.set_return_token_embeddings(options_.token_embeddings);
    for (int32_t layer : options_.attention_layers) {
      request.mutable_attention()->add_layers(layer);
    }
    request.set_request_id(std::to_string(next_id_++));
    return request;
  }

 private:
  const BenchOptions& options_;
  const std::string model_;
  std::mt19937_64 engine_;
  std::uniform_int_distribution<int> length_;
  std::uniform_int_distribution<int32_t> token_;
  int64_t next_id_ = 0;
};

// Hands out requests until the budget or the end time is reached.
// Thread-safe.
class Budget {
 public:
  explicit Budget(const BenchOptions& options)
      : counted_(options.requests > 0),
        remaining_(options.requests),
        timed_(options.duration_s > 0 || options.requests <= 0),
        duration_(std::chrono::duration_cast<Clock::duration>(
            std::chrono::duration<double>(options.duration_s > 0
                                              ? options.duration_s
                                              : kDefaultDurationS))) {}

  void Start(Clock::time_point start) { end_ = start + duration_; }

  // Whether the caller may send one more request.
  bool Claim() {
    if (timed_ && Clock::now() >= end_) return false;
    return !counted_ || remaining_.fetch_sub(1) > 0;
  }

 private:
  const bool counted_;
  std::atomic<int64_t> remaining_;
  const bool timed_;
  const Clock::duration duration_;
  Clock::time_point end_;
};

void RecordResponse(const EmbedResponse& response, double latency_ms,
                    int64_t tokens, BenchStats* stats) {
  ++stats->requests_ok;
  stats->sequences_ok += response.results_size();
  stats->tokens_ok += tokens;
  stats->latencies_ms.push_back(latency_ms);
  for (const auto& result : response.results()) {
    ++stats->batch_sizes[result.batch().batch_size()];
  }
}

void RunUnaryCaller(const std::shared_ptr<grpc::Channel>& channel,
                    int64_t deadline_ms, RequestSource* source, Budget* budget,
                    BenchStats* stats) {
  auto stub = EncoderService::NewStub(channel);
  while (budget->Claim()) {
    int64_t tokens;
    const EmbedRequest request = source->Next(&tokens);
    EmbedResponse response;
    grpc::ClientContext context;
    SetDeadline(deadline_ms, &context);
    const auto start = Clock::now();
    const grpc::Status status = stub->Embed(&context, request, &response);
    const double latency_ms = MillisecondsBetween(start, Clock::now());
    if (status.ok()) {
      RecordResponse(response, latency_ms, tokens, stats);
    } else {
      stats->AddError(StatusCodeName(status.error_code()),
                      status.error_message());
    }
  }
}

int64_t StreamDeadlineMs(const BenchOptions& options, int64_t deadline_ms) {
  int64_t bound = kMaxStreamDeadlineMs;
  if (options.duration_s > 0 || options.requests <= 0) {
    const double duration_s =
        options.duration_s > 0 ? options.duration_s : kDefaultDurationS;
    bound = static_cast<int64_t>(duration_s * 1000) + deadline_ms;
  }
  if (options.requests > 0 &&
      options.requests <
          kMaxStreamDeadlineMs / std::max<int64_t>(deadline_ms, 1)) {
    bound = std::min(bound, options.requests * deadline_ms);
  }
  return bound;
}

// One stream, request after request. A broken stream counts the request in
// flight as failed (with the stream's status) and is reopened.
void RunStreamCaller(const std::shared_ptr<grpc::Channel>& channel,
                     int64_t stream_deadline_ms, RequestSource* source,
                     Budget* budget, BenchStats* stats) {
  auto stub = EncoderService::NewStub(channel);
  std::unique_ptr<grpc::ClientContext> context;
  std::unique_ptr<
      grpc::ClientReaderWriter<EmbedRequest, encoder::v1::EmbedStreamResponse>>
      stream;
  while (budget->Claim()) {
    if (stream == nullptr) {
      context = std::make_unique<grpc::ClientContext>();
      SetDeadline(stream_deadline_ms, context.get());
      stream = stub->EmbedStream(context.get());
    }
    int64_t tokens;
    const EmbedRequest request = source->Next(&tokens);
    encoder::v1::EmbedStreamResponse reply;
    const auto start = Clock::now();
    if (!stream->Write(request) || !stream->Read(&reply)) {
      const grpc::Status status = stream->Finish();
      if (status.ok()) {
        stats->AddError("UNKNOWN", "stream ended without a response");
      } else {
        stats->AddError(StatusCodeName(status.error_code()),
                        status.error_message());
      }
      stream.reset();
      continue;
    }
    const double latency_ms = MillisecondsBetween(start, Clock::now());
    if (reply.request_id() != request.request_id()) {
      stats->AddError("INTERNAL", "stream answered request '" +
                                      reply.request_id() + "', expected '" +
                                      request.request_id() + "'");
    } else if (reply.has_error()) {
      stats->AddError(StatusCodeName(reply.error().code()),
                      reply.error().message());
    } else {
      RecordResponse(reply.response(), latency_ms, tokens, stats);
    }
  }
  if (stream != nullptr) {
    stream->WritesDone();
    const grpc::Status status = stream->Finish();
    if (!status.ok()) {
      std::cerr << "warning: stream closed with "
                << StatusCodeName(status.error_code()) << ": "
                << status.error_message() << std::endl;
    }
  }
}

// Looks up the model (empty: the default) to learn its name and vocabulary.
grpc::Status ResolveModel(EncoderService::Stub* stub, int64_t deadline_ms,
                          const std::string& requested, std::string* name,
                          int32_t* vocab_size) {
  encoder::v1::ListModelsResponse models;
  grpc::ClientContext context;
  SetDeadline(deadline_ms, &context);
  grpc::Status status =
      stub->ListModels(&context, encoder::v1::ListModelsRequest(), &models);
  if (!status.ok()) return status;
  const std::string wanted =
      requested.empty() ? models.default_model() : requested;
  for (const auto& model : models.models()) {
    if (model.name() == wanted) {
      *name = model.name();
      *vocab_size = model.vocab_size();
      if (*vocab_size <= 0) {
        return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                            "model '" + wanted + "' reports no vocabulary");
      }
      return grpc::Status::OK;
    }
  }
  return grpc::Status(grpc::StatusCode::NOT_FOUND,
                      "model '" + wanted + "' is not served");
}

}  // namespace

int RunBench(const ConnectionOptions& connection, const BenchOptions& options) {
  const std::shared_ptr<grpc::Channel> channel = CreateChannel(connection);
  auto stub = EncoderService::NewStub(channel);
  std::string model;
  int32_t vocab_size = 0;
  grpc::Status status = ResolveModel(stub.get(), connection.deadline_ms,
                                     options.model, &model, &vocab_size);
  if (!status.ok()) {
    PrintRpcError(status);
    return kExitRpcError;
  }

  RequestSource warmup(options, model, vocab_size, ~options.seed);
  for (int64_t i = 0; i < options.warmup_requests; ++i) {
    int64_t tokens;
    EmbedResponse response;
    grpc::ClientContext context;
    SetDeadline(connection.deadline_ms, &context);
    status = stub->Embed(&context, warmup.Next(&tokens), &response);
    if (!status.ok()) {
      PrintRpcError(status);
      return kExitRpcError;
    }
  }

  Budget budget(options);
  std::vector<RequestSource> sources;
  std::vector<BenchStats> stats(options.concurrency);
  for (int i = 0; i < options.concurrency; ++i) {
    sources.emplace_back(options, model, vocab_size, options.seed + i);
  }
  const int64_t stream_deadline_ms =
      StreamDeadlineMs(options, connection.deadline_ms);
  std::promise<void> go;
  std::shared_future<void> started = go.get_future().share();
  std::vector<std::thread> callers;
  for (int i = 0; i < options.concurrency; ++i) {
    callers.emplace_back([&, i] {
      started.wait();
      if (options.stream) {
        RunStreamCaller(channel, stream_deadline_ms, &sources[i], &budget,
                        &stats[i]);
      } else {
        RunUnaryCaller(channel, connection.deadline_ms, &sources[i], &budget,
                       &stats[i]);
      }
    });
  }
  const auto start = Clock::now();
  budget.Start(start);
  go.set_value();
  for (std::thread& caller : callers) caller.join();
  const double elapsed_s = MillisecondsBetween(start, Clock::now()) / 1000.0;

  BenchStats total;
  for (const BenchStats& one : stats) total.Merge(one);
  BenchSetup setup{model,
                   options.stream,
                   options.concurrency,
                   options.inputs_per_request,
                   options.min_length,
                   options.max_length};
  const nlohmann::ordered_json report =
      BenchReportJson(setup, total, elapsed_s);
  if (options.json) {
    PrintBenchTable(report, std::cerr);
    std::cout << report.dump(2) << std::endl;
  } else {
    PrintBenchTable(report, std::cout);
  }
  if (total.requests_failed > 0) {
    std::cerr << "error: " << total.first_error_code << ": "
              << total.first_error_message << " (" << total.requests_failed
              << " of " << total.requests_failed + total.requests_ok
              << " requests failed)" << std::endl;
    return kExitRpcError;
  }
  return kExitOk;
}

}  // namespace encoder_client
