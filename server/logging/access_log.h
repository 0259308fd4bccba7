// One access-log line per call, whatever the front (gRPC or HTTP): a plain
// record filled by the front and logged through server/logging. Also the
// request-id and W3C traceparent helpers every front uses the same way.
#ifndef ENCODER_SERVER_LOGGING_ACCESS_LOG_H_
#define ENCODER_SERVER_LOGGING_ACCESS_LOG_H_

#include <spdlog/common.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "server/tracing/call_trace.h"

namespace encoder::logging {

// What one call did. Times in milliseconds; queue and inference are the
// longest among the call's inputs (0 for calls that ran no batch).
struct AccessRecord {
  std::string protocol = "grpc";  // grpc | http
  std::string method;             // "Embed", "POST /v1/embeddings", ...
  std::string model;              // the model that ran, else the one asked for
  int64_t inputs = 0;             // inputs (texts, token lists) in the request
  int64_t tokens = 0;         // tokens of those inputs (0 when not tokenized)
  std::string status = "OK";  // canonical code name: OK, INVALID_ARGUMENT..
  int http_status = 0;        // HTTP fronts only; 0: not logged
  std::string error;          // the status message when not OK
  double queue_ms = 0;
  double inference_ms = 0;
  double total_ms = 0;
  std::string request_id;
  std::string peer;         // the client's address
  std::string traceparent;  // a valid W3C traceparent, else empty
  // The call's spans, when tracing records them (tracing::BeginCall).
  tracing::CallTrace trace;
};

// Logs the record: level info for OK; warn for codes a client or load
// causes (INVALID_ARGUMENT, NOT_FOUND, RESOURCE_EXHAUSTED, UNAVAILABLE,
// ...); error for INTERNAL, UNKNOWN, DATA_LOSS and UNIMPLEMENTED. Failed
// calls are rate limited per method, status and message (see
// LogOptions::rate_limit_per_second).
void LogAccess(const AccessRecord& record);

// The level LogAccess uses for a status code name.
spdlog::level::level_enum AccessLogLevel(std::string_view status);

// 32 random lowercase hex digits.
std::string NewRequestId();

// A caller's request id is used when it is 1 to MaxRequestIdBytes() of
// printable ASCII (it is echoed in metadata and headers); otherwise the call
// gets a generated one.
bool IsUsableRequestId(std::string_view id);
// The default of --max-request-id-bytes.
inline constexpr size_t kDefaultMaxRequestIdBytes = 128;
// The longest request id a caller may set; set once at start-up, before
// serving (thread-safe, but calls in flight may see either value).
void SetMaxRequestIdBytes(size_t bytes);
size_t MaxRequestIdBytes();

// W3C Trace Context: "VV-<32 hex trace id>-<16 hex parent id>-<2 hex
// flags>", lowercase, version not ff, ids not all zero; a version above 00
// may append "-..." fields.
bool IsValidTraceparent(std::string_view value);

// A record for a call that arrived with these headers or metadata values:
// the caller's request id when usable, the traceparent when valid (either
// may be empty).
AccessRecord BeginAccessRecord(std::string protocol, std::string method,
                               std::string peer, std::string_view request_id,
                               std::string_view traceparent);

// The record's request id, generated first if the caller sent none: the
// value every front echoes (X-Request-Id, x-request-id metadata).
const std::string& EnsureRequestId(AccessRecord* record);

}  // namespace encoder::logging

#endif  // ENCODER_SERVER_LOGGING_ACCESS_LOG_H_
