#include "server/tracing/tracer.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <iterator>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/common/thread_name.h"

namespace encoder::tracing {
namespace {

std::atomic<Tracer*> g_tracer{nullptr};

bool Stamped(absl::Time t) { return t != absl::InfinitePast(); }

// splitmix64's finalizer: distinct inputs give well-spread outputs.
uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

template <size_t N>
void PutBits(uint64_t bits, std::array<uint8_t, N>* out, size_t at) {
  for (size_t i = 0; i < 8 && at + i < N; ++i) {
    (*out)[at + i] = static_cast<uint8_t>(bits >> (8 * (7 - i)));
  }
}

// The server span's name: the HTTP route ("POST /v1/embeddings") or the
// gRPC method ("encoder.v1.EncoderService/Embed").
std::string CallName(const logging::AccessRecord& a) {
  return a.protocol == "http"
             ? a.method
             : absl::StrCat("encoder.v1.EncoderService/", a.method);
}

std::vector<Attribute> CallAttributes(const logging::AccessRecord& a) {
  std::vector<Attribute> out;
  if (a.protocol == "http") {
    const size_t space = a.method.find(' ');
    out.push_back({"http.request.method", a.method.substr(0, space)});
    if (space != std::string::npos) {
      out.push_back({"http.route", a.method.substr(space + 1)});
    }
    if (a.http_status != 0) {
      out.push_back({"http.response.status_code", int64_t{a.http_status}});
    }
  } else {
    out.push_back({"rpc.system", std::string("grpc")});
    out.push_back({"rpc.service", std::string("encoder.v1.EncoderService")});
    out.push_back({"rpc.method", a.method});
  }
  out.push_back({"encoder.status", a.status});
  out.push_back({"encoder.request_id", a.request_id});
  out.push_back({"encoder.peer", a.peer});
  if (!a.model.empty()) out.push_back({"encoder.model", a.model});
  out.push_back({"encoder.inputs", a.inputs});
  out.push_back({"encoder.tokens", a.tokens});
  const CallTrace& t = a.trace;
  if (!t.scheme.empty()) {
    out.push_back({"encoder.scheme", t.scheme});
    out.push_back({"encoder.precision", t.precision});
    out.push_back({"encoder.sequences", t.sequences});
  }
  return out;
}

// A child of the call's span.
SpanData Child(const CallTrace& t, const char* name, absl::Time start,
               absl::Time end) {
  SpanData s;
  s.trace_id = t.span.trace_id;
  s.span_id = NewSpanId();
  s.parent = t.span.span_id;
  s.name = name;
  s.start = start;
  s.end = std::max(start, end);
  return s;
}

// Logs an export failure: the first, then at most one a minute.
void LogExportFailure(const absl::Status& status, int64_t spans) {
  static std::atomic<int64_t> last_ns{0};
  const int64_t now = absl::GetCurrentTimeNanos();
  const int64_t last = last_ns.load();
  if (last != 0 && now - last < int64_t{60} * 1000 * 1000 * 1000) return;
  last_ns.store(now);
  spdlog::warn("trace export failed, {} spans dropped: {}", spans,
               status.ToString());
}

}  // namespace

Tracer::Tracer(TracerOptions options, std::unique_ptr<SpanExporter> exporter,
               metrics::Metrics* metrics)
    : options_(std::move(options)),
      exporter_(std::move(exporter)),
      metrics_(metrics),
      batch_spans_(static_cast<size_t>(
          std::max<int64_t>(1, options_.max_export_batch_spans))),
      salt_(std::random_device{}() * 0x100000001ULL ^ std::random_device{}()) {
  thread_ = std::thread([this] { ExportLoop(); });
}

Tracer::~Tracer() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  thread_.join();
}

void Tracer::Begin(std::string_view traceparent, std::string_view tracestate,
                   logging::AccessRecord* access) const {
  const std::optional<SpanContext> parent = ParseTraceparent(traceparent);
  CallTrace& t = access->trace;
  t.span.trace_id = parent.has_value() ? parent->trace_id : NewTraceId();
  t.sampled = ShouldSample(options_.sampler, parent, t.span.trace_id);
  if (!t.sampled) return;
  t.span.span_id = NewSpanId();
  t.span.sampled = true;
  if (parent.has_value()) {
    t.parent = parent->span_id;
    t.tracestate = tracestate;
  }
  t.start = absl::Now();
}

void Tracer::End(const logging::AccessRecord& access, absl::Time end) {
  const CallTrace& t = access.trace;
  if (!t.sampled) return;
  std::vector<SpanData> spans(1);
  SpanData& call = spans[0];
  call.trace_id = t.span.trace_id;
  call.span_id = t.span.span_id;
  call.parent = t.parent;
  call.parent_remote = t.parent != SpanId{};
  call.tracestate = t.tracestate;
  call.name = CallName(access);
  call.kind = SpanData::Kind::kServer;
  call.start = t.start;
  call.end = std::max(t.start, end);
  call.attributes = CallAttributes(access);
  call.error = access.status != "OK";
  call.message = access.error;
  if (Stamped(t.core_start) && Stamped(t.queued)) {
    spans.push_back(Child(t, "tokenize", t.core_start, t.queued));
  }
  if (Stamped(t.queued) && !Stamped(t.first_batch)) {
    spans.push_back(Child(t, "queue", t.queued, end));  // never ran
  } else if (Stamped(t.queued)) {
    spans.push_back(Child(t, "queue", t.queued, t.first_batch));
    SpanData inference = Child(t, "inference", t.first_batch, t.last_batch_end);
    for (uint64_t id : t.batches) {
      const SpanContext batch = BatchSpan(id);
      inference.links.push_back({batch.trace_id, batch.span_id});
    }
    inference.attributes.push_back(
        {"encoder.batches", static_cast<int64_t>(t.batches.size())});
    spans.push_back(std::move(inference));
    spans.push_back(Child(t, "encode response", t.last_batch_end, end));
  }
  Enqueue(std::move(spans));
}

