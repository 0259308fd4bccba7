// The front-neutral core: what every front (gRPC, HTTP, a test's fake one)
// calls with plain C++ types. It owns admission (models loading, draining),
// the limits, the unread-response ledger, the Diagnose queue bound, metrics
// per call and the access record's counts. A front authenticates, parses
// its wire format into a query, calls the core, and renders the answer or
// the absl::Status into its own wire format; nothing else.
//
//   front      ->  Call + EmbedQuery  ->  Inference::Embed
//                                           PrepareEmbed (validate, price)
//                                           ledger reserve
//                                           ServedModel::Embed (batcher)
//   front      <-  absl::StatusOr<EmbedAnswer>  (on a batcher thread)
#ifndef ENCODER_SERVER_CORE_INFERENCE_H_
#define ENCODER_SERVER_CORE_INFERENCE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/api/diagnose_report.h"
#include "server/api/served_model.h"
#include "server/core/diagnose_request.h"
#include "server/core/embed_request.h"
#include "server/core/score_request.h"
#include "server/core/unread_responses.h"
#include "server/logging/access_log.h"
#include "server/metrics/metrics.h"

namespace encoder::core {

// What the core needs to know of a call, whichever front it came from.
struct Call {
  // The metrics label ("Embed", "http:/v1/embeddings").
  const char* rpc = "";
  // Key of the unread-response ledger: the client's connection.
  std::string peer;
  absl::Time deadline = absl::InfiniteFuture();
  // Polled while the work waits and runs; null: never cancelled.
  // Thread-safe, must not throw.
  std::function<bool()> is_cancelled;
  // When set, gets the model, inputs, tokens, queue and inference times
  // before the call's `done` runs; must stay valid until then. The front
  // logs it.
  logging::AccessRecord* access = nullptr;
};

// A Diagnose call's report with what produced it.
struct DiagnoseAnswer {
  const api::ServedModel* model = nullptr;
  api::DiagnoseOptions options;
  api::DiagnoseReport report;
  // The probe's longest input for this model (MaxExtrapolationTokens).
  int64_t max_extrapolation_tokens = 0;
};

class Inference {
 public:
  // `metrics` must outlive the core. Until SetHost, calls fail with
  // UNAVAILABLE (models loading). limits.max_extrapolation_tokens is taken
  // from diagnose_limits.
  Inference(metrics::Metrics* metrics, ServiceLimits limits,
            DiagnoseLimits diagnose_limits);

  Inference(const Inference&) = delete;
  Inference& operator=(const Inference&) = delete;

  // Makes the loaded models available; `host` must outlive the core.
  void SetHost(api::ModelCatalog* host) { host_.store(host); }
  // The models, once SetHost has run; else null.
  api::ModelCatalog* host() const { return host_.load(); }

  // From now on new calls fail with UNAVAILABLE; accepted ones go on.
  void StartDraining() { draining_.store(true); }
  bool draining() const { return draining_.load(); }

  // What start-up is doing before the models are set: "downloading" (with
  // `detail`: which model, how far) or "loading" (the default). Readiness
  // reports it until SetHost.
  void SetStartupState(std::string state, std::string detail);
  std::pair<std::string, std::string> startup_state() const;

  // The process can no longer serve as it should (a port stopped
  // accepting): calls go on, but health and readiness say so from now on.
  void MarkUnhealthy(std::string reason);
  // Why the process is unhealthy; empty while it is not.
  std::string unhealthy() const;

  const ServiceLimits& limits() const { return limits_; }
  const DiagnoseLimits& diagnose_limits() const { return diagnose_limits_; }
  metrics::Metrics* metrics() const { return metrics_; }

  // The models if a call may proceed now; else UNAVAILABLE (loading or
  // draining). With a peer, also RESOURCE_EXHAUSTED while the peer's (or
  // the server's) unread responses are over their limit.
  absl::StatusOr<const api::ModelCatalog*> Admit() const;
  absl::StatusOr<const api::ModelCatalog*> Admit(const std::string& peer) const;

