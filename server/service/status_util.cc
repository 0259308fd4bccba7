#include "server/service/status_util.h"

#include "absl/strings/str_cat.h"

namespace encoder::service {

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  std::string message(status.message());
  if (message.size() > kMaxStatusMessageBytes) {
    message = absl::StrCat(
        core::Utf8Prefix(message, kMaxStatusMessageBytes - 3), "...");
  }
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), message);
}

std::string GrpcCodeName(grpc::StatusCode code) {
  return core::StatusCodeName(static_cast<absl::StatusCode>(code));
}

}  // namespace encoder::service
