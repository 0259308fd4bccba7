#include "server/metrics/prometheus_metrics.h"

#include <prometheus/client_metric.h>
#include <prometheus/collectable.h>
#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/metric_family.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>
#include <unistd.h>

#include <cstdint>
#include <exception>
#include <fstream>
#include <iterator>
#include <mutex>
#include <set>
#include <utility>

#include "absl/status/status.h"
#include "server/common/status_macros.h"

namespace encoder::metrics {
namespace {

// Seconds, from 50 us (a queue hop on an idle server) to a minute (a large
// batch on a slow CPU).
const prometheus::Histogram::BucketBoundaries& LatencyBuckets() {
  static const auto* buckets = new prometheus::Histogram::BucketBoundaries{
      0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
      0.1,     0.25,   0.5,     1.0,    2.5,   5.0,    10.0,  30.0, 60.0};
  return *buckets;
}

// Sequences per forward pass: powers of two up to 512.
prometheus::Histogram::BucketBoundaries BatchSizeBuckets() {
  prometheus::Histogram::BucketBoundaries buckets;
  for (double b = 1; b <= 512; b *= 2) buckets.push_back(b);
  return buckets;
}

// Padded tokens per forward pass: powers of two from 16 to 128 Ki.
prometheus::Histogram::BucketBoundaries BatchTokenBuckets() {
  prometheus::Histogram::BucketBoundaries buckets;
  for (double b = 16; b <= 131072; b *= 2) buckets.push_back(b);
  return buckets;
}

// Share of a batch's padded tokens that are padding; le="0" counts batches
// with none.
prometheus::Histogram::BucketBoundaries PaddingRatioBuckets() {
  return {0.0, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95};
}

// Tokens per input: powers of two from 1 to 8192 (the longest inputs of
// common encoders are 512 to 8192 tokens).
prometheus::Histogram::BucketBoundaries InputTokenBuckets() {
  prometheus::Histogram::BucketBoundaries buckets;
  for (double b = 1; b <= 8192; b *= 2) buckets.push_back(b);
  return buckets;
}

// The reasons the batcher reports (Metrics::Dropped); their counters exist
// at zero from registration on.
constexpr const char* kDropReasons[] = {"deadline", "cancelled", "overload",
                                        "shutdown"};

bool IsCudaDevice(const std::string& device) {
  return device.rfind("cuda", 0) == 0;
}

// Resident set size of this process in bytes, 0 when unreadable.
double ResidentBytes() {
  std::ifstream statm("/proc/self/statm");
  int64_t size_pages = 0;
  int64_t resident_pages = 0;
  if (!(statm >> size_pages >> resident_pages)) return 0;
  return static_cast<double>(resident_pages) *
         static_cast<double>(sysconf(_SC_PAGESIZE));
}

// Moves a series' value into `to` and removes `from` from its family.
void MoveInto(prometheus::Family<prometheus::Counter>* family,
              prometheus::Counter* from, prometheus::Counter* to) {
  to->Increment(from->Value());
  family->Remove(from);
}

void MoveInto(prometheus::Family<prometheus::Gauge>* family,
              prometheus::Gauge* from, prometheus::Gauge* to) {
  to->Set(from->Value());
  family->Remove(from);
}

// Both histograms must have the same buckets.
void MoveInto(prometheus::Family<prometheus::Histogram>* family,
              prometheus::Histogram* from, prometheus::Histogram* to) {
  const prometheus::ClientMetric sample = from->Collect();
  std::vector<double> increments;
  std::uint64_t previous = 0;
  for (const prometheus::ClientMetric::Bucket& b : sample.histogram.bucket) {
    increments.push_back(static_cast<double>(b.cumulative_count - previous));
    previous = b.cumulative_count;
  }
  to->ObserveMultiple(increments, sample.histogram.sample_sum);
  family->Remove(from);
}

prometheus::ClientMetric GaugeSample(
    double value, std::vector<prometheus::ClientMetric::Label> labels) {
  prometheus::ClientMetric metric;
  metric.label = std::move(labels);
  metric.gauge.value = value;
  return metric;
}

prometheus::ClientMetric CounterSample(
    double value, std::vector<prometheus::ClientMetric::Label> labels) {
  prometheus::ClientMetric metric;
  metric.label = std::move(labels);
  metric.counter.value = value;
  return metric;
}

prometheus::MetricFamily Family(std::string name, std::string help,
                                prometheus::MetricType type) {
  prometheus::MetricFamily family;
  family.name = std::move(name);
  family.help = std::move(help);
  family.type = type;
  return family;
}

// The three series of the CPU buffer cache.
void AppendCpuCache(const CpuCacheSample& cache,
                    std::vector<prometheus::MetricFamily>& families) {
  prometheus::MetricFamily bytes =
      Family("encoder_cpu_buffer_cache_bytes",
             "Free CPU blocks the buffer cache holds for reuse.",
             prometheus::MetricType::Gauge);
  bytes.metric.push_back(
      GaugeSample(static_cast<double>(cache.cached_bytes), {}));
  families.push_back(std::move(bytes));
  prometheus::MetricFamily requests =
      Family("encoder_cpu_buffer_cache_requests_total",
             "Large CPU allocations, served from the cache (hit) or not.",
             prometheus::MetricType::Counter);
  requests.metric.push_back(
      CounterSample(static_cast<double>(cache.hits), {{"result", "hit"}}));
  requests.metric.push_back(
      CounterSample(static_cast<double>(cache.misses), {{"result", "miss"}}));
  families.push_back(std::move(requests));
  prometheus::MetricFamily dropped =
      Family("encoder_cpu_buffer_cache_dropped_total",
             "Free CPU blocks released to keep the cache under its cap (the "
             "ones freed longest ago first).",
             prometheus::MetricType::Counter);
  dropped.metric.push_back(
      CounterSample(static_cast<double>(cache.dropped), {}));
  families.push_back(std::move(dropped));
}

// The transport's series (see prometheus_metrics.h).
void AppendConnections(const ConnectionSample& c,
                       std::vector<prometheus::MetricFamily>& families) {
  auto counter = [&families](const char* name, const char* help, double value) {
    prometheus::MetricFamily f =
        Family(name, help, prometheus::MetricType::Counter);
    f.metric.push_back(CounterSample(value, {}));
    families.push_back(std::move(f));
  };
  if (c.http) {
    prometheus::MetricFamily open =
        Family("encoder_http_open_connections", "HTTP connections open now.",
               prometheus::MetricType::Gauge);
    open.metric.push_back(GaugeSample(static_cast<double>(c.http_open), {}));
    families.push_back(std::move(open));
    counter("encoder_http_connections_total",
            "HTTP connections accepted since start.",
            static_cast<double>(c.http_accepted));
    prometheus::MetricFamily abandoned = Family(
        "encoder_http_abandoned_requests_total",
        "HTTP requests whose answer nobody took: the client closed the "
        "connection first, or the request timeout passed (answered 504).",
        prometheus::MetricType::Counter);
    abandoned.metric.push_back(
        CounterSample(static_cast<double>(c.http_client_closed),
                      {{"reason", "client_closed"}}));
    abandoned.metric.push_back(CounterSample(
        static_cast<double>(c.http_timed_out), {{"reason", "timeout"}}));
    families.push_back(std::move(abandoned));
    counter("encoder_http_rejected_requests_total",
            "HTTP requests the HTTP layer refused itself: malformed framing, "
            "size limits, slow headers (400, 408, 413, 431, 501).",
            static_cast<double>(c.http_rejected));
  }
  counter("encoder_connections_shed_total",
          "Connections closed unaccepted while the process was out of file "
          "descriptors.",
          static_cast<double>(c.shed_for_descriptors));
  counter("encoder_accept_exhausted_total",
          "Accepts that failed for lack of file descriptors.",
          static_cast<double>(c.accept_exhausted));
  prometheus::MetricFamily up =
      Family("encoder_listener_up",
             "1 while the port accepts connections; 0 once it stopped "
             "(health is NOT_SERVING then).",
             prometheus::MetricType::Gauge);
  for (const ConnectionSample::Listener& l : c.listeners) {
    up.metric.push_back(GaugeSample(l.up ? 1 : 0, {{"listener", l.name}}));
  }
  if (!up.metric.empty()) families.push_back(std::move(up));
}

}  // namespace

// Values read at scrape time: resident memory, the CPU buffer cache and GPU
// memory.
class PrometheusMetrics::ProcessCollector : public prometheus::Collectable {
 public:
  // `owner` outlives every Collect call (its HTTP server stops first).
  explicit ProcessCollector(const PrometheusMetrics* owner) : owner_(owner) {}

