// The `bench` subcommand: closed-loop load against Embed or EmbedStream.
// `concurrency` callers each send one request, wait for its response and
// send the next, until the request budget or the duration runs out.
#ifndef ENCODER_CLIENT_BENCH_H_
#define ENCODER_CLIENT_BENCH_H_

#include <cstdint>
#include <string>
#include <vector>

#include "client/connection.h"

namespace encoder_client {

struct BenchOptions {
  std::string model;    // empty: the server's default model
  int concurrency = 4;  // callers, one thread and one stub each
  // Stop after `requests` requests in total (> 0) and/or after `duration_s`
  // seconds (> 0), whichever comes first; neither set: 10 seconds.
  int64_t requests = 0;
  double duration_s = 0.0;
  // Each input is `min_length`..`max_length` (inclusive, uniform) token ids
  // drawn uniformly from the model's vocabulary.
  int min_length = 32;
  int max_length = 32;
  int inputs_per_request = 1;
  // What each request asks for besides the pooled embedding, to load the
  // server with large responses: per-token embeddings [S, D] and the
  // attention maps of these layers (all heads).
  bool token_embeddings = false;
  std::vector<int32_t> attention_layers;
  bool stream = false;  // one EmbedStream per caller instead of unary calls
  int64_t warmup_requests = 0;  // unmeasured unary requests sent first
  uint64_t seed = 1;            // caller i draws from seed + i
  bool json = false;            // JSON on stdout, the table on stderr
};

// Runs the load and prints the report. Returns kExitOk when every measured
// request succeeded; otherwise prints the first failure as
// "error: <CODE>: <message> (n of m requests failed)" and returns
// kExitRpcError. Per-request deadlines are `connection.deadline_ms`; a
// stream's deadline covers its whole run (duration plus one deadline, or one
// deadline per request).
int RunBench(const ConnectionOptions& connection, const BenchOptions& options);

}  // namespace encoder_client

#endif  // ENCODER_CLIENT_BENCH_H_
