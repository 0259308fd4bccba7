#include "server/tracing/otlp_exporter.h"

#include <curl/curl.h>
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <type_traits>
#include <variant>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "opentelemetry/proto/collector/trace/v1/trace_service.grpc.pb.h"
#include "server/common/curl_global.h"

namespace encoder::tracing {
namespace {

namespace otlp_collector = opentelemetry::proto::collector::trace::v1;
namespace otlp_trace = opentelemetry::proto::trace::v1;
namespace otlp_common = opentelemetry::proto::common::v1;

// The W3C sampled flag, and that the parent's remoteness is known and
// whether it is remote (opentelemetry-proto's SpanFlags).
constexpr uint32_t kSampledFlag = 0x01;
constexpr uint32_t kHasIsRemote = 0x100;
constexpr uint32_t kIsRemote = 0x200;

uint64_t UnixNanos(absl::Time t) {
  return static_cast<uint64_t>(std::max<int64_t>(0, absl::ToUnixNanos(t)));
}

void SetValue(const Attribute::Value& value, otlp_common::AnyValue* out) {
  std::visit(
      [out](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::string>) {
          out->set_string_value(v);
        } else if constexpr (std::is_same_v<T, int64_t>) {
          out->set_int_value(v);
        } else if constexpr (std::is_same_v<T, double>) {
          out->set_double_value(v);
        } else {
          out->set_bool_value(v);
        }
      },
      value);
}

void AddString(const std::string& key, const std::string& value,
               google::protobuf::RepeatedPtrField<otlp_common::KeyValue>* out) {
  otlp_common::KeyValue* kv = out->Add();
  kv->set_key(key);
  kv->mutable_value()->set_string_value(value);
}

void FillSpan(const SpanData& s, otlp_trace::Span* out) {
  out->set_trace_id(s.trace_id.data(), s.trace_id.size());
  out->set_span_id(s.span_id.data(), s.span_id.size());
  if (s.parent != SpanId{}) out->set_parent_span_id(s.parent.data(), 8);
  out->set_trace_state(s.tracestate);
  out->set_flags(kSampledFlag | kHasIsRemote |
                 (s.parent_remote ? kIsRemote : 0));
  out->set_name(s.name);
  out->set_kind(s.kind == SpanData::Kind::kServer
                    ? otlp_trace::Span::SPAN_KIND_SERVER
                    : otlp_trace::Span::SPAN_KIND_INTERNAL);
  out->set_start_time_unix_nano(UnixNanos(s.start));
  out->set_end_time_unix_nano(UnixNanos(s.end));
  for (const Attribute& a : s.attributes) {
    otlp_common::KeyValue* kv = out->add_attributes();
    kv->set_key(a.key);
    SetValue(a.value, kv->mutable_value());
  }
  for (const SpanLink& l : s.links) {
    otlp_trace::Span::Link* link = out->add_links();
    link->set_trace_id(l.trace_id.data(), l.trace_id.size());
    link->set_span_id(l.span_id.data(), l.span_id.size());
    link->set_flags(kSampledFlag | kHasIsRemote);
  }
  if (s.error) {
    out->mutable_status()->set_code(otlp_trace::Status::STATUS_CODE_ERROR);
    out->mutable_status()->set_message(s.message);
  }
}

otlp_collector::ExportTraceServiceRequest BuildRequest(
    const std::vector<SpanData>& spans, const OtlpOptions& options) {
  otlp_collector::ExportTraceServiceRequest request;
  otlp_trace::ResourceSpans* rs = request.add_resource_spans();
  auto* attributes = rs->mutable_resource()->mutable_attributes();
  AddString("service.name", options.service_name, attributes);
  if (!options.service_version.empty()) {
    AddString("service.version", options.service_version, attributes);
  }
  for (const auto& [key, value] : options.resource) {
    if (key != "service.name" && key != "service.version") {
      AddString(key, value, attributes);
    }
  }
  otlp_trace::ScopeSpans* scope = rs->add_scope_spans();
  scope->mutable_scope()->set_name("encoder-server");
  scope->mutable_scope()->set_version(options.service_version);
  for (const SpanData& s : spans) FillSpan(s, scope->add_spans());
  return request;
}

// "http://host:port" -> "host:port"; TLS for "https://".
std::pair<std::string, bool> GrpcTarget(const std::string& endpoint) {
  for (const char* scheme : {"http://", "https://"}) {
    if (absl::StartsWith(endpoint, scheme)) {
      std::string target = endpoint.substr(std::string(scheme).size());
      while (!target.empty() && target.back() == '/') target.pop_back();
      return {target, scheme[4] == 's'};
    }
  }
  return {endpoint, false};
}

class GrpcExporter : public SpanExporter {
 public:
  explicit GrpcExporter(OtlpOptions options) : options_(std::move(options)) {
    const auto [target, tls] = GrpcTarget(options_.endpoint);
    target_ = target;
    channel_ = grpc::CreateChannel(
        target, tls ? grpc::SslCredentials(grpc::SslCredentialsOptions())
                    : grpc::InsecureChannelCredentials());
    stub_ = otlp_collector::TraceService::NewStub(channel_);
  }