  std::vector<prometheus::MetricFamily> Collect() const override {
    std::vector<prometheus::MetricFamily> families;
    prometheus::MetricFamily rss =
        Family("process_resident_memory_bytes",
               "Resident memory size in bytes.", prometheus::MetricType::Gauge);
    rss.metric.push_back(GaugeSample(ResidentBytes(), {}));
    families.push_back(std::move(rss));

    if (CpuCacheReader cache = owner_->cpu_cache_reader()) {
      AppendCpuCache(cache(), families);
    }
    if (ConnectionReader connections = owner_->connection_reader()) {
      AppendConnections(connections(), families);
    }

    GpuMemoryReader reader = owner_->gpu_reader();
    if (!reader) return families;
    prometheus::MetricFamily gpu =
        Family("encoder_gpu_memory_bytes",
               "GPU memory of a CUDA device used by the model allocator.",
               prometheus::MetricType::Gauge);
    for (const std::string& device : owner_->CudaDevices()) {
      absl::StatusOr<GpuMemory> memory = reader(device);
      if (!memory.ok()) continue;
      gpu.metric.push_back(
          GaugeSample(static_cast<double>(memory->allocated_bytes),
                      {{"device", device}, {"kind", "allocated"}}));
      gpu.metric.push_back(
          GaugeSample(static_cast<double>(memory->reserved_bytes),
                      {{"device", device}, {"kind", "reserved"}}));
    }
    if (!gpu.metric.empty()) families.push_back(std::move(gpu));
    return families;
  }

