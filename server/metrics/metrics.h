// The metrics the service and batcher report. An interface so that unit
// tests use NoopMetrics and the server a Prometheus-backed implementation.
// All methods are thread-safe and cheap (called on hot paths).
#ifndef ENCODER_SERVER_METRICS_METRICS_H_
#define ENCODER_SERVER_METRICS_METRICS_H_

#include <cstdint>
#include <memory>
#include <string>

namespace encoder::metrics {

// Static facts about a hosted model, exported as an info gauge.
struct ModelLabels {
  std::string model;
  std::string scheme;
  std::string device;
  std::string dtype;  // the precision: float32, float16, bfloat16, int8
  int64_t d_model = 0;
  int64_t num_heads = 0;
  int64_t num_layers = 0;
};

class Metrics {
 public:
  virtual ~Metrics() = default;

  virtual void RegisterModel(const ModelLabels& labels) = 0;

  // One finished RPC. code: the gRPC code name ("OK", "INVALID_ARGUMENT").
  // model may be empty when the request named no valid model.
  virtual void RequestDone(const std::string& rpc, const std::string& model,
                           const std::string& code, double seconds) = 0;

  // One sequence's time in the queue and in its forward pass.
  virtual void SequenceTimes(const std::string& model, double queue_seconds,
                             double inference_seconds) = 0;

  // One request's preparation before its sequences were queued: reading,
  // validating and tokenizing its inputs.
  virtual void Tokenization(const std::string& model, double seconds) = 0;

  // One forward pass: sequences, padded tokens (longest x count) and real
  // tokens.
  virtual void Batch(const std::string& model, int64_t sequences,
                     int64_t padded_tokens, int64_t real_tokens) = 0;

  // Sequences dropped before compute. reason: deadline | cancelled |
  // overload | shutdown.
  virtual void Dropped(const std::string& model, const std::string& reason,
                       int64_t sequences) = 0;

  virtual void QueueDepth(const std::string& model, int64_t sequences) = 0;
  // Batches of the model computing now.
  virtual void RunningBatches(const std::string& model, int64_t batches) = 0;
  // +1 when an RPC starts, -1 when it finishes.
  virtual void InFlight(const std::string& rpc, int delta) = 0;

  // The serving CPU's model name and detected features (comma-separated),
  // exported once as an info gauge.
  virtual void CpuInfo(const std::string& cpu_model,
                       const std::string& features) {
    (void)cpu_model;
    (void)features;
  }

  // A call refused for its bearer token. reason: missing | invalid.
  virtual void AuthFailure(const std::string& reason) { (void)reason; }

  // Spans the tracer handled. outcome: exported | queue_full (dropped:
  // the export queue was full) | export_failed (dropped: the collector
  // refused them or did not answer in time) | shutdown (dropped: still
  // queued when the drain's export time ran out).
  virtual void TraceSpans(const std::string& outcome, int64_t spans) {
    (void)outcome;
    (void)spans;
  }

  // Bytes of responses produced and not yet read by their clients.
  virtual void UnreadResponseBytes(int64_t bytes) { (void)bytes; }

  // The length in tokens of one input accepted for `model` (after
  // truncation and special tokens), reported once per input.
  virtual void InputTokens(const std::string& model, int64_t tokens) {
    (void)model;
    (void)tokens;
  }

  // The server's build, exported once as an info gauge.
  virtual void BuildInfo(const std::string& version, const std::string& commit,
                         const std::string& libtorch,
                         const std::string& compiler) {
    (void)version;
    (void)commit;
    (void)libtorch;
    (void)compiler;
  }
};

// Does nothing; for tests and for servers run without --metrics-listen.
class NoopMetrics : public Metrics {
 public:
  void RegisterModel(const ModelLabels&) override {}
  void RequestDone(const std::string&, const std::string&, const std::string&,
                   double) override {}
  void SequenceTimes(const std::string&, double, double) override {}
  void Tokenization(const std::string&, double) override {}
  void Batch(const std::string&, int64_t, int64_t, int64_t) override {}
  void Dropped(const std::string&, const std::string&, int64_t) override {}
  void QueueDepth(const std::string&, int64_t) override {}
  void RunningBatches(const std::string&, int64_t) override {}
  void InFlight(const std::string&, int) override {}
};

}  // namespace encoder::metrics

#endif  // ENCODER_SERVER_METRICS_METRICS_H_
