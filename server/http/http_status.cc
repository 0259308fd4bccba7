#include "server/http/http_status.h"

#include "server/core/status.h"

namespace encoder::http {

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
  return HttpStatusFor(status.code(), core::IsTooLarge(status));
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

}  // namespace encoder::http
