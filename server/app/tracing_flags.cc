#include "server/app/tracing_flags.h"

#include <cstdlib>
#include <string_view>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/common/status_macros.h"
#include "server/tracing/otlp_exporter.h"

namespace encoder {

void DefineTracingFlags(CLI::App& app, TracingFlags& f) {
  app.add_option("--otlp-endpoint", f.endpoint,
                 "OpenTelemetry collector the traces go to over OTLP "
                 "(http://host:4317 for grpc, http://host:4318 for "
                 "http/protobuf); empty or off: no tracing")
      ->capture_default_str();
  app.add_option("--otlp-protocol", f.protocol, "OTLP's transport")
      ->check(CLI::IsMember({"grpc", "http/protobuf"}))
      ->capture_default_str();
  app.add_option("--otlp-service-name", f.service_name,
                 "the service.name the spans are sent under")
      ->capture_default_str();
  app.add_option("--otlp-resource-attributes", f.resource_attributes,
                 "more resource attributes: key=value pairs separated by "
                 "commas, values percent-encoded")
      ->capture_default_str();
  app.add_option("--otlp-sampler", f.sampler,
                 "which calls are traced: always_on, always_off, "
                 "traceidratio, or parentbased_ of one of them (a call with "
                 "a traceparent follows its caller's sampled flag)")
      ->capture_default_str();
  app.add_option("--otlp-sampler-arg", f.sampler_arg,
                 "traceidratio's share of new traces, 0 to 1 (empty: 1)")
      ->capture_default_str();
  app.add_option("--otlp-max-queue-spans", f.max_queue_spans,
                 "spans waiting for export; more are dropped and counted "
                 "(encoder_trace_spans_total{outcome=\"queue_full\"})")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 24))
      ->capture_default_str();
  app.add_option("--otlp-max-export-batch-spans", f.max_export_batch_spans,
                 "spans per export")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20))
      ->capture_default_str();
  app.add_option("--otlp-schedule-delay", f.schedule_delay_ms,
                 "the longest a span waits for a full export batch")
      ->check(CLI::Range(int64_t{1}, int64_t{3600000}))
      ->capture_default_str();
  app.add_option("--otlp-export-timeout", f.export_timeout_ms,
                 "the longest one export may take (its spans are dropped "
                 "then); at shutdown, the longest the last exports take")
      ->check(CLI::Range(int64_t{1}, int64_t{3600000}))
      ->capture_default_str();
}

absl::StatusOr<std::vector<std::string>> ApplyOtelEnvironment(CLI::App& app) {
  struct Variable {
    std::vector<const char*> names;  // the first one set wins
    const char* flag;
    bool milliseconds;
  };
  static const auto* kVariables = new std::vector<Variable>{
      {{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"},
       "--otlp-endpoint",
       false},
      {{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"},
       "--otlp-protocol",
       false},
      {{"OTEL_SERVICE_NAME"}, "--otlp-service-name", false},
      {{"OTEL_RESOURCE_ATTRIBUTES"}, "--otlp-resource-attributes", false},
      {{"OTEL_TRACES_SAMPLER"}, "--otlp-sampler", false},
      {{"OTEL_TRACES_SAMPLER_ARG"}, "--otlp-sampler-arg", false},
      {{"OTEL_BSP_MAX_QUEUE_SIZE"}, "--otlp-max-queue-spans", false},
      {{"OTEL_BSP_MAX_EXPORT_BATCH_SIZE"},
       "--otlp-max-export-batch-spans",
       false},
      {{"OTEL_BSP_SCHEDULE_DELAY"}, "--otlp-schedule-delay", true},
      {{"OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "OTEL_EXPORTER_OTLP_TIMEOUT"},
       "--otlp-export-timeout",
       true},
  };
  std::vector<std::string> notes;
  for (const Variable& v : *kVariables) {
    CLI::Option* option = app.get_option_no_throw(v.flag);
    if (option == nullptr || option->count() > 0) continue;
    const std::string& own = option->get_envname();
    if (!own.empty() && std::getenv(own.c_str()) != nullptr) continue;
    for (const char* name : v.names) {
      const char* value = std::getenv(name);
      if (value == nullptr || *value == '\0') continue;
      try {
        option->add_result(v.milliseconds ? absl::StrCat(value, "ms")
                                          : std::string(value));
        option->run_callback();
      } catch (const CLI::Error& e) {
        return absl::InvalidArgumentError(
            absl::StrCat(name, "=", value, " (OpenTelemetry's, read as ",
                         v.flag, "): ", e.what()));
      }
      notes.push_back(absl::StrCat(name, "=", value, " read as ", v.flag));
      break;
    }
  }
  return notes;
}

absl::StatusOr<std::unique_ptr<tracing::Tracer>> BuildTracer(
    const TracingFlags& flags, const std::string& service_version,
    metrics::Metrics* metrics) {
  if (flags.endpoint.empty() || flags.endpoint == "off") {
    return std::unique_ptr<tracing::Tracer>();
  }
  tracing::TracerOptions options;
  auto named = [](const char* flag, const absl::Status& s) {
    return absl::Status(s.code(), absl::StrCat(flag, ": ", s.message()));
  };
  auto sampler = tracing::ParseSampler(flags.sampler, flags.sampler_arg);
  if (!sampler.ok()) return named("--otlp-sampler", sampler.status());
  options.sampler = *sampler;
  options.max_queue_spans = flags.max_queue_spans;
  options.max_export_batch_spans = flags.max_export_batch_spans;
  options.schedule_delay = absl::Milliseconds(flags.schedule_delay_ms);
  options.export_timeout = absl::Milliseconds(flags.export_timeout_ms);
  tracing::OtlpOptions otlp;
  otlp.endpoint = flags.endpoint;
  otlp.protocol = flags.protocol;
  otlp.service_name = flags.service_name;
  otlp.service_version = service_version;
  auto resource = tracing::ParseResourceAttributes(flags.resource_attributes);
  if (!resource.ok()) {
    return named("--otlp-resource-attributes", resource.status());
  }
  otlp.resource = *std::move(resource);
  ASSIGN_OR_RETURN(auto exporter, tracing::MakeOtlpExporter(otlp));
  return std::make_unique<tracing::Tracer>(options, std::move(exporter),
                                           metrics);
}

}  // namespace encoder
