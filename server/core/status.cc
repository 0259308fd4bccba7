#include "server/core/status.h"

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"

namespace encoder::core {

std::string Utf8Prefix(const std::string& s, size_t max_bytes) {
  if (s.size() <= max_bytes) return s;
  size_t n = max_bytes;
  // Back off continuation bytes (10xxxxxx) to a sequence start.
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  return s.substr(0, n);
}

std::string QuoteInput(const std::string& value, size_t max_bytes) {
  if (value.size() <= max_bytes) return absl::StrCat("\"", value, "\"");
  return absl::StrCat("\"", Utf8Prefix(value, max_bytes), "...\" (",
                      value.size(), " bytes)");
}

namespace {
constexpr char kTooLargeUrl[] = "type.googleapis.com/encoder.TooLarge";
constexpr char kMissingTaskUrl[] = "type.googleapis.com/encoder.MissingTask";
}  // namespace

absl::Status MarkTooLarge(absl::Status status) {
  status.SetPayload(kTooLargeUrl, absl::Cord("1"));
  return status;
}

bool IsTooLarge(const absl::Status& status) {
  return status.GetPayload(kTooLargeUrl).has_value();
}

absl::Status MarkMissingTask(absl::Status status) {
  status.SetPayload(kMissingTaskUrl, absl::Cord("1"));
  return status;
}

bool IsMissingTask(const absl::Status& status) {
  return status.GetPayload(kMissingTaskUrl).has_value();
}

std::string StatusCodeName(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kOk:
      return "OK";
    case absl::StatusCode::kCancelled:
      return "CANCELLED";
    case absl::StatusCode::kUnknown:
      return "UNKNOWN";
    case absl::StatusCode::kInvalidArgument:
      return "INVALID_ARGUMENT";
    case absl::StatusCode::kDeadlineExceeded:
      return "DEADLINE_EXCEEDED";
    case absl::StatusCode::kNotFound:
      return "NOT_FOUND";
    case absl::StatusCode::kAlreadyExists:
      return "ALREADY_EXISTS";
    case absl::StatusCode::kPermissionDenied:
      return "PERMISSION_DENIED";
    case absl::StatusCode::kResourceExhausted:
      return "RESOURCE_EXHAUSTED";
    case absl::StatusCode::kFailedPrecondition:
      return "FAILED_PRECONDITION";
    case absl::StatusCode::kAborted:
      return "ABORTED";
    case absl::StatusCode::kOutOfRange:
      return "OUT_OF_RANGE";
    case absl::StatusCode::kUnimplemented:
      return "UNIMPLEMENTED";
    case absl::StatusCode::kInternal:
      return "INTERNAL";
    case absl::StatusCode::kUnavailable:
      return "UNAVAILABLE";
    case absl::StatusCode::kDataLoss:
      return "DATA_LOSS";
    case absl::StatusCode::kUnauthenticated:
      return "UNAUTHENTICATED";
    default:
      return "UNKNOWN";
  }
}

}  // namespace encoder::core
