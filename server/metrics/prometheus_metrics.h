// Metrics backed by prometheus-cpp and served as text at /metrics (see
// MetricsHttpServer).
//
// Exported series (model-scoped series also carry `scheme`, the positional
// scheme the model was registered with; empty when the model is unknown):
//   encoder_requests_total{rpc,model,scheme,code}            counter
//   encoder_request_duration_seconds{rpc,model,scheme}       histogram
//   encoder_queue_duration_seconds{model,scheme}             histogram
//   encoder_inference_duration_seconds{model,scheme}         histogram
//   encoder_tokenization_duration_seconds{model,scheme}      histogram, per
//                                                            request
//   encoder_batch_size{model,scheme}                         histogram, seqs
//   encoder_batch_tokens{model,scheme}                       histogram, padded
//   encoder_batch_padding_ratio{model,scheme}                histogram, [0, 1]
//   encoder_input_tokens{model,scheme}                       histogram, tokens
//       of each accepted input; buckets 1, 2, 4, ..., 8192
//   encoder_tokens_total{model,scheme}                       counter, real
//   encoder_dropped_sequences_total{model,scheme,reason}     counter
//   encoder_queue_depth{model,scheme}                        gauge, seqs
//   encoder_running_batches{model,scheme}                    gauge, batches
//       computing now (up to --executions-per-model)
//   encoder_in_flight_requests{rpc}                          gauge
//   encoder_auth_failures_total{reason}                      counter,
//       calls refused for their bearer token; reason: missing | invalid
//   encoder_trace_spans_total{outcome}                       counter, spans
//       the tracer exported or dropped (Metrics::TraceSpans)
//   encoder_model_info{model,scheme,device,dtype,d_model,num_heads,
//                      num_layers}                           gauge, always 1
//   encoder_build_info{version,commit,libtorch,compiler}     gauge, always 1
//   process_resident_memory_bytes                            gauge, at scrape
//   encoder_gpu_memory_bytes{device,kind}                    gauge, at scrape,
//       only for CUDA devices of registered models and only once a
//       GpuMemoryReader is set; kind: allocated | reserved.
//   encoder_cpu_buffer_cache_bytes                           gauge, at scrape,
//       free CPU blocks the buffer cache holds for reuse (part of the
//       resident memory, bounded by --cpu-buffer-cache-bytes)
//   encoder_cpu_buffer_cache_requests_total{result}          counter, at
//       scrape; large CPU allocations, result: hit | miss
//   encoder_cpu_buffer_cache_dropped_total                   counter, at
//       scrape; free blocks released to keep the cache under its cap
//       (the three cache series exist once a CpuCacheReader is set)
//   encoder_http_open_connections                            gauge, at scrape
//   encoder_http_connections_total                           counter
//   encoder_http_abandoned_requests_total{reason}            counter,
//       requests whose answer nobody took: client_closed | timeout
//   encoder_http_rejected_requests_total                     counter,
//       requests the HTTP layer refused itself (framing, size limits, slow
//       headers: 400, 408, 413, 431, 501)
//       (the four HTTP series exist once a ConnectionReader reports HTTP)
//   encoder_connections_shed_total                          counter,
//       connections closed unaccepted while out of file descriptors
//   encoder_accept_exhausted_total                           counter,
//       accepts that failed for lack of file descriptors
//   encoder_listener_up{listener}                            gauge, 1 while
//       the port (grpc, http, health) accepts connections; 0 once it has
//       stopped (health is NOT_SERVING then)
//       (these three exist once a ConnectionReader is set)
// `rpc` names the front and the call: the gRPC method ("Embed",
// "EmbedStream", "ListModels", ...) or, for the HTTP front, "http:" and the
// route ("http:/v1/embeddings"), so that both fronts' traffic and errors
// are counted apart in the same series.
// Every per-model series (histograms at zero, the dropped counter for each
// known reason) exists from RegisterModel on, so rates and ratios have data
// before the first request.
#ifndef ENCODER_SERVER_METRICS_PROMETHEUS_METRICS_H_
#define ENCODER_SERVER_METRICS_PROMETHEUS_METRICS_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
#include "server/metrics/metrics.h"

namespace prometheus {
class Counter;
class Gauge;
class Histogram;
class Registry;
template <typename T>
class Family;
}  // namespace prometheus

