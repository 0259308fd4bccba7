// encoder-server's tracing flags: OpenTelemetry traces sent over OTLP
// (--otlp-endpoint, off by default) with OpenTelemetry's environment
// variables read as their defaults, and the tracer they ask for.
#ifndef ENCODER_SERVER_APP_TRACING_FLAGS_H_
#define ENCODER_SERVER_APP_TRACING_FLAGS_H_

#include <CLI/CLI.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/metrics/metrics.h"
#include "server/tracing/tracer.h"

namespace encoder {

struct TracingFlags {
  std::string endpoint;  // empty: no tracing
  std::string protocol = "grpc";
  std::string service_name = "encoder-server";
  std::string resource_attributes;  // OTEL_RESOURCE_ATTRIBUTES' syntax
  std::string sampler = "parentbased_always_on";
  std::string sampler_arg;
  int64_t max_queue_spans = 2048;
  int64_t max_export_batch_spans = 512;
  int64_t schedule_delay_ms = 5000;
  int64_t export_timeout_ms = 10000;
};

void DefineTracingFlags(CLI::App& app, TracingFlags& flags);

// OpenTelemetry's variables as the defaults of the flags above, each only
// where neither the command line, --config nor the flag's ENCODER_
// variable set it: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (else
// OTEL_EXPORTER_OTLP_ENDPOINT), OTEL_EXPORTER_OTLP_TRACES_PROTOCOL (else
// OTEL_EXPORTER_OTLP_PROTOCOL), OTEL_SERVICE_NAME,
// OTEL_RESOURCE_ATTRIBUTES, OTEL_TRACES_SAMPLER, OTEL_TRACES_SAMPLER_ARG,
// OTEL_BSP_MAX_QUEUE_SIZE, OTEL_BSP_MAX_EXPORT_BATCH_SIZE,
// OTEL_BSP_SCHEDULE_DELAY and OTEL_EXPORTER_OTLP_TRACES_TIMEOUT (else
// OTEL_EXPORTER_OTLP_TIMEOUT), the last three in milliseconds. Returns a
// line per variable read, for the log; InvalidArgument for a bad value.
absl::StatusOr<std::vector<std::string>> ApplyOtelEnvironment(CLI::App& app);

// The tracer the flags ask for, exporting under `service_version`; null
// when --otlp-endpoint is empty or off. InvalidArgument for a bad sampler,
// protocol, resource attribute or size.
absl::StatusOr<std::unique_ptr<tracing::Tracer>> BuildTracer(
    const TracingFlags& flags, const std::string& service_version,
    metrics::Metrics* metrics);

}  // namespace encoder

#endif  // ENCODER_SERVER_APP_TRACING_FLAGS_H_
