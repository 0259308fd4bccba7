#include "server/logging/access_log.h"

#include <atomic>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/logging/log.h"

namespace encoder::logging {
namespace {

// A caller-supplied string cut for the log (the full one may be large).
std::string Clip(const std::string& s, size_t max_bytes = 256) {
  if (s.size() <= max_bytes) return s;
  return absl::StrCat(s.substr(0, max_bytes), "...");
}

}  // namespace

spdlog::level::level_enum AccessLogLevel(std::string_view status) {
  if (status == "OK") return spdlog::level::info;
  if (status == "INTERNAL" || status == "UNKNOWN" || status == "DATA_LOSS" ||
      status == "UNIMPLEMENTED") {
    return spdlog::level::err;
  }
  return spdlog::level::warn;
}

void LogAccess(const AccessRecord& r) {
  std::vector<Field> fields = {
      {"protocol", r.protocol}, {"method", r.method}, {"model", Clip(r.model)},
      {"inputs", r.inputs},     {"tokens", r.tokens}, {"status", r.status},
  };
  if (r.http_status != 0) {
    fields.push_back({"http_status", static_cast<int64_t>(r.http_status)});
  }
  if (!r.error.empty()) fields.push_back({"error", Clip(r.error, 1024)});
  fields.push_back({"queue_ms", r.queue_ms});
  fields.push_back({"inference_ms", r.inference_ms});
  fields.push_back({"total_ms", r.total_ms});
  fields.push_back({"request_id", r.request_id});
  fields.push_back({"peer", r.peer});
  if (!r.traceparent.empty()) fields.push_back({"traceparent", r.traceparent});
  const spdlog::level::level_enum level = AccessLogLevel(r.status);
  // Failures repeat with different ids and times: limited by what failed.
  const std::string key = level == spdlog::level::info
                              ? std::string()
                              : absl::StrCat("access ", r.method, " ", r.status,
                                             ": ", Clip(r.error, 200));
  LogFields(level, "access", fields, key);
}

std::string NewRequestId() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  static constexpr char kHex[] = "0123456789abcdef";
  std::string id(32, '0');
  for (int half = 0; half < 2; ++half) {
    uint64_t bits = rng();
    for (int i = 0; i < 16; ++i) {
      id[half * 16 + i] = kHex[bits & 0xF];
      bits >>= 4;
    }
  }
  return id;
}

namespace {
std::atomic<size_t> g_max_request_id_bytes{kDefaultMaxRequestIdBytes};
}  // namespace

void SetMaxRequestIdBytes(size_t bytes) { g_max_request_id_bytes.store(bytes); }

size_t MaxRequestIdBytes() { return g_max_request_id_bytes.load(); }

bool IsUsableRequestId(std::string_view id) {
  if (id.empty() || id.size() > MaxRequestIdBytes()) return false;
  for (char c : id) {
    if (c < 0x20 || c > 0x7e) return false;
  }
  return true;
}

bool IsValidTraceparent(std::string_view v) {
  return tracing::ParseTraceparent(v).has_value();
}

AccessRecord BeginAccessRecord(std::string protocol, std::string method,
                               std::string peer, std::string_view request_id,
                               std::string_view traceparent) {
  AccessRecord record;
  record.protocol = std::move(protocol);
  record.method = std::move(method);
  record.peer = std::move(peer);
  if (IsUsableRequestId(request_id)) record.request_id = request_id;
  if (IsValidTraceparent(traceparent)) record.traceparent = traceparent;
  return record;
}

const std::string& EnsureRequestId(AccessRecord* record) {
  if (record->request_id.empty()) record->request_id = NewRequestId();
  return record->request_id;
}

}  // namespace encoder::logging
