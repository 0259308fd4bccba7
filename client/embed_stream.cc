#include "client/embed_stream.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <mutex>
#include <thread>

#include "client/errors.h"
#include "client/tensor_codec.h"

namespace encoder_client {
namespace {

using Clock = std::chrono::steady_clock;

encoder::v1::EmbedRequest BatchRequest(const EmbedOptions& embed,
                                       const std::vector<FileInput>& inputs,
                                       size_t begin, size_t end) {
  EmbedOptions options;
  options.model = embed.model;
  options.pooling = embed.pooling;
  options.normalize = embed.normalize;
  options.truncate = embed.truncate;
  options.no_truncate = embed.no_truncate;
  options.prompt_name = embed.prompt_name;
  options.prompt = embed.prompt;
  options.chunk = embed.chunk;
  options.chunk_overlap = embed.chunk_overlap;
  options.chunk_aggregation = embed.chunk_aggregation;
  options.late_chunk = embed.late_chunk;
  options.chunk_tokens = embed.chunk_tokens;
  options.extrapolate = embed.extrapolate;
  encoder::v1::EmbedRequest request = BuildEmbedRequest(options);
  request.clear_attention();
  for (size_t i = begin; i < end; ++i) {
    *request.add_inputs() = inputs[i].input;
  }
  return request;
}

// The outcome of one result: its pooled vector as float32.
InputOutcome ResultOutcome(const encoder::v1::EmbedResult& result) {
  InputOutcome outcome;
  std::vector<double> values;
  std::string error;
  if (!DecodeTensor(result.pooled(), &values, &error) ||
      result.pooled().shape_size() != 1) {
    outcome.code = grpc::StatusCode::INTERNAL;
    outcome.message = "malformed pooled tensor in the response" +
                      (error.empty() ? std::string() : ": " + error);
    return outcome;
  }
  outcome.ok = true;
  outcome.num_tokens = result.num_tokens();
  outcome.truncated = result.truncated();
  outcome.embedding.assign(values.begin(), values.end());
  return outcome;
}

void FailAll(int code, const std::string& message, size_t begin, size_t end,
             std::vector<InputOutcome>* outcomes) {
  for (size_t i = begin; i < end; ++i) {
    (*outcomes)[i] = InputOutcome();
    (*outcomes)[i].code = code;
    (*outcomes)[i].message = message;
  }
}

// Unary Embed of each input of [begin, end) alone.
void RetryOneByOne(encoder::v1::EncoderService::StubInterface* stub,
                   const ConnectionOptions& connection,
                   const EmbedOptions& embed,
                   const std::vector<FileInput>& inputs, size_t begin,
                   size_t end, std::vector<InputOutcome>* outcomes,
                   std::string* model) {
  for (size_t i = begin; i < end; ++i) {
    encoder::v1::EmbedResponse response;
    grpc::ClientContext context;
    SetDeadline(connection.deadline_ms, &context);
    const grpc::Status status =
        stub->Embed(&context, BatchRequest(embed, inputs, i, i + 1), &response);
    if (!status.ok()) {
      FailAll(status.error_code(), status.error_message(), i, i + 1, outcomes);
    } else if (response.results_size() != 1) {
      FailAll(grpc::StatusCode::INTERNAL, "response without its result", i,
              i + 1, outcomes);
    } else {
      (*outcomes)[i] = ResultOutcome(response.results(0));
      if (model->empty()) *model = response.model();
    }
  }
}

// Progress line on stderr: "\r" updates on a terminal, one line every few
// seconds otherwise.
class ProgressPrinter {
 public:
  explicit ProgressPrinter(bool enabled)
      : enabled_(enabled), tty_(isatty(STDERR_FILENO) == 1) {}

  void Update(size_t done, size_t total) {
    if (!enabled_) return;
    const auto now = Clock::now();
    const double interval = tty_ ? 0.2 : 5.0;
    if (done < total &&
        std::chrono::duration<double>(now - last_).count() < interval) {
      return;
    }
    last_ = now;
    const double elapsed = std::chrono::duration<double>(now - start_).count();
    const double rate = elapsed > 0 ? done / elapsed : 0.0;
    char line[160];
    if (done < total && rate > 0) {
      std::snprintf(line, sizeof(line),
                    "%zu/%zu inputs (%.0f%%)  %.1f inputs/s  ETA %.0f s", done,
                    total, 100.0 * done / total, rate, (total - done) / rate);
    } else {
      std::snprintf(line, sizeof(line), "%zu/%zu inputs  %.1f inputs/s  %.1f s",
                    done, total, rate, elapsed);
    }
    std::cerr << (tty_ ? "\r\033[K" : "") << line << (tty_ ? "" : "\n");
    if (tty_ && done == total) std::cerr << "\n";
    std::cerr.flush();
  }