  absl::Status Export(const std::vector<SpanData>& spans,
                      absl::Time deadline) override {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(deadline));
    otlp_collector::ExportTraceServiceResponse response;
    const grpc::Status status =
        stub_->Export(&context, BuildRequest(spans, options_), &response);
    if (!status.ok()) {
      return absl::UnavailableError(absl::StrCat(
          "OTLP/gRPC to ", target_, ": code ",
          static_cast<int>(status.error_code()), " ", status.error_message()));
    }
    return absl::OkStatus();
  }

  std::string Describe() const override {
    return absl::StrCat("OTLP/gRPC to ", target_);
  }

 private:
  const OtlpOptions options_;
  std::string target_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<otlp_collector::TraceService::Stub> stub_;
};

size_t Discard(char*, size_t size, size_t n, void*) { return size * n; }

class HttpExporter : public SpanExporter {
 public:
  explicit HttpExporter(OtlpOptions options) : options_(std::move(options)) {
    CurlGlobalInit();
    url_ = options_.endpoint;
    const size_t scheme = url_.find("://");
    const size_t path =
        url_.find('/', scheme == std::string::npos ? 0 : scheme + 3);
    if (path == std::string::npos) {
      url_ += "/v1/traces";
    } else if (url_.substr(path) == "/") {
      url_ += "v1/traces";
    }
  }

  absl::Status Export(const std::vector<SpanData>& spans,
                      absl::Time deadline) override {
    const std::string body = BuildRequest(spans, options_).SerializeAsString();
    CURL* curl = curl_easy_init();
    if (curl == nullptr) return absl::InternalError("curl_easy_init failed");
    curl_slist* headers =
        curl_slist_append(nullptr, "Content-Type: application/x-protobuf");
    curl_easy_setopt(curl, CURLOPT_URL, url_.c_str());
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body.data());
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE,
                     static_cast<curl_off_t>(body.size()));
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, Discard);
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    const int64_t ms =
        std::max<int64_t>(1, absl::ToInt64Milliseconds(deadline - absl::Now()));
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, static_cast<long>(ms));
    const CURLcode code = curl_easy_perform(curl);
    long http_status = 0;
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &http_status);
    curl_slist_free_all(headers);
    curl_easy_cleanup(curl);
    if (code != CURLE_OK) {
      return absl::UnavailableError(
          absl::StrCat("OTLP/HTTP to ", url_, ": ", curl_easy_strerror(code)));
    }
    if (http_status < 200 || http_status >= 300) {
      return absl::UnavailableError(
          absl::StrCat("OTLP/HTTP to ", url_, ": HTTP ", http_status));
    }
    return absl::OkStatus();
  }

  std::string Describe() const override {
    return absl::StrCat("OTLP/HTTP (protobuf) to ", url_);
  }

 private:
  const OtlpOptions options_;
  std::string url_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<SpanExporter>> MakeOtlpExporter(
    const OtlpOptions& options) {
  if (options.endpoint.empty()) {
    return absl::InvalidArgumentError("the OTLP endpoint is empty");
  }
  if (options.protocol == "grpc") {
    return std::unique_ptr<SpanExporter>(
        std::make_unique<GrpcExporter>(options));
  }
  if (options.protocol == "http/protobuf") {
    return std::unique_ptr<SpanExporter>(
        std::make_unique<HttpExporter>(options));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("the OTLP protocol must be grpc or http/protobuf, got \"",
                   options.protocol, "\""));
}

std::string SerializeExportRequest(const std::vector<SpanData>& spans,
                                   const OtlpOptions& options) {
  return BuildRequest(spans, options).SerializeAsString();
}

}  // namespace encoder::tracing
