// W3C Trace Context: the ids a trace and a span carry, the traceparent
// header that names them, new random ids, and the sampler that decides
// whether a call's spans are recorded. Plain C++ and Abseil: every layer
// may use it.
#ifndef ENCODER_SERVER_TRACING_TRACE_CONTEXT_H_
#define ENCODER_SERVER_TRACING_TRACE_CONTEXT_H_

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace encoder::tracing {

using TraceId = std::array<uint8_t, 16>;
using SpanId = std::array<uint8_t, 8>;

struct SpanContext {
  TraceId trace_id{};
  SpanId span_id{};
  bool sampled = false;
};

// The context a traceparent header names: "VV-TRACE-SPAN-FF" in lowercase
// hex, version ff refused, ids not all zero, exactly these four fields for
// version 00 and more after a '-' for a later version. nullopt otherwise
// (the header is then ignored, as the W3C recommendation says).
std::optional<SpanContext> ParseTraceparent(std::string_view header);
// "00-<trace>-<span>-0<sampled>".
std::string FormatTraceparent(const SpanContext& context);

// Lowercase hex of `bytes`.
std::string Hex(const uint8_t* bytes, size_t size);

// Random ids (a per-thread generator seeded from the system's entropy),
// never all zero.
TraceId NewTraceId();
SpanId NewSpanId();

// Which calls record spans: OpenTelemetry's samplers by their
// OTEL_TRACES_SAMPLER names. always_on, always_off; traceidratio: a new
// trace when its id's last 8 bytes, read big-endian, fall below ratio x
// 2^64 (the same trace decides alike on every service); parentbased_*: a
// call with a caller follows the caller's sampled flag, one without
// decides as the named root sampler.
struct Sampler {
  enum class Root { kAlwaysOn, kAlwaysOff, kRatio };
  Root root = Root::kAlwaysOn;
  bool parent_based = true;
  double ratio = 1.0;  // kRatio only, in [0, 1]
};

// The sampler named `name` with `arg` (traceidratio's ratio; empty: 1.0).
// InvalidArgument naming the accepted names, or the bad ratio.
absl::StatusOr<Sampler> ParseSampler(const std::string& name,
                                     const std::string& arg);
// Its OTEL_TRACES_SAMPLER name, with the ratio where it has one.
std::string DescribeSampler(const Sampler& sampler);

// Whether a call of trace `trace_id`, with `parent` from its caller (if
// any), records spans.
bool ShouldSample(const Sampler& sampler,
                  const std::optional<SpanContext>& parent,
                  const TraceId& trace_id);

// OTEL_RESOURCE_ATTRIBUTES: "key=value,key2=value2", values
// percent-decoded, blanks around keys and values dropped. InvalidArgument
// for a member with no '=' or an empty key.
absl::StatusOr<std::vector<std::pair<std::string, std::string>>>
ParseResourceAttributes(std::string_view text);

}  // namespace encoder::tracing

#endif  // ENCODER_SERVER_TRACING_TRACE_CONTEXT_H_
