// `embed` over many inputs: batches of inputs sent on one EmbedStream with a
// bounded number of requests in flight, results kept in input order and
// written as JSON Lines, compact JSON or a NumPy .npy array.
#ifndef ENCODER_CLIENT_EMBED_STREAM_H_
#define ENCODER_CLIENT_EMBED_STREAM_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "client/commands.h"
#include "client/connection.h"
#include "client/embed_file.h"
#include "encoder/v1/encoder.grpc.pb.h"

namespace encoder_client {

struct BulkEmbedOptions {
  // model, pooling, normalize and truncate apply to every input; the other
  // fields of `embed` are not used.
  EmbedOptions embed;
  std::string input_path;         // file, or "-" for stdin; empty: `inputs`
  std::string input_format;       // "auto" (by extension), "txt" or "jsonl"
  std::vector<FileInput> inputs;  // command-line inputs when no input_path
  int batch_size = 16;            // inputs per EmbedRequest
  int max_in_flight = 4;          // requests sent and not yet answered
  std::string output_format = "jsonl";  // jsonl, json or npy
  std::string out;                      // output file; empty or "-": stdout
  bool progress = false;  // progress on stderr even when it is not a TTY
};

// Called after each response with (inputs done, inputs in total).
using ProgressCallback = std::function<void(size_t, size_t)>;

// Embeds `inputs` in batches of `batch_size` on one EmbedStream with at most
// `max_in_flight` requests unanswered, filling `outcomes` (one per input, in
// input order). A request the server answers with an error is retried
// input by input with unary Embed calls, so that each failing input gets its
// own error and the others their embeddings. Returns the stream's status:
// not OK when the stream itself failed (then outcomes may be incomplete).
grpc::Status EmbedInputs(encoder::v1::EncoderService::StubInterface* stub,
                         const ConnectionOptions& connection,
                         const EmbedOptions& embed,
                         const std::vector<FileInput>& inputs, int batch_size,
                         int max_in_flight, std::vector<InputOutcome>* outcomes,
                         std::string* model, const ProgressCallback& progress);

// The whole `embed --input` run: read, embed, write. Failing inputs are
// reported on stderr with their line numbers (and as error records in
// jsonl/json output; no .npy file is written then); returns kExitRpcError
// when any input failed, kExitUsage for unreadable or malformed input.
int RunBulkEmbed(const ConnectionOptions& connection,
                 const BulkEmbedOptions& options);

}  // namespace encoder_client

#endif  // ENCODER_CLIENT_EMBED_STREAM_H_