 private:
  const bool enabled_;
  const bool tty_;
  const Clock::time_point start_ = Clock::now();
  Clock::time_point last_ = start_;
};

bool OpenInput(const BulkEmbedOptions& options, std::vector<FileInput>* inputs,
               std::string* error) {
  InputFormat format = FormatForPath(options.input_path);
  if (options.input_format == "txt") format = InputFormat::kText;
  if (options.input_format == "jsonl") format = InputFormat::kJsonl;
  if (options.input_path == "-") {
    if (ReadInputs(std::cin, format, inputs, error)) return true;
    *error = "stdin: " + *error;
    return false;
  }
  std::ifstream in(options.input_path, std::ios::binary);
  if (!in) {
    *error = "cannot open " + options.input_path;
    return false;
  }
  if (!ReadInputs(in, format, inputs, error)) {
    *error = options.input_path + ": " + *error;
    return false;
  }
  return true;
}

std::string Where(const FileInput& input, size_t index) {
  return input.line > 0 ? "line " + std::to_string(input.line)
                        : "input " + std::to_string(index);
}

}  // namespace

grpc::Status EmbedInputs(encoder::v1::EncoderService::StubInterface* stub,
                         const ConnectionOptions& connection,
                         const EmbedOptions& embed,
                         const std::vector<FileInput>& inputs, int batch_size,
                         int max_in_flight, std::vector<InputOutcome>* outcomes,
                         std::string* model, const ProgressCallback& progress) {
  outcomes->assign(inputs.size(), InputOutcome());
  const size_t batch = static_cast<size_t>(std::max(batch_size, 1));
  const size_t batches = (inputs.size() + batch - 1) / batch;
  const size_t window = static_cast<size_t>(std::max(max_in_flight, 1));
  if (batches == 0) return grpc::Status::OK;

  grpc::ClientContext context;
  // Each request may take up to --deadline-ms; `window` of them run at once.
  const size_t waves = (batches + window - 1) / window + 1;
  SetDeadline(connection.deadline_ms * static_cast<int64_t>(waves), &context);
  std::unique_ptr<grpc::ClientReaderWriterInterface<
      encoder::v1::EmbedRequest, encoder::v1::EmbedStreamResponse>>
      stream = stub->EmbedStream(&context);

  std::mutex mu;
  std::condition_variable cv;
  size_t in_flight = 0;
  bool reading_done = false;
  std::thread writer([&]() {
    for (size_t b = 0; b < batches; ++b) {
      {
        std::unique_lock<std::mutex> lock(mu);
        cv.wait(lock, [&]() { return in_flight < window || reading_done; });
        if (reading_done) break;
        ++in_flight;
      }
      encoder::v1::EmbedRequest request = BatchRequest(
          embed, inputs, b * batch, std::min(inputs.size(), (b + 1) * batch));
      request.set_request_id(std::to_string(b));
      if (!stream->Write(request)) break;
    }
    stream->WritesDone();
  });

  std::vector<size_t> failed_batches;
  size_t answered = 0;
  std::string mismatch;
  encoder::v1::EmbedStreamResponse response;
  while (answered < batches && stream->Read(&response)) {
    const size_t b = answered++;
    {
      std::lock_guard<std::mutex> lock(mu);
      --in_flight;
    }
    cv.notify_one();
    const size_t begin = b * batch;
    const size_t end = std::min(inputs.size(), begin + batch);
    if (response.request_id() != std::to_string(b)) {
      mismatch = "response for request '" + response.request_id() +
                 "' where request '" + std::to_string(b) + "' was due";
      break;
    }
    if (response.has_error()) {
      FailAll(response.error().code(), response.error().message(), begin, end,
              outcomes);
      if (end - begin > 1) failed_batches.push_back(b);
    } else if (static_cast<size_t>(response.response().results_size()) !=
               end - begin) {
      FailAll(grpc::StatusCode::INTERNAL, "response with a wrong result count",
              begin, end, outcomes);
    } else {
      if (model->empty()) *model = response.response().model();
      for (size_t i = begin; i < end; ++i) {
        (*outcomes)[i] = ResultOutcome(
            response.response().results(static_cast<int>(i - begin)));
      }
    }
    if (progress) progress(end, inputs.size());
  }
  {
    std::lock_guard<std::mutex> lock(mu);
    reading_done = true;
  }
  cv.notify_all();
  if (!mismatch.empty()) context.TryCancel();
  writer.join();
  const grpc::Status status = stream->Finish();
  if (!mismatch.empty()) {
    return grpc::Status(grpc::StatusCode::INTERNAL, mismatch);
  }
  if (!status.ok()) return status;
  if (answered < batches) {
    return grpc::Status(grpc::StatusCode::INTERNAL,
                        "the stream ended after " + std::to_string(answered) +
                            " of " + std::to_string(batches) + " responses");
  }
  for (size_t b : failed_batches) {
    RetryOneByOne(stub, connection, embed, inputs, b * batch,
                  std::min(inputs.size(), (b + 1) * batch), outcomes, model);
  }
  return grpc::Status::OK;
}

int RunBulkEmbed(const ConnectionOptions& connection,
                 const BulkEmbedOptions& options) {
  std::vector<FileInput> inputs = options.inputs;
  std::string error;
  if (!options.input_path.empty() && !OpenInput(options, &inputs, &error)) {
    PrintError(error);
    return kExitUsage;
  }
  const bool to_stdout = options.out.empty() || options.out == "-";
  if (options.output_format == "npy" && to_stdout) {
    PrintError("--output-format npy needs --out FILE.npy");
    return kExitUsage;
  }

  auto stub = encoder::v1::EncoderService::NewStub(CreateChannel(connection));
  std::vector<InputOutcome> outcomes;
  std::string model = options.embed.model;
  ProgressPrinter printer(options.progress || isatty(STDERR_FILENO) == 1);
  const grpc::Status status = EmbedInputs(
      stub.get(), connection, options.embed, inputs, options.batch_size,
      options.max_in_flight, &outcomes, &model,
      [&printer](size_t done, size_t total) { printer.Update(done, total); });
  if (!status.ok()) {
    PrintRpcError(status);
    return kExitRpcError;
  }

  size_t failures = 0;
  size_t dim = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const InputOutcome& outcome = outcomes[i];
    if (!outcome.ok) {
      ++failures;
      PrintError(Where(inputs[i], i) + ": " + StatusCodeName(outcome.code) +
                 ": " + outcome.message);
    } else if (dim == 0) {
      dim = outcome.embedding.size();
    } else if (outcome.embedding.size() != dim) {
      PrintError(Where(inputs[i], i) + ": embedding of " +
                 std::to_string(outcome.embedding.size()) +
                 " values where earlier ones had " + std::to_string(dim));
      return kExitRpcError;
    }
  }

