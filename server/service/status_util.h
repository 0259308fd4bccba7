// The one place that maps internal statuses to gRPC statuses.
#ifndef ENCODER_SERVER_SERVICE_STATUS_UTIL_H_
#define ENCODER_SERVER_SERVICE_STATUS_UTIL_H_

#include <grpcpp/support/status.h>

#include <string>

#include "absl/status/status.h"

namespace encoder::service {

// Same code, same message. absl and gRPC share the canonical code numbers.
// A message longer than kMaxStatusMessageBytes is cut there (it travels in
// a trailer, and an oversized trailer would replace the real error).
grpc::Status ToGrpcStatus(const absl::Status& status);

inline constexpr size_t kMaxStatusMessageBytes = 1024;

// Quotes a caller-supplied string for an error message: at most `max_bytes`
// of it (cut at a UTF-8 boundary), with its full size when cut, e.g.
// "\"aaaa...\" (10240 bytes)".
std::string QuoteInput(const std::string& value, size_t max_bytes = 64);

// "OK", "INVALID_ARGUMENT", ... for metrics labels and messages.
std::string GrpcCodeName(grpc::StatusCode code);

}  // namespace encoder::service

#endif  // ENCODER_SERVER_SERVICE_STATUS_UTIL_H_
