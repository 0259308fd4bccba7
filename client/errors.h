// Exit codes and the one format in which the client reports failures.
#ifndef ENCODER_CLIENT_ERRORS_H_
#define ENCODER_CLIENT_ERRORS_H_

#include <string>

#include <grpcpp/grpcpp.h>

namespace encoder_client {

// Process exit codes. Every RPC failure exits with kExitRpcError whatever
// its gRPC code; the code name is always printed on stderr.
inline constexpr int kExitOk = 0;
inline constexpr int kExitRpcError = 1;  // also: health not SERVING
inline constexpr int kExitUsage = 2;

// Canonical upper-case name of a gRPC status code ("NOT_FOUND"); codes
// outside the standard range print as "CODE_<n>".
std::string StatusCodeName(int code);

// Writes "error: <CODE_NAME>: <message>" and a newline to stderr.
void PrintRpcError(const grpc::Status& status);

// Writes "error: <message>" and a newline to stderr (usage and local
// failures, which have no gRPC code).
void PrintError(const std::string& message);

}  // namespace encoder_client

#endif  // ENCODER_CLIENT_ERRORS_H_
