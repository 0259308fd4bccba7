// Channel and per-call context setup shared by every subcommand.
#ifndef ENCODER_CLIENT_CONNECTION_H_
#define ENCODER_CLIENT_CONNECTION_H_

#include <cstdint>
#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

namespace encoder_client {

// Where and how long to talk to the server; every subcommand takes these.
struct ConnectionOptions {
  std::string target = "127.0.0.1:50051";  // host:port
  int64_t deadline_ms = 30000;             // per call
};

// An insecure channel to `options.target`. Received messages are not size
// limited on this side, so large attention maps are bounded by the server's
// send limit alone.
std::shared_ptr<grpc::Channel> CreateChannel(const ConnectionOptions& options);

// Sets a deadline `deadline_ms` from now on `context` (not null).
void SetDeadline(int64_t deadline_ms, grpc::ClientContext* context);

}  // namespace encoder_client

#endif  // ENCODER_CLIENT_CONNECTION_H_
