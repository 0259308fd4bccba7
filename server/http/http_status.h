// The HTTP front's status vocabulary: the HTTP status and OpenAI error type
// of an internal absl::Status.
#ifndef ENCODER_SERVER_HTTP_HTTP_STATUS_H_
#define ENCODER_SERVER_HTTP_HTTP_STATUS_H_

#include "absl/status/status.h"

namespace encoder::http {

// The HTTP status of an internal status: OK 200; INVALID_ARGUMENT,
// OUT_OF_RANGE, FAILED_PRECONDITION 400; UNAUTHENTICATED 401;
// PERMISSION_DENIED 403; NOT_FOUND 404; RESOURCE_EXHAUSTED 413 when
// marked too large (core::MarkTooLarge), else 429; CANCELLED 499;
// DEADLINE_EXCEEDED 504; UNAVAILABLE (draining, loading) 503;
// UNIMPLEMENTED 501; anything else 500.
int HttpStatusFor(absl::StatusCode code, bool too_large = false);
int HttpStatusFor(const absl::Status& status);

// The OpenAI error "type" of an HTTP status: invalid_request_error (400,
// 404, 413), authentication_error (401), permission_error (403),
// rate_limit_error (429), service_unavailable (503), server_error (others).
const char* OpenAiErrorType(int http_status);

}  // namespace encoder::http

#endif  // ENCODER_SERVER_HTTP_HTTP_STATUS_H_
