// Status helpers every front shares: quoting a caller's input in a message,
// the "too large" mark on RESOURCE_EXHAUSTED, and the code names used as
// metrics labels. Each front maps a status to its own wire form
// (service/status_util.h for gRPC, http/http_status.h for HTTP).
#ifndef ENCODER_SERVER_CORE_STATUS_H_
#define ENCODER_SERVER_CORE_STATUS_H_

#include <string>

#include "absl/status/status.h"

namespace encoder::core {

// Quotes a caller-supplied string for an error message: at most `max_bytes`
// of it (cut at a UTF-8 boundary), with its full size when cut, e.g.
// "\"aaaa...\" (10240 bytes)".
std::string QuoteInput(const std::string& value, size_t max_bytes = 64);

// The longest prefix of `s` of at most `max_bytes` that does not end inside
// a UTF-8 sequence.
std::string Utf8Prefix(const std::string& s, size_t max_bytes);

// "OK", "INVALID_ARGUMENT", ... (the canonical names gRPC uses too) for
// metrics labels, access logs and messages.
std::string StatusCodeName(absl::StatusCode code);

// Marks a RESOURCE_EXHAUSTED status as "this request is too large" (it can
// never succeed as sent: over the send limit or the batch memory budget),
// as opposed to overload (a full queue), which a retry may get past. The
// mark is an absl payload; the code is the same either way.
absl::Status MarkTooLarge(absl::Status status);
bool IsTooLarge(const absl::Status& status);

// Marks a FAILED_PRECONDITION as "the model does not serve this task" (a
// rerank on an embedding model), which text-embeddings-inference's routes
// answer as a backend error.
absl::Status MarkMissingTask(absl::Status status);
bool IsMissingTask(const absl::Status& status);

}  // namespace encoder::core

#endif  // ENCODER_SERVER_CORE_STATUS_H_
