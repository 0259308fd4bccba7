// Channel and per-call context setup shared by every subcommand.
#ifndef ENCODER_CLIENT_CONNECTION_H_
#define ENCODER_CLIENT_CONNECTION_H_

#include <cstdint>
#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

namespace encoder_client {

// Where, how and how long to talk to the server; every subcommand takes
// these.
struct ConnectionOptions {
  std::string target = "127.0.0.1:50051";  // host:port
  int64_t deadline_ms = 30000;             // per call
  bool tls = false;                        // TLS (implied by ca/cert/key)
  std::string ca_file;     // PEM roots that sign the server's certificate;
                           // empty: the system's roots
  std::string cert_file;   // PEM client certificate (mutual TLS)
  std::string key_file;    // PEM key of cert_file
  std::string token_file;  // first non-comment line: the bearer token

  // Filled from the files above by LoadCredentials.
  std::string ca_pem;
  std::string cert_pem;
  std::string key_pem;
  std::string token;
};

// Reads the files named in `options` into its *_pem and token fields.
// False, with `*error` naming the file, when one cannot be read or is
// malformed (--cert without --key, an empty token file).
bool LoadCredentials(ConnectionOptions* options, std::string* error);

// A channel to `options.target`: TLS when asked for, plaintext otherwise;
// every call carries `authorization: Bearer <token>` when a token was
// loaded. Received messages are not size limited on this side, so large
// attention maps are bounded by the server's send limit alone.
std::shared_ptr<grpc::Channel> CreateChannel(const ConnectionOptions& options);

// Sets a deadline `deadline_ms` from now on `context` (not null).
void SetDeadline(int64_t deadline_ms, grpc::ClientContext* context);

}  // namespace encoder_client

#endif  // ENCODER_CLIENT_CONNECTION_H_
