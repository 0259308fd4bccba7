// The one place that maps internal statuses to gRPC statuses and to the
// HTTP front's statuses.
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

// Marks a RESOURCE_EXHAUSTED status as "this request is too large" (it can
// never succeed as sent: over the send limit or the batch memory budget),
// as opposed to overload (a full queue), which a retry may get past. The
// mark is an absl payload; gRPC sees the same code either way.
absl::Status MarkTooLarge(absl::Status status);
bool IsTooLarge(const absl::Status& status);

// The HTTP status of an internal status: OK 200; INVALID_ARGUMENT,
// OUT_OF_RANGE, FAILED_PRECONDITION 400; UNAUTHENTICATED 401;
// PERMISSION_DENIED 403; NOT_FOUND 404; RESOURCE_EXHAUSTED 413 when
// marked too large, else 429; CANCELLED 499; DEADLINE_EXCEEDED 504;
// UNAVAILABLE (draining, loading) 503; UNIMPLEMENTED 501; anything else
// 500.
int HttpStatusFor(absl::StatusCode code, bool too_large = false);
int HttpStatusFor(const absl::Status& status);

// The OpenAI error "type" of an HTTP status: invalid_request_error (400,
// 404, 413), authentication_error (401), permission_error (403),
// rate_limit_error (429), service_unavailable (503), server_error (others).
const char* OpenAiErrorType(int http_status);

}  // namespace encoder::service

#endif  // ENCODER_SERVER_SERVICE_STATUS_UTIL_H_