void Tracer::RecordBatch(const std::string& model,
                         const batching::BatchStats& stats) {
  if (stats.traced <= 0) return;
  const SpanContext context = BatchSpan(stats.id);
  SpanData s;
  s.trace_id = context.trace_id;
  s.span_id = context.span_id;
  s.name = "forward";
  s.start = stats.start;
  s.end = stats.start + absl::Seconds(stats.inference_seconds);
  s.attributes = {{"encoder.model", model},
                  {"encoder.batch.id", static_cast<int64_t>(stats.id)},
                  {"encoder.batch.sequences", stats.batch_size},
                  {"encoder.batch.padded_tokens", stats.padded_tokens},
                  {"encoder.batch.real_tokens", stats.real_tokens},
                  {"encoder.batch.traced_sequences", stats.traced},
                  {"encoder.batch.oldest_queue_seconds", stats.queue_seconds}};
  Enqueue({std::move(s)});
}

SpanContext Tracer::BatchSpan(uint64_t batch_id) const {
  SpanContext c;
  const uint64_t a = Mix(salt_ ^ batch_id);
  PutBits(a, &c.trace_id, 0);
  PutBits(Mix(a), &c.trace_id, 8);
  PutBits(Mix(Mix(a)) | 1, &c.span_id, 0);  // never all zero
  c.trace_id[15] |= 1;
  c.sampled = true;
  return c;
}

std::string Tracer::Describe() const {
  return absl::StrCat(
      exporter_->Describe(), ", sampler ", DescribeSampler(options_.sampler),
      ", queue ", options_.max_queue_spans, " spans, batches of ",
      options_.max_export_batch_spans, " every ",
      absl::FormatDuration(options_.schedule_delay), ", export timeout ",
      absl::FormatDuration(options_.export_timeout));
}

int64_t Tracer::queued_spans() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(queue_.size());
}

void Tracer::Enqueue(std::vector<SpanData> spans) {
  int64_t dropped = 0;
  {
    absl::MutexLock lock(&mu_);
    for (SpanData& s : spans) {
      if (static_cast<int64_t>(queue_.size()) >= options_.max_queue_spans) {
        ++dropped;
        continue;
      }
      queue_.push_back(std::move(s));
    }
  }
  if (dropped > 0) metrics_->TraceSpans("queue_full", dropped);
}

bool Tracer::ExportDue() const {
  return stopping_ || queue_.size() >= batch_spans_;
}

void Tracer::ExportLoop() {
  NameThisThread("trace-export");
  // Once stopping: what is still queued gets export_timeout in all.
  absl::Time flush_deadline = absl::InfiniteFuture();
  while (true) {
    std::vector<SpanData> spans;
    {
      absl::MutexLock lock(&mu_);
      mu_.AwaitWithTimeout(absl::Condition(this, &Tracer::ExportDue),
                           options_.schedule_delay);
      if (stopping_ && flush_deadline == absl::InfiniteFuture()) {
        flush_deadline = absl::Now() + options_.export_timeout;
      }
      if (queue_.empty()) {
        if (stopping_) return;
        continue;
      }
      const size_t n = std::min(batch_spans_, queue_.size());
      spans.assign(std::make_move_iterator(queue_.begin()),
                   std::make_move_iterator(queue_.begin() + n));
      queue_.erase(queue_.begin(), queue_.begin() + n);
    }
    const int64_t n = static_cast<int64_t>(spans.size());
    const absl::Time now = absl::Now();
    if (now >= flush_deadline) {
      metrics_->TraceSpans("shutdown", n);
      continue;
    }
    const absl::Status sent = exporter_->Export(
        spans, std::min(now + options_.export_timeout, flush_deadline));
    metrics_->TraceSpans(sent.ok() ? "exported" : "export_failed", n);
    if (!sent.ok()) LogExportFailure(sent, n);
  }
}

void Install(Tracer* tracer) { g_tracer.store(tracer); }

Tracer* Installed() { return g_tracer.load(); }

void BeginCall(std::string_view tracestate, logging::AccessRecord* access) {
  if (Tracer* t = Installed(); t != nullptr) {
    t->Begin(access->traceparent, tracestate, access);
  }
}

void BeginStreamRequest(logging::AccessRecord* access) {
  if (!access->trace.sampled) return;
  access->trace.span.span_id = NewSpanId();
  access->trace.start = absl::Now();
}

void EndCall(const logging::AccessRecord& access) {
  if (!access.trace.sampled) return;
  if (Tracer* t = Installed(); t != nullptr) t->End(access, absl::Now());
}

}  // namespace encoder::tracing
