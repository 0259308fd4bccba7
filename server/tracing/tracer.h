// The tracer: the spans of a traced call, made when the call ends from its
// trace record (call_trace.h), and of each batch that ran a traced call,
// queued (bounded) and handed to an exporter by a background thread, so
// the serving path never waits on the collector. A full queue drops spans
// and counts them (Metrics::TraceSpans).
//
// A call's spans: the server span (the call, from its front's opening to
// its answer; its parent the caller's traceparent, else none: a new trace)
// and, for calls that ran the model, its children tokenize (the core took
// the call until its sequences were queued), queue (until the first of its
// batches started), inference (until the last of them ended; linked to
// each batch's span) and encode response (until the front answered). A
// batch's span, "forward", is the root of a trace of its own: one batch
// serves many calls of many traces, so the calls link to it.
#ifndef ENCODER_SERVER_TRACING_TRACER_H_
#define ENCODER_SERVER_TRACING_TRACER_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/batching/types.h"
#include "server/logging/access_log.h"
#include "server/metrics/metrics.h"
#include "server/tracing/trace_context.h"

namespace encoder::tracing {

struct Attribute {
  using Value = std::variant<std::string, int64_t, double, bool>;
  std::string key;
  Value value;
};

struct SpanLink {
  TraceId trace_id{};
  SpanId span_id{};
};

// One finished span, as the exporters send it.
struct SpanData {
  enum class Kind { kInternal, kServer };
  TraceId trace_id{};
  SpanId span_id{};
  SpanId parent{};             // all zero: a root span
  bool parent_remote = false;  // the parent is the caller's span
  std::string tracestate;
  std::string name;
  Kind kind = Kind::kInternal;
  absl::Time start, end;
  std::vector<Attribute> attributes;
  std::vector<SpanLink> links;
  bool error = false;  // the status: ERROR with `message`, else unset
  std::string message;
};

// Sends spans to a collector. Export runs on the tracer's thread only.
class SpanExporter {
 public:
  virtual ~SpanExporter() = default;
  // Sends `spans`, giving up at `deadline`; an error drops them.
  virtual absl::Status Export(const std::vector<SpanData>& spans,
                              absl::Time deadline) = 0;
  // Where the spans go, for the log ("OTLP/gRPC to host:4317").
  virtual std::string Describe() const = 0;
};

struct TracerOptions {
  Sampler sampler;
  // The queue's bound: spans past it are dropped (outcome queue_full).
  int64_t max_queue_spans = 2048;
  // Spans per export; an export starts when this many are queued or
  // schedule_delay after the last one.
  int64_t max_export_batch_spans = 512;
  absl::Duration schedule_delay = absl::Milliseconds(1000);
  // One export's bound; at shutdown also the bound of the whole flush.
  absl::Duration export_timeout = absl::Seconds(10);
};

class Tracer {
 public:
  // `metrics` must outlive the tracer.
  Tracer(TracerOptions options, std::unique_ptr<SpanExporter> exporter,
         metrics::Metrics* metrics);
  // Exports what is queued (bounded by export_timeout; the rest is counted
  // as dropped at shutdown) and stops the thread.
  ~Tracer();

  Tracer(const Tracer&) = delete;
  Tracer& operator=(const Tracer&) = delete;

  // Opens `access`'s trace: continues a valid `traceparent` (the caller's
  // span its parent, `tracestate` kept) or starts a new trace, and asks
  // the sampler whether its spans are recorded.
  void Begin(std::string_view traceparent, std::string_view tracestate,
             logging::AccessRecord* access) const;
  // Queues the spans of a sampled call that ended at `end`.
  void End(const logging::AccessRecord& access, absl::Time end);
  // Queues the span of a batch that ran sampled calls (stats.traced > 0).
  void RecordBatch(const std::string& model, const batching::BatchStats& stats);

  // The span a batch's "forward" is recorded under: derived from the batch
  // id, so that its calls link to it without waiting for it.
  SpanContext BatchSpan(uint64_t batch_id) const;

  const TracerOptions& options() const { return options_; }
  std::string Describe() const;

  // Spans queued and not yet taken by an export (for tests).
  int64_t queued_spans() const;

 private:
  void Enqueue(std::vector<SpanData> spans);
  // A full batch is queued, or the tracer stops.
  bool ExportDue() const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  void ExportLoop();

  const TracerOptions options_;
  const std::unique_ptr<SpanExporter> exporter_;
  metrics::Metrics* const metrics_;
  const size_t batch_spans_;  // max_export_batch_spans, at least 1
  const uint64_t salt_;       // mixes batch ids into span ids
  mutable absl::Mutex mu_;
  std::deque<SpanData> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

// The process's tracer, for the fronts and the batch observer: set once
// by the composition root before serving, cleared after the fronts stop.
void Install(Tracer* tracer);
Tracer* Installed();

// The fronts' two calls: Tracer::Begin, on the traceparent the access
// record kept (logging::BeginAccessRecord keeps a valid one), and
// Tracer::End at now, on the installed tracer; nothing when none is.
void BeginCall(std::string_view tracestate, logging::AccessRecord* access);
void EndCall(const logging::AccessRecord& access);
// One request of a stream, whose record is a copy of the stream's: a span
// of its own (the stream's trace and parent) from now.
void BeginStreamRequest(logging::AccessRecord* access);

}  // namespace encoder::tracing

#endif  // ENCODER_SERVER_TRACING_TRACER_H_