  // Validates `query` against the model and the limits and queues its
  // inputs on the model's batcher. `done` runs exactly once: on a batcher
  // thread with the answer, or inline with the refusal. Records the call's
  // metrics under call.rpc. The answer's response bytes are held on the
  // ledger until `done` runs; the front then counts what it serialized
  // (HoldUnread).
  void Embed(Call call, EmbedQuery query,
             std::function<void(absl::StatusOr<EmbedAnswer>)> done);

  // Classify and Rerank: the model's classification head on each item (a
  // text or a text pair), through the same admission, ledger, batcher and
  // metrics as Embed. `done` as Embed's.
  void Score(Call call, ScoreQuery query,
             std::function<void(absl::StatusOr<ScoreAnswer>)> done);

  // Admits, finds the query's model, validates the query and builds the
  // probes' options (BuildDiagnoseOptions), prices the largest forward
  // pass against the batch memory budget, bounds the calls waiting or
  // running (DiagnoseLimits::max_pending) and queues the probes on the
  // model's batcher. Once the report is there, `render` turns it into the
  // front's response (on a batcher thread) and may still fail the call (a
  // report over the send limit); then the call's metrics are recorded and
  // `done` gets the final status. On a refusal `render` is not called and
  // `done` runs inline.
  void Diagnose(Call call, const std::string& model, DiagnoseQuery query,
                std::function<absl::Status(DiagnoseAnswer)> render,
                std::function<void(const absl::Status&)> done);

  // For calls a front answers itself (model lists, tokenizing): counts the
  // call in flight, and then its outcome under `model` ("" for none).
  void BeginCall(const char* rpc);
  void EndCall(const char* rpc, const std::string& model,
               const absl::Status& status, absl::Time start);
  // A call refused before it was admitted (authentication, a request that
  // does not parse): counted under `rpc`, never in flight.
  void RecordRejected(const char* rpc, const absl::Status& status);

  // Counts `bytes` of a response produced for `peer` as unread until the
  // returned hold is released (when the front is done sending it).
  UnreadResponses::Hold HoldUnread(const std::string& peer, int64_t bytes) {
    return unread_.Add(peer, bytes);
  }

 private:
  // The served name `requested` resolves to, for the metrics label; "" when
  // unknown or before the models are set.
  std::string LabelOf(const std::string& requested) const;
  // Reports a prepared call's tokenization time and input tokens.
  void RecordPrepared(const std::string& model,
                      const std::vector<api::EmbedSpec>& sequences,
                      double tokenization_ms, logging::AccessRecord* access);
  // One of the --max-pending-diagnose places, or RESOURCE_EXHAUSTED.
  absl::Status TakeDiagnoseSlot();

  // Embed's and Score's common path: admit, prepare (validate, price),
  // reserve the response on the ledger, queue the sequences, build the
  // answer from the results.
  template <typename Prepared, typename Answer>
  void Run(
      Call call, const std::string& requested, int64_t inputs,
      std::string request_id,
      const std::function<absl::StatusOr<Prepared>(const api::ModelCatalog&)>&
          prepare,
      const std::function<int64_t(const Prepared&)>& estimate,
      std::function<Answer(std::string, const Prepared&,
                           std::vector<api::EmbedResult>, double)>
          build,
      std::function<void(absl::StatusOr<Answer>)> done);

  std::atomic<api::ModelCatalog*> host_{nullptr};
  metrics::Metrics* const metrics_;
  const ServiceLimits limits_;
  const DiagnoseLimits diagnose_limits_;
  std::atomic<bool> draining_{false};
  mutable absl::Mutex unhealthy_mu_;
  std::string unhealthy_ ABSL_GUARDED_BY(unhealthy_mu_);
  std::string startup_state_ ABSL_GUARDED_BY(unhealthy_mu_) = "loading";
  std::string startup_detail_ ABSL_GUARDED_BY(unhealthy_mu_);
  mutable UnreadResponses unread_;
  // Diagnose calls waiting or running (on the models' batchers), at most
  // diagnose_limits_.max_pending.
  std::atomic<int64_t> diagnose_pending_{0};
};

}  // namespace encoder::core

#endif  // ENCODER_SERVER_CORE_INFERENCE_H_
