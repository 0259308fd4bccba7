// The gRPC front's status vocabulary: internal absl::Status to grpc::Status.
// The helpers every front shares (QuoteInput, the too-large mark, code
// names) are core/status.h's.
#ifndef ENCODER_SERVER_SERVICE_STATUS_UTIL_H_
#define ENCODER_SERVER_SERVICE_STATUS_UTIL_H_

#include <grpcpp/support/status.h>

#include <string>

#include "absl/status/status.h"
#include "server/core/status.h"

namespace encoder::service {

using core::IsTooLarge;
using core::MarkTooLarge;
using core::QuoteInput;

// Same code, same message. absl and gRPC share the canonical code numbers.
// A message longer than kMaxStatusMessageBytes is cut there (it travels in
// a trailer, and an oversized trailer would replace the real error).
grpc::Status ToGrpcStatus(const absl::Status& status);

inline constexpr size_t kMaxStatusMessageBytes = 1024;

// "OK", "INVALID_ARGUMENT", ... (core::StatusCodeName).
std::string GrpcCodeName(grpc::StatusCode code);

}  // namespace encoder::service

#endif  // ENCODER_SERVER_SERVICE_STATUS_UTIL_H_