  if (options.output_format == "npy") {
    if (failures > 0) {
      PrintError(std::to_string(failures) + " of " +
                 std::to_string(inputs.size()) + " inputs failed; " +
                 options.out + " not written");
      return kExitRpcError;
    }
    std::vector<float> values;
    values.reserve(inputs.size() * dim);
    for (const InputOutcome& outcome : outcomes) {
      values.insert(values.end(), outcome.embedding.begin(),
                    outcome.embedding.end());
    }
    if (!WriteNpy(options.out, static_cast<int64_t>(inputs.size()),
                  static_cast<int64_t>(dim), values, &error)) {
      PrintError(error);
      return kExitRpcError;
    }
    return kExitOk;
  }

  std::ofstream file;
  if (!to_stdout) {
    file.open(options.out, std::ios::trunc);
    if (!file) {
      PrintError("cannot open " + options.out + " for writing");
      return kExitUsage;
    }
  }
  std::ostream& out = to_stdout ? std::cout : file;
  if (options.output_format == "jsonl") {
    for (size_t i = 0; i < inputs.size(); ++i) {
      out << RecordJson(i, inputs[i], outcomes[i]).dump() << '\n';
    }
  } else {
    FloatJson document = {{"model", model}, {"dim", dim}};
    FloatJson& results = document["results"] = FloatJson::array();
    for (size_t i = 0; i < inputs.size(); ++i) {
      results.push_back(RecordJson(i, inputs[i], outcomes[i]));
    }
    out << document.dump() << '\n';
  }
  out.flush();
  if (!out) {
    PrintError("writing the output failed");
    return kExitRpcError;
  }
  if (failures > 0) {
    PrintError(std::to_string(failures) + " of " +
               std::to_string(inputs.size()) + " inputs failed");
    return kExitRpcError;
  }
  return kExitOk;
}

}  // namespace encoder_client
