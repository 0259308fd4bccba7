#include "server/service/status_util.h"

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"

namespace encoder::service {
namespace {

// The longest prefix of `s` of at most `max_bytes` that does not end inside
// a UTF-8 sequence.
std::string Utf8Prefix(const std::string& s, size_t max_bytes) {
  if (s.size() <= max_bytes) return s;
  size_t n = max_bytes;
  // Back off continuation bytes (10xxxxxx) to a sequence start.
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  return s.substr(0, n);
}

}  // namespace

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  std::string message(status.message());
  if (message.size() > kMaxStatusMessageBytes) {
    message =
        absl::StrCat(Utf8Prefix(message, kMaxStatusMessageBytes - 3), "...");
  }
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), message);
}

std::string QuoteInput(const std::string& value, size_t max_bytes) {
  if (value.size() <= max_bytes) return absl::StrCat("\"", value, "\"");
  return absl::StrCat("\"", Utf8Prefix(value, max_bytes), "...\" (",
                      value.size(), " bytes)");
}

namespace {
constexpr char kTooLargeUrl[] = "type.googleapis.com/encoder.TooLarge";
}  // namespace

absl::Status MarkTooLarge(absl::Status status) {
  status.SetPayload(kTooLargeUrl, absl::Cord("1"));
  return status;
}

bool IsTooLarge(const absl::Status& status) {
  return status.GetPayload(kTooLargeUrl).has_value();
}

int HttpStatusFor(absl::StatusCode code, bool too_large) {
  switch (code) {
    case absl::StatusCode::kOk:
      return 200;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
    case absl::StatusCode::kFailedPrecondition:
      return 400;
    case absl::StatusCode::kUnauthenticated:
      return 401;
    case absl::StatusCode::kPermissionDenied:
      return 403;
    case absl::StatusCode::kNotFound:
      return 404;
    case absl::StatusCode::kResourceExhausted:
      return too_large ? 413 : 429;
    case absl::StatusCode::kCancelled:
      return 499;
    case absl::StatusCode::kDeadlineExceeded:
      return 504;
    case absl::StatusCode::kUnavailable:
      return 503;
    case absl::StatusCode::kUnimplemented:
      return 501;
    default:
      return 500;
  }
}

int HttpStatusFor(const absl::Status& status) {
  return HttpStatusFor(status.code(), IsTooLarge(status));
}

const char* OpenAiErrorType(int http_status) {
  switch (http_status) {
    case 400:
    case 404:
    case 413:
      return "invalid_request_error";
    case 401:
      return "authentication_error";
    case 403:
      return "permission_error";
    case 429:
      return "rate_limit_error";
    case 503:
      return "service_unavailable";
    default:
      // Other 4xx (405, 408, 431, ...) are the request's fault too.
      return http_status >= 400 && http_status < 500 ? "invalid_request_error"
                                                     : "server_error";
  }
}

std::string GrpcCodeName(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK:
      return "OK";
    case grpc::StatusCode::CANCELLED:
      return "CANCELLED";
    case grpc::StatusCode::UNKNOWN:
      return "UNKNOWN";
    case grpc::StatusCode::INVALID_ARGUMENT:
      return "INVALID_ARGUMENT";
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return "DEADLINE_EXCEEDED";
    case grpc::StatusCode::NOT_FOUND:
      return "NOT_FOUND";
    case grpc::StatusCode::ALREADY_EXISTS:
      return "ALREADY_EXISTS";
    case grpc::StatusCode::PERMISSION_DENIED:
      return "PERMISSION_DENIED";
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return "RESOURCE_EXHAUSTED";
    case grpc::StatusCode::FAILED_PRECONDITION:
      return "FAILED_PRECONDITION";
    case grpc::StatusCode::ABORTED:
      return "ABORTED";
    case grpc::StatusCode::OUT_OF_RANGE:
      return "OUT_OF_RANGE";
    case grpc::StatusCode::UNIMPLEMENTED:
      return "UNIMPLEMENTED";
    case grpc::StatusCode::INTERNAL:
      return "INTERNAL";
    case grpc::StatusCode::UNAVAILABLE:
      return "UNAVAILABLE";
    case grpc::StatusCode::DATA_LOSS:
      return "DATA_LOSS";
    case grpc::StatusCode::UNAUTHENTICATED:
      return "UNAUTHENTICATED";
    default:
      return "UNKNOWN";
  }
}

}  // namespace encoder::service
