#include "server/tracing/tracer.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "opentelemetry/proto/collector/trace/v1/trace_service.pb.h"
#include "server/tracing/otlp_exporter.h"

namespace encoder::tracing {
namespace {

constexpr char kParent[] =
    "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

// What a Collector received; outlives the tracer that owns the collector.
struct Received {
  absl::Mutex mu;
  std::vector<SpanData> got;
};

// Keeps what it is sent; fails or waits for its deadline when told to.
class Collector : public SpanExporter {
 public:
  explicit Collector(Received* received = nullptr) : received_(received) {}
  absl::Status Export(const std::vector<SpanData>& spans,
                      absl::Time deadline) override {
    if (wait_for_deadline) absl::SleepFor(deadline - absl::Now());
    if (fail) return absl::UnavailableError("collector down");
    if (received_ != nullptr) {
      absl::MutexLock lock(&received_->mu);
      received_->got.insert(received_->got.end(), spans.begin(), spans.end());
    }
    return absl::OkStatus();
  }
  std::string Describe() const override { return "collector"; }

  bool fail = false;
  bool wait_for_deadline = false;

 private:
  Received* const received_;
};

class CountingMetrics : public metrics::NoopMetrics {
 public:
  void TraceSpans(const std::string& outcome, int64_t spans) override {
    absl::MutexLock lock(&mu);
    counts[outcome] += spans;
  }
  int64_t Count(const std::string& outcome) {
    absl::MutexLock lock(&mu);
    return counts[outcome];
  }
  absl::Mutex mu;
  std::map<std::string, int64_t> counts;
};

TracerOptions Fast() {
  TracerOptions o;
  o.schedule_delay = absl::Milliseconds(5);
  o.export_timeout = absl::Milliseconds(200);
  return o;
}

// A traced call of `access` whose core stamps come `step` apart.
void StampCall(logging::AccessRecord* access, absl::Duration step) {
  tracing::CallTrace& t = access->trace;
  t.core_start = t.start + step;
  t.queued = t.start + 2 * step;
  t.first_batch = t.start + 3 * step;
  t.last_batch_end = t.start + 5 * step;
  t.answered = t.start + 5 * step;
  t.batches = {7, 9};
  t.scheme = "rope";
  t.precision = "float32";
  t.sequences = 2;
}

const SpanData* Named(const std::vector<SpanData>& spans,
                      const std::string& name) {
  for (const SpanData& s : spans) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

TEST(Tracer, ContinuesTheCallersTraceWithChildrenThatTileTheCall) {
  Received received;
  Received* got = &received;
  auto collector = std::make_unique<Collector>(got);
  CountingMetrics metrics;
  auto tracer =
      std::make_unique<Tracer>(Fast(), std::move(collector), &metrics);
  logging::AccessRecord access;
  access.protocol = "http";
  access.method = "POST /v1/embeddings";
  access.model = "m";
  access.inputs = 2;
  access.tokens = 9;
  access.http_status = 200;
  tracer->Begin(kParent, "vendor=1", &access);
  ASSERT_TRUE(access.trace.sampled);
  StampCall(&access, absl::Milliseconds(1));
  const absl::Time end = access.trace.start + absl::Milliseconds(6);
  tracer->End(access, end);
  const SpanContext batch7 = tracer->BatchSpan(7);
  const SpanContext batch9 = tracer->BatchSpan(9);
  tracer.reset();  // flushes
  EXPECT_EQ(metrics.Count("exported"), 5);
  ASSERT_EQ(got->got.size(), 5u);
  const SpanData* call = Named(got->got, "POST /v1/embeddings");
  ASSERT_NE(call, nullptr);
  EXPECT_EQ(Hex(call->trace_id.data(), 16), "4bf92f3577b34da6a3ce929d0e0e4736");
  EXPECT_EQ(Hex(call->parent.data(), 8), "00f067aa0ba902b7");
  EXPECT_TRUE(call->parent_remote);
  EXPECT_EQ(call->tracestate, "vendor=1");
  EXPECT_EQ(call->kind, SpanData::Kind::kServer);
  EXPECT_EQ(call->end - call->start, absl::Milliseconds(6));
  EXPECT_FALSE(call->error);
  absl::Duration children;
  for (const char* name :
       {"tokenize", "queue", "inference", "encode response"}) {
    const SpanData* s = Named(got->got, name);
    ASSERT_NE(s, nullptr) << name;
    EXPECT_EQ(s->trace_id, call->trace_id) << name;
    EXPECT_EQ(s->parent, call->span_id) << name;
    EXPECT_FALSE(s->parent_remote) << name;
    children += s->end - s->start;
  }
  // From the core's start to the answer, without gaps.
  EXPECT_EQ(children, absl::Milliseconds(5));
  const SpanData* inference = Named(got->got, "inference");
  ASSERT_EQ(inference->links.size(), 2u);
  EXPECT_EQ(inference->links[0].span_id, batch7.span_id);
  EXPECT_EQ(inference->links[0].trace_id, batch7.trace_id);
  EXPECT_EQ(inference->links[1].span_id, batch9.span_id);
  EXPECT_NE(batch7.span_id, batch9.span_id);
  EXPECT_NE(batch7.trace_id, call->trace_id);
}

TEST(Tracer, StartsATraceWithoutAParentAndRecordsNothingUnsampled) {
  Received received;
  Received* got = &received;
  auto collector = std::make_unique<Collector>(got);
  CountingMetrics metrics;
  auto tracer =
      std::make_unique<Tracer>(Fast(), std::move(collector), &metrics);
  logging::AccessRecord fresh;
  fresh.method = "Embed";
  tracer->Begin("", "", &fresh);
  EXPECT_TRUE(fresh.trace.sampled);
  EXPECT_EQ(fresh.trace.parent, SpanId{});
  EXPECT_NE(fresh.trace.span.trace_id, TraceId{});
  logging::AccessRecord unsampled;
  tracer->Begin("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", "",
                &unsampled);
  EXPECT_FALSE(unsampled.trace.sampled);
  tracer->End(fresh, absl::Now());
  tracer->End(unsampled, absl::Now());
  tracer.reset();
  ASSERT_EQ(got->got.size(), 1u);  // the fresh call's span; it ran nothing
  EXPECT_EQ(got->got[0].name, "encoder.v1.EncoderService/Embed");
  EXPECT_FALSE(got->got[0].parent_remote);
}

TEST(Tracer, RecordsABatchOnlyWhenItRanATracedCall) {
  Received received;
  Received* got = &received;
  auto collector = std::make_unique<Collector>(got);
  CountingMetrics metrics;
  auto tracer =
      std::make_unique<Tracer>(Fast(), std::move(collector), &metrics);
  batching::BatchStats stats;
  stats.id = 42;
  stats.start = absl::Now();
  stats.inference_seconds = 0.25;
  stats.batch_size = 3;
  tracer->RecordBatch("m", stats);  // none traced
  stats.traced = 1;
  tracer->RecordBatch("m", stats);
  const SpanContext expected = tracer->BatchSpan(42);
  tracer.reset();
  ASSERT_EQ(got->got.size(), 1u);
  const SpanData& s = got->got[0];
  EXPECT_EQ(s.name, "forward");
  EXPECT_EQ(s.span_id, expected.span_id);
  EXPECT_EQ(s.trace_id, expected.trace_id);
  EXPECT_EQ(s.parent, SpanId{});
  EXPECT_EQ(s.end - s.start, absl::Milliseconds(250));
}

TEST(Tracer, AFullQueueDropsAndCounts) {
  TracerOptions o = Fast();
  o.max_queue_spans = 3;
  o.max_export_batch_spans = 100;
  o.schedule_delay = absl::Hours(1);  // nothing leaves before shutdown
  CountingMetrics metrics;
  auto tracer =
      std::make_unique<Tracer>(o, std::make_unique<Collector>(), &metrics);
  batching::BatchStats stats;
  stats.traced = 1;
  for (uint64_t id = 1; id <= 5; ++id) {
    stats.id = id;
    tracer->RecordBatch("m", stats);
  }
  EXPECT_EQ(tracer->queued_spans(), 3);
  EXPECT_EQ(metrics.Count("queue_full"), 2);
  tracer.reset();
  EXPECT_EQ(metrics.Count("exported"), 3);
}

TEST(Tracer, AFailingCollectorCostsSpansAndShutdownStaysBounded) {
  CountingMetrics metrics;
  {
    auto collector = std::make_unique<Collector>();
    collector->fail = true;
    Tracer tracer(Fast(), std::move(collector), &metrics);
    batching::BatchStats stats;
    stats.traced = 1;
    tracer.RecordBatch("m", stats);
  }
  EXPECT_EQ(metrics.Count("export_failed"), 1);
  // A collector that never answers: the first export waits out its
  // timeout, what is left at shutdown is dropped and counted.
  TracerOptions o = Fast();
  o.max_export_batch_spans = 1;
  o.schedule_delay = absl::Hours(1);
  auto collector = std::make_unique<Collector>();
  collector->wait_for_deadline = true;
  auto tracer = std::make_unique<Tracer>(o, std::move(collector), &metrics);
  batching::BatchStats stats;
  stats.traced = 1;
  for (int i = 0; i < 20; ++i) tracer->RecordBatch("m", stats);
  tracer.reset();
  EXPECT_GT(metrics.Count("shutdown"), 0);
  EXPECT_EQ(metrics.Count("exported") + metrics.Count("shutdown") +
                metrics.Count("export_failed"),
            21);
}

TEST(Otlp, TheRequestCarriesTheResourceAndEverySpanField) {
  SpanData s;
  s.trace_id = NewTraceId();
  s.span_id = NewSpanId();
  s.parent = NewSpanId();
  s.parent_remote = true;
  s.tracestate = "a=1";
  s.name = "POST /embed";
  s.kind = SpanData::Kind::kServer;
  s.start = absl::FromUnixNanos(1000);
  s.end = absl::FromUnixNanos(3500);
  s.attributes = {
      {"s", std::string("v")}, {"i", int64_t{7}}, {"d", 0.5}, {"b", true}};
  s.links = {{NewTraceId(), NewSpanId()}};
  s.error = true;
  s.message = "bad";
  OtlpOptions options;
  options.service_name = "svc";
  options.service_version = "1.2";
  options.resource = {{"deployment.environment", "prod"},
                      {"service.name", "ignored"}};
  opentelemetry::proto::collector::trace::v1::ExportTraceServiceRequest r;
  ASSERT_TRUE(r.ParseFromString(SerializeExportRequest({s}, options)));
  ASSERT_EQ(r.resource_spans_size(), 1);
  const auto& resource = r.resource_spans(0).resource();
  std::map<std::string, std::string> attributes;
  for (const auto& kv : resource.attributes()) {
    attributes[kv.key()] = kv.value().string_value();
  }
  EXPECT_EQ(attributes, (std::map<std::string, std::string>{
                            {"service.name", "svc"},
                            {"service.version", "1.2"},
                            {"deployment.environment", "prod"}}));
  const auto& span = r.resource_spans(0).scope_spans(0).spans(0);
  EXPECT_EQ(span.trace_id(), std::string(s.trace_id.begin(), s.trace_id.end()));
  EXPECT_EQ(span.span_id(), std::string(s.span_id.begin(), s.span_id.end()));
  EXPECT_EQ(span.parent_span_id(),
            std::string(s.parent.begin(), s.parent.end()));
  EXPECT_EQ(span.trace_state(), "a=1");
  EXPECT_EQ(span.flags(), 0x301u);  // sampled; parent known to be remote
  EXPECT_EQ(span.kind(),
            opentelemetry::proto::trace::v1::Span::SPAN_KIND_SERVER);
  EXPECT_EQ(span.start_time_unix_nano(), 1000u);
  EXPECT_EQ(span.end_time_unix_nano(), 3500u);
  ASSERT_EQ(span.attributes_size(), 4);
  EXPECT_EQ(span.attributes(0).value().string_value(), "v");
  EXPECT_EQ(span.attributes(1).value().int_value(), 7);
  EXPECT_EQ(span.attributes(2).value().double_value(), 0.5);
  EXPECT_TRUE(span.attributes(3).value().bool_value());
  ASSERT_EQ(span.links_size(), 1);
  EXPECT_EQ(span.links(0).span_id(),
            std::string(s.links[0].span_id.begin(), s.links[0].span_id.end()));
  EXPECT_EQ(span.status().code(),
            opentelemetry::proto::trace::v1::Status::STATUS_CODE_ERROR);
  EXPECT_EQ(span.status().message(), "bad");
}

TEST(Otlp, RefusesAnUnknownProtocolAndAnEmptyEndpoint) {
  OtlpOptions o;
  o.endpoint = "http://127.0.0.1:4317";
  o.protocol = "http/json";
  EXPECT_EQ(MakeOtlpExporter(o).status().code(),
            absl::StatusCode::kInvalidArgument);
  o.protocol = "grpc";
  o.endpoint = "";
  EXPECT_EQ(MakeOtlpExporter(o).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace encoder::tracing
