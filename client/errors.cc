#include "client/errors.h"

#include <array>
#include <iostream>

namespace encoder_client {

std::string StatusCodeName(int code) {
  static constexpr std::array<const char*, 17> kNames = {
      "OK",
      "CANCELLED",
      "UNKNOWN",
      "INVALID_ARGUMENT",
      "DEADLINE_EXCEEDED",
      "NOT_FOUND",
      "ALREADY_EXISTS",
      "PERMISSION_DENIED",
      "RESOURCE_EXHAUSTED",
      "FAILED_PRECONDITION",
      "ABORTED",
      "OUT_OF_RANGE",
      "UNIMPLEMENTED",
      "INTERNAL",
      "UNAVAILABLE",
      "DATA_LOSS",
      "UNAUTHENTICATED",
  };
  if (code >= 0 && code < static_cast<int>(kNames.size())) return kNames[code];
  return "CODE_" + std::to_string(code);
}

void PrintRpcError(const grpc::Status& status) {
  std::cerr << "error: " << StatusCodeName(status.error_code()) << ": "
            << status.error_message() << std::endl;
}

void PrintError(const std::string& message) {
  std::cerr << "error: " << message << std::endl;
}

}  // namespace encoder_client
