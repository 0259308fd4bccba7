// What one call's spans are made of, filled along its way: the front opens
// it (tracing::BeginCall), the core stamps the steps it takes, and the
// front ends it (tracing::EndCall), which makes the spans. Plain data; it
// rides in the call's access record (logging::AccessRecord::trace).
#ifndef ENCODER_SERVER_TRACING_CALL_TRACE_H_
#define ENCODER_SERVER_TRACING_CALL_TRACE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "server/tracing/trace_context.h"

namespace encoder::tracing {

struct CallTrace {
  // False: no span is made (no tracer, or the sampler said no).
  bool sampled = false;
  // The call's own span: its trace (the caller's, else a new one) and id.
  SpanContext span;
  // The caller's span (traceparent); all zero: the call starts the trace.
  SpanId parent{};
  std::string tracestate;                   // the caller's, kept as it came
  absl::Time start = absl::InfinitePast();  // the front opened the call
  // Stamped by the core; InfinitePast where the call did not get that far:
  // the core took the call, its sequences were queued, the first of its
  // batches started, the last ended, and the answer was built.
  absl::Time core_start = absl::InfinitePast();
  absl::Time queued = absl::InfinitePast();
  absl::Time first_batch = absl::InfinitePast();
  absl::Time last_batch_end = absl::InfinitePast();
  absl::Time answered = absl::InfinitePast();
  // The batches its sequences ran in (batching::BatchStats::id), each once.
  std::vector<uint64_t> batches;
  // The model that ran, as served.
  std::string scheme, precision;
  int64_t sequences = 0;
};

}  // namespace encoder::tracing

#endif  // ENCODER_SERVER_TRACING_CALL_TRACE_H_