 private:
  const PrometheusMetrics* owner_;
};

std::unique_ptr<PrometheusMetrics> PrometheusMetrics::Create() {
  return std::unique_ptr<PrometheusMetrics>(new PrometheusMetrics());
}

PrometheusMetrics::PrometheusMetrics()
    : registry_(std::make_shared<prometheus::Registry>()),
      process_collector_(std::make_unique<ProcessCollector>(this)) {
  prometheus::Registry& r = *registry_;
  requests_ = &prometheus::BuildCounter()
                   .Name("encoder_requests_total")
                   .Help("Finished RPCs by method, model and gRPC code.")
                   .Register(r);
  request_duration_ =
      &prometheus::BuildHistogram()
           .Name("encoder_request_duration_seconds")
           .Help("Server-side RPC latency, receipt to response.")
           .Register(r);
  queue_duration_ = &prometheus::BuildHistogram()
                         .Name("encoder_queue_duration_seconds")
                         .Help("Time a sequence waited in the batch queue.")
                         .Register(r);
  inference_duration_ =
      &prometheus::BuildHistogram()
           .Name("encoder_inference_duration_seconds")
           .Help("Forward-pass time of the batch that held a sequence.")
           .Register(r);
  tokenization_duration_ =
      &prometheus::BuildHistogram()
           .Name("encoder_tokenization_duration_seconds")
           .Help(
               "Time a request spent being read, validated and tokenized "
               "before its sequences were queued.")
           .Register(r);
  batch_size_ = &prometheus::BuildHistogram()
                     .Name("encoder_batch_size")
                     .Help("Sequences per forward pass.")
                     .Register(r);
  batch_tokens_ = &prometheus::BuildHistogram()
                       .Name("encoder_batch_tokens")
                       .Help(
                           "Padded tokens (longest x sequences) per "
                           "forward pass.")
                       .Register(r);
  padding_ratio_ = &prometheus::BuildHistogram()
                        .Name("encoder_batch_padding_ratio")
                        .Help(
                            "Share of a forward pass's tokens that are "
                            "padding.")
                        .Register(r);
  input_tokens_ = &prometheus::BuildHistogram()
                       .Name("encoder_input_tokens")
                       .Help("Tokens per accepted input.")
                       .Register(r);
  tokens_ = &prometheus::BuildCounter()
                 .Name("encoder_tokens_total")
                 .Help("Real (unpadded) tokens run through the model.")
                 .Register(r);
  dropped_ = &prometheus::BuildCounter()
                  .Name("encoder_dropped_sequences_total")
                  .Help("Sequences dropped before compute, by reason.")
                  .Register(r);
  queue_depth_ = &prometheus::BuildGauge()
                      .Name("encoder_queue_depth")
                      .Help("Sequences waiting in the batch queue.")
                      .Register(r);
  running_batches_ = &prometheus::BuildGauge()
                          .Name("encoder_running_batches")
                          .Help(
                              "Batches of the model computing now (at most "
                              "--executions-per-model).")
                          .Register(r);
  in_flight_ = &prometheus::BuildGauge()
                    .Name("encoder_in_flight_requests")
                    .Help("RPCs started and not yet finished.")
                    .Register(r);
  unread_response_bytes_ =
      &prometheus::BuildGauge()
           .Name("encoder_unread_response_bytes")
           .Help(
               "Bytes of responses produced and not yet read by their "
               "clients.")
           .Register(r)
           .Add({});
  auto& auth = prometheus::BuildCounter()
                   .Name("encoder_auth_failures_total")
                   .Help("Calls refused for their bearer token.")
                   .Register(r);
  auth_missing_ = &auth.Add({{"reason", "missing"}});
  auth_invalid_ = &auth.Add({{"reason", "invalid"}});
  auto& spans = prometheus::BuildCounter()
                    .Name("encoder_trace_spans_total")
                    .Help(
                        "Spans the tracer exported (outcome exported) or "
                        "dropped: queue_full, export_failed, shutdown.")
                    .Register(r);
  for (const char* outcome :
       {"exported", "queue_full", "export_failed", "shutdown"}) {
    trace_spans_[outcome] = &spans.Add({{"outcome", outcome}});
  }
  model_info_ = &prometheus::BuildGauge()
                     .Name("encoder_model_info")
                     .Help("A hosted model; always 1.")
                     .Register(r);
  cpu_info_ = &prometheus::BuildGauge()
                   .Name("encoder_cpu_info")
                   .Help("The serving CPU and its detected features; 1.")
                   .Register(r);
  build_info_ = &prometheus::BuildGauge()
                     .Name("encoder_build_info")
                     .Help("The server's version and build; 1.")
                     .Register(r);
}

void PrometheusMetrics::BuildInfo(const std::string& version,
                                  const std::string& commit,
                                  const std::string& libtorch,
                                  const std::string& compiler) {
  build_info_
      ->Add({{"version", version},
             {"commit", commit},
             {"libtorch", libtorch},
             {"compiler", compiler}})
      .Set(1);
}

void PrometheusMetrics::CpuInfo(const std::string& cpu_model,
                                const std::string& features) {
  // Add returns the existing series for the same labels.
  cpu_info_->Add({{"cpu_model", cpu_model}, {"features", features}}).Set(1);
}

PrometheusMetrics::~PrometheusMetrics() = default;

std::string PrometheusMetrics::Render() const {
  std::vector<prometheus::MetricFamily> families = registry_->Collect();
  std::vector<prometheus::MetricFamily> process = process_collector_->Collect();
  families.insert(families.end(), std::make_move_iterator(process.begin()),
                  std::make_move_iterator(process.end()));
  return prometheus::TextSerializer().Serialize(families);
}

void PrometheusMetrics::SetGpuMemoryReader(GpuMemoryReader reader) {
  std::unique_lock lock(mu_);
  gpu_reader_ = std::move(reader);
}

void PrometheusMetrics::SetCpuCacheReader(CpuCacheReader reader) {
  std::unique_lock lock(mu_);
  cpu_cache_reader_ = std::move(reader);
}

void PrometheusMetrics::SetConnectionReader(ConnectionReader reader) {
  std::unique_lock lock(mu_);
  connection_reader_ = std::move(reader);
}

ConnectionReader PrometheusMetrics::connection_reader() const {
  std::shared_lock lock(mu_);
  return connection_reader_;
}

CpuCacheReader PrometheusMetrics::cpu_cache_reader() const {
  std::shared_lock lock(mu_);
  return cpu_cache_reader_;
}

GpuMemoryReader PrometheusMetrics::gpu_reader() const {
  std::shared_lock lock(mu_);
  return gpu_reader_;
}

std::vector<std::string> PrometheusMetrics::CudaDevices() const {
  std::shared_lock lock(mu_);
  std::set<std::string> devices;
  for (const auto& [name, labels] : registered_) {
    if (IsCudaDevice(labels.device)) devices.insert(labels.device);
  }
  return {devices.begin(), devices.end()};
}

void PrometheusMetrics::RegisterModel(const ModelLabels& labels) {
  std::unique_lock lock(mu_);
  registered_[labels.model] = labels;
  auto old = info_by_model_.find(labels.model);
  if (old != info_by_model_.end()) model_info_->Remove(old->second);
  prometheus::Gauge& info =
      model_info_->Add({{"model", labels.model},
                        {"scheme", labels.scheme},
                        {"device", labels.device},
                        {"dtype", labels.dtype},
                        {"d_model", std::to_string(labels.d_model)},
                        {"num_heads", std::to_string(labels.num_heads)},
                        {"num_layers", std::to_string(labels.num_layers)}});
  info.Set(1);
  info_by_model_[labels.model] = &info;
  auto entry = models_.find(labels.model);
  if (entry != models_.end() && entry->second.scheme != labels.scheme) {
    RelabelLocked(labels.model);
  }
  EntryLocked(labels.model, /*with_series=*/true);
}

PrometheusMetrics::ModelSeries& PrometheusMetrics::EntryLocked(
    const std::string& model, bool with_series) {
  auto [it, inserted] = models_.try_emplace(model);
  ModelSeries& s = it->second;
  if (inserted) {
    auto reg = registered_.find(model);
    if (reg != registered_.end()) s.scheme = reg->second.scheme;
  }
  if (!with_series || s.queue != nullptr) return s;
  const prometheus::Labels labels = {{"model", model}, {"scheme", s.scheme}};
  s.queue = &queue_duration_->Add(labels, LatencyBuckets());
  s.inference = &inference_duration_->Add(labels, LatencyBuckets());
  s.tokenization = &tokenization_duration_->Add(labels, LatencyBuckets());
  s.batch_size = &batch_size_->Add(labels, BatchSizeBuckets());
  s.batch_tokens = &batch_tokens_->Add(labels, BatchTokenBuckets());
  s.padding_ratio = &padding_ratio_->Add(labels, PaddingRatioBuckets());
  s.input_tokens = &input_tokens_->Add(labels, InputTokenBuckets());
  s.tokens = &tokens_->Add(labels);
  s.queue_depth = &queue_depth_->Add(labels);
  s.running_batches = &running_batches_->Add(labels);
  for (const char* reason : kDropReasons) DroppedLocked(s, model, reason);
  return s;
}

PrometheusMetrics::RpcSeries& PrometheusMetrics::RpcLocked(
    ModelSeries& series, const std::string& model, const std::string& rpc) {
  auto [it, inserted] = series.rpcs.try_emplace(rpc);
  if (inserted) {
    it->second.duration = &request_duration_->Add(
        {{"rpc", rpc}, {"model", model}, {"scheme", series.scheme}},
        LatencyBuckets());
  }
  return it->second;
}

prometheus::Counter& PrometheusMetrics::RequestsLocked(
    RpcSeries& series, const ModelSeries& model_series,
    const std::string& model, const std::string& rpc, const std::string& code) {
  auto [it, inserted] = series.by_code.try_emplace(code, nullptr);
  if (inserted) {
    it->second = &requests_->Add({{"rpc", rpc},
                                  {"model", model},
                                  {"scheme", model_series.scheme},
                                  {"code", code}});
  }
  return *it->second;
}

prometheus::Counter& PrometheusMetrics::DroppedLocked(
    ModelSeries& series, const std::string& model, const std::string& reason) {
  auto [it, inserted] = series.dropped.try_emplace(reason, nullptr);
  if (inserted) {
    it->second = &dropped_->Add(
        {{"model", model}, {"scheme", series.scheme}, {"reason", reason}});
  }
  return *it->second;
}

void PrometheusMetrics::RelabelLocked(const std::string& model) {
  auto node = models_.extract(model);
  ModelSeries& old = node.mapped();
  ModelSeries& fresh = EntryLocked(model, old.queue != nullptr);
  if (old.queue != nullptr) {
    MoveInto(queue_duration_, old.queue, fresh.queue);
    MoveInto(inference_duration_, old.inference, fresh.inference);
    MoveInto(tokenization_duration_, old.tokenization, fresh.tokenization);
    MoveInto(batch_size_, old.batch_size, fresh.batch_size);
    MoveInto(batch_tokens_, old.batch_tokens, fresh.batch_tokens);
    MoveInto(padding_ratio_, old.padding_ratio, fresh.padding_ratio);
    MoveInto(input_tokens_, old.input_tokens, fresh.input_tokens);
    MoveInto(tokens_, old.tokens, fresh.tokens);
    MoveInto(queue_depth_, old.queue_depth, fresh.queue_depth);
    MoveInto(running_batches_, old.running_batches, fresh.running_batches);
  }
  for (const auto& [reason, counter] : old.dropped) {
    MoveInto(dropped_, counter, &DroppedLocked(fresh, model, reason));
  }
  for (const auto& [rpc, series] : old.rpcs) {
    RpcSeries& moved = RpcLocked(fresh, model, rpc);
    MoveInto(request_duration_, series.duration, moved.duration);
    for (const auto& [code, counter] : series.by_code) {
      MoveInto(requests_, counter,
               &RequestsLocked(moved, fresh, model, rpc, code));
    }
  }
}

template <typename F>
void PrometheusMetrics::WithModel(const std::string& model, F&& f) {
  {
    std::shared_lock lock(mu_);
    auto it = models_.find(model);
    if (it != models_.end() && it->second.queue != nullptr) {
      f(it->second);
      return;
    }
  }
  std::unique_lock lock(mu_);
  f(EntryLocked(model, /*with_series=*/true));
}

void PrometheusMetrics::RequestDone(const std::string& rpc,
                                    const std::string& model,
                                    const std::string& code, double seconds) {
  {
    std::shared_lock lock(mu_);
    auto m = models_.find(model);
    if (m != models_.end()) {
      auto r = m->second.rpcs.find(rpc);
      if (r != m->second.rpcs.end()) {
        auto c = r->second.by_code.find(code);
        if (c != r->second.by_code.end()) {
          c->second->Increment();
          r->second.duration->Observe(seconds);
          return;
        }
      }
    }
  }
  std::unique_lock lock(mu_);
  ModelSeries& m = EntryLocked(model, /*with_series=*/false);
  RpcSeries& r = RpcLocked(m, model, rpc);
  RequestsLocked(r, m, model, rpc, code).Increment();
  r.duration->Observe(seconds);
}

void PrometheusMetrics::Tokenization(const std::string& model, double seconds) {
  WithModel(model, [&](ModelSeries& s) { s.tokenization->Observe(seconds); });
}

void PrometheusMetrics::SequenceTimes(const std::string& model,
                                      double queue_seconds,
                                      double inference_seconds) {
  WithModel(model, [&](ModelSeries& s) {
    s.queue->Observe(queue_seconds);
    s.inference->Observe(inference_seconds);
  });
}

void PrometheusMetrics::Batch(const std::string& model, int64_t sequences,
                              int64_t padded_tokens, int64_t real_tokens) {
  const double padding =
      padded_tokens > 0
          ? static_cast<double>(padded_tokens - real_tokens) / padded_tokens
          : 0.0;
  WithModel(model, [&](ModelSeries& s) {
    s.batch_size->Observe(static_cast<double>(sequences));
    s.batch_tokens->Observe(static_cast<double>(padded_tokens));
    s.padding_ratio->Observe(padding);
    s.tokens->Increment(static_cast<double>(real_tokens));
  });
}

void PrometheusMetrics::InputTokens(const std::string& model, int64_t tokens) {
  WithModel(model, [&](ModelSeries& s) {
    s.input_tokens->Observe(static_cast<double>(tokens));
  });
}

void PrometheusMetrics::Dropped(const std::string& model,
                                const std::string& reason, int64_t sequences) {
  {
    std::shared_lock lock(mu_);
    auto m = models_.find(model);
    if (m != models_.end() && m->second.queue != nullptr) {
      auto d = m->second.dropped.find(reason);
      if (d != m->second.dropped.end()) {
        d->second->Increment(static_cast<double>(sequences));
        return;
      }
    }
  }
  std::unique_lock lock(mu_);
  DroppedLocked(EntryLocked(model, /*with_series=*/true), model, reason)
      .Increment(static_cast<double>(sequences));
}

void PrometheusMetrics::QueueDepth(const std::string& model,
                                   int64_t sequences) {
  WithModel(model, [&](ModelSeries& s) {
    s.queue_depth->Set(static_cast<double>(sequences));
  });
}

void PrometheusMetrics::RunningBatches(const std::string& model,
                                       int64_t batches) {
  WithModel(model, [&](ModelSeries& s) {
    s.running_batches->Set(static_cast<double>(batches));
  });
}

void PrometheusMetrics::InFlight(const std::string& rpc, int delta) {
  {
    std::shared_lock lock(mu_);
    auto it = in_flight_by_rpc_.find(rpc);
    if (it != in_flight_by_rpc_.end()) {
      it->second->Increment(static_cast<double>(delta));
      return;
    }
  }
  std::unique_lock lock(mu_);
  auto [it, inserted] = in_flight_by_rpc_.try_emplace(rpc, nullptr);
  if (inserted) it->second = &in_flight_->Add({{"rpc", rpc}});
  it->second->Increment(static_cast<double>(delta));
}

void PrometheusMetrics::AuthFailure(const std::string& reason) {
  (reason == "missing" ? auth_missing_ : auth_invalid_)->Increment();
}

void PrometheusMetrics::TraceSpans(const std::string& outcome, int64_t spans) {
  auto it = trace_spans_.find(outcome);
  if (it != trace_spans_.end()) {
    it->second->Increment(static_cast<double>(spans));
  }
}

void PrometheusMetrics::UnreadResponseBytes(int64_t bytes) {
  unread_response_bytes_->Set(static_cast<double>(bytes));
}

}  // namespace encoder::metrics
