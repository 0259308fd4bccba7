// The one place that maps internal statuses to gRPC statuses.
#ifndef ENCODER_SERVER_SERVICE_STATUS_UTIL_H_
#define ENCODER_SERVER_SERVICE_STATUS_UTIL_H_

#include <grpcpp/support/status.h>

#include <string>

#include "absl/status/status.h"

namespace encoder::service {

// Same code, same message. absl and gRPC share the canonical code numbers.
grpc::Status ToGrpcStatus(const absl::Status& status);

// "OK", "INVALID_ARGUMENT", ... for metrics labels and messages.
std::string GrpcCodeName(grpc::StatusCode code);

}  // namespace encoder::service

#endif  // ENCODER_SERVER_SERVICE_STATUS_UTIL_H_