namespace encoder::metrics {

// Memory on one CUDA device as its allocator reports it, in bytes.
struct GpuMemory {
  int64_t allocated_bytes = 0;  // held by live tensors
  int64_t reserved_bytes = 0;   // held by the caching allocator
};

// Reads the memory of one device, named as in ModelLabels::device
// ("cuda", "cuda:1"). Called on a scrape thread: must be thread-safe. An
// error skips that device for the scrape.
using GpuMemoryReader =
    std::function<absl::StatusOr<GpuMemory>(const std::string& device)>;

// The CPU buffer cache's state, as the allocator reports it.
struct CpuCacheSample {
  int64_t cached_bytes = 0;  // free blocks held now
  int64_t hits = 0;          // large allocations served from the cache
  int64_t misses = 0;        // large allocations that went to the system
  int64_t dropped = 0;       // free blocks released to stay under the cap
};

// Reads the cache; called on a scrape thread, must be thread-safe.
using CpuCacheReader = std::function<CpuCacheSample()>;

// The transport's counts, read at scrape time.
struct ConnectionSample {
  bool http = false;  // an HTTP port exists: its series are exported
  int64_t http_open = 0;
  int64_t http_accepted = 0;
  int64_t http_client_closed = 0;
  int64_t http_timed_out = 0;
  int64_t http_rejected = 0;
  int64_t shed_for_descriptors = 0;
  int64_t accept_exhausted = 0;
  struct Listener {
    std::string name;
    bool up = true;
  };
  std::vector<Listener> listeners;
};

// Called on a scrape thread; must be thread-safe.
using ConnectionReader = std::function<ConnectionSample()>;

// Thread-safe. Series pointers are created once per label set and cached,
// so the hot-path calls take a shared lock, find their series in small
// hash maps and touch only atomics (counters, gauges) or one short
// per-histogram lock.
class PrometheusMetrics : public Metrics {
 public:
  // The caller serves Render() (the HTTP front at /metrics,
  // http::MetricsHttpServer): this library has no endpoint of its own.
  static std::unique_ptr<PrometheusMetrics> Create();
  ~PrometheusMetrics() override;

  PrometheusMetrics(const PrometheusMetrics&) = delete;
  PrometheusMetrics& operator=(const PrometheusMetrics&) = delete;

  // The exposition text of every series. Thread-safe.
  std::string Render() const;

  // Installs the source of encoder_gpu_memory_bytes (the caller owns the
  // CUDA runtime; this library does not link one). Replaces any earlier
  // reader.
  void SetGpuMemoryReader(GpuMemoryReader reader);
  // Installs the source of the encoder_cpu_buffer_cache_* series (the
  // allocator lives in the runner, which this library does not link).
  void SetCpuCacheReader(CpuCacheReader reader);
  // Installs the source of the connection and listener series (the
  // transports live outside this library).
  void SetConnectionReader(ConnectionReader reader);

  // Registers a model: its info series (replacing the one of an earlier
  // registration under the same name) and every per-model series. Series
  // reported before registration (a batcher starting while the next model
  // loads) are moved, with their values, to the registered scheme label.
  void RegisterModel(const ModelLabels& labels) override;
  void RequestDone(const std::string& rpc, const std::string& model,
                   const std::string& code, double seconds) override;
  void Tokenization(const std::string& model, double seconds) override;
  void SequenceTimes(const std::string& model, double queue_seconds,
                     double inference_seconds) override;
  void Batch(const std::string& model, int64_t sequences, int64_t padded_tokens,
             int64_t real_tokens) override;
  void Dropped(const std::string& model, const std::string& reason,
               int64_t sequences) override;
  void QueueDepth(const std::string& model, int64_t sequences) override;
  void RunningBatches(const std::string& model, int64_t batches) override;
  void InFlight(const std::string& rpc, int delta) override;
  void AuthFailure(const std::string& reason) override;
  void TraceSpans(const std::string& outcome, int64_t spans) override;
  void UnreadResponseBytes(int64_t bytes) override;
  void CpuInfo(const std::string& cpu_model,
               const std::string& features) override;
  void InputTokens(const std::string& model, int64_t tokens) override;
  void BuildInfo(const std::string& version, const std::string& commit,
                 const std::string& libtorch,
                 const std::string& compiler) override;

 private:
  class ProcessCollector;

