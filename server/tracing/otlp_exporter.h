// OTLP export of the tracer's spans (OpenTelemetry's protocol; the message
// definitions are the vendored opentelemetry-proto, proto/opentelemetry):
// ExportTraceServiceRequest over gRPC (TraceService/Export) or over HTTP
// as protobuf (POST .../v1/traces).
#ifndef ENCODER_SERVER_TRACING_OTLP_EXPORTER_H_
#define ENCODER_SERVER_TRACING_OTLP_EXPORTER_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "server/tracing/tracer.h"

namespace encoder::tracing {

struct OtlpOptions {
  // The collector. gRPC: "http://host:4317" ("https://" for TLS with the
  // system's roots; a bare "host:port" is plain text). HTTP: a URL whose
  // path, when empty or "/", becomes "/v1/traces".
  std::string endpoint;
  std::string protocol = "grpc";  // grpc | http/protobuf
  // The resource every span is sent under: service.name, service.version
  // and the other attributes (OTEL_RESOURCE_ATTRIBUTES); service_name wins
  // over a service.name among them.
  std::string service_name = "encoder-server";
  std::string service_version;
  std::vector<std::pair<std::string, std::string>> resource;
};

// The exporter `options` name; InvalidArgument for an unknown protocol or
// an empty endpoint.
absl::StatusOr<std::unique_ptr<SpanExporter>> MakeOtlpExporter(
    const OtlpOptions& options);

// The serialized ExportTraceServiceRequest an export of `spans` sends.
std::string SerializeExportRequest(const std::vector<SpanData>& spans,
                                   const OtlpOptions& options);

}  // namespace encoder::tracing

#endif  // ENCODER_SERVER_TRACING_OTLP_EXPORTER_H_