  // One rpc of one model.
  struct RpcSeries {
    prometheus::Histogram* duration = nullptr;
    std::unordered_map<std::string, prometheus::Counter*> by_code;
  };
  // Every series keyed by one model name.
  struct ModelSeries {
    std::string scheme;
    prometheus::Histogram* queue = nullptr;
    prometheus::Histogram* inference = nullptr;
    prometheus::Histogram* tokenization = nullptr;
    prometheus::Histogram* batch_size = nullptr;
    prometheus::Histogram* batch_tokens = nullptr;
    prometheus::Histogram* padding_ratio = nullptr;
    prometheus::Histogram* input_tokens = nullptr;
    prometheus::Counter* tokens = nullptr;
    prometheus::Gauge* queue_depth = nullptr;
    prometheus::Gauge* running_batches = nullptr;
    std::unordered_map<std::string, prometheus::Counter*> dropped;
    std::unordered_map<std::string, RpcSeries> rpcs;
  };

  PrometheusMetrics();

  // Calls f(ModelSeries&) for the model's series, creating them on first
  // use; f runs under mu_ (shared or exclusive).
  template <typename F>
  void WithModel(const std::string& model, F&& f);

  // Require mu_ held exclusively. EntryLocked returns the model's entry,
  // creating its per-model series when `with_series` (an entry made only
  // for request series, such as the one for an empty model name, has
  // none). The others return or create the series for one label set.
  ModelSeries& EntryLocked(const std::string& model, bool with_series);
  RpcSeries& RpcLocked(ModelSeries& series, const std::string& model,
                       const std::string& rpc);
  prometheus::Counter& RequestsLocked(RpcSeries& series,
                                      const ModelSeries& model_series,
                                      const std::string& model,
                                      const std::string& rpc,
                                      const std::string& code);
  prometheus::Counter& DroppedLocked(ModelSeries& series,
                                     const std::string& model,
                                     const std::string& reason);
  // Requires mu_ held exclusively. Moves the model's series, values
  // included, to new ones labelled with its registered scheme and removes
  // the old ones (made by reports that came before RegisterModel).
  void RelabelLocked(const std::string& model);

  // Distinct CUDA devices among registered models, and the reader.
  std::vector<std::string> CudaDevices() const;
  GpuMemoryReader gpu_reader() const;
  CpuCacheReader cpu_cache_reader() const;
  ConnectionReader connection_reader() const;

  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Counter>* requests_;
  prometheus::Family<prometheus::Histogram>* request_duration_;
  prometheus::Family<prometheus::Histogram>* queue_duration_;
  prometheus::Family<prometheus::Histogram>* inference_duration_;
  prometheus::Family<prometheus::Histogram>* tokenization_duration_;
  prometheus::Family<prometheus::Histogram>* batch_size_;
  prometheus::Family<prometheus::Histogram>* batch_tokens_;
  prometheus::Family<prometheus::Histogram>* padding_ratio_;
  prometheus::Family<prometheus::Histogram>* input_tokens_;
  prometheus::Family<prometheus::Counter>* tokens_;
  prometheus::Family<prometheus::Counter>* dropped_;
  prometheus::Family<prometheus::Gauge>* queue_depth_;
  prometheus::Family<prometheus::Gauge>* running_batches_;
  prometheus::Family<prometheus::Gauge>* in_flight_;
  prometheus::Gauge* unread_response_bytes_ = nullptr;
  prometheus::Counter* auth_missing_;
  prometheus::Counter* auth_invalid_;
  // encoder_trace_spans_total by outcome.
  std::map<std::string, prometheus::Counter*> trace_spans_;
  prometheus::Family<prometheus::Gauge>* model_info_;
  prometheus::Family<prometheus::Gauge>* cpu_info_;
  prometheus::Family<prometheus::Gauge>* build_info_;

  // Guards the maps below and the readers. The series they point to are
  // owned by registry_; they are updated under a shared lock, so that
  // RelabelLocked (exclusive) can remove series no one is using.
  mutable std::shared_mutex mu_;
  std::unordered_map<std::string, ModelSeries> models_;
  std::unordered_map<std::string, prometheus::Gauge*> in_flight_by_rpc_;
  std::map<std::string, ModelLabels> registered_;
  std::map<std::string, prometheus::Gauge*> info_by_model_;
  GpuMemoryReader gpu_reader_;
  CpuCacheReader cpu_cache_reader_;
  ConnectionReader connection_reader_;

  std::unique_ptr<ProcessCollector> process_collector_;
};

}  // namespace encoder::metrics

#endif  // ENCODER_SERVER_METRICS_PROMETHEUS_METRICS_H_
