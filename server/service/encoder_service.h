// The gRPC edge: validate -> enqueue -> finish, with the callback API (no
// thread waits per request). Maps every internal status to grpc::Status
// through status_util.
#ifndef ENCODER_SERVER_SERVICE_ENCODER_SERVICE_H_
#define ENCODER_SERVER_SERVICE_ENCODER_SERVICE_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "encoder/v1/encoder.grpc.pb.h"
#include "server/logging/access_log.h"
#include "server/metrics/metrics.h"
#include "server/runner/served_model.h"
#include "server/service/auth_interceptor.h"
#include "server/service/embed_request.h"
#include "server/service/tokenize_rpc.h"
#include "server/service/unread_responses.h"

namespace encoder::service {

using logging::AccessRecord;

struct DiagnoseLimits {
  int64_t max_tokens = 512;               // input length for Diagnose
  int64_t max_structure_positions = 512;  // N of Gram / bias matrices
  // Diagnose calls waiting or running, across models
  // (--max-pending-diagnose).
  int64_t max_pending = 16;
  // Longest input of the extrapolation probe (a repository entry may set
  // its own).
  int64_t max_extrapolation_tokens = 2048;
};

// Every method that takes text is registered raw (bytes in and out) so
// that malformed requests are parsed and answered by request_parser.h.
// A unary call's reactor: holds its response's unread bytes until gRPC is
// done with the call (the client took the response, or the call ended),
// and the call's access record until it is logged.
class HoldingReactor : public grpc::ServerUnaryReactor {
 public:
  HoldingReactor(grpc::CallbackServerContext* context, const char* rpc);

  grpc::CallbackServerContext* const context;
  const absl::Time start = absl::Now();
  AccessRecord access;

  void FinishHolding(const grpc::Status& status, UnreadResponses::Hold hold) {
    hold_ = std::move(hold);
    Finish(status);
  }
  void OnDone() override { delete this; }

 private:
  UnreadResponses::Hold hold_;
};

using EncoderServiceBase = v1::EncoderService::WithRawCallbackMethod_Embed<
    v1::EncoderService::WithRawCallbackMethod_EmbedStream<
        v1::EncoderService::WithRawCallbackMethod_Diagnose<
            v1::EncoderService::WithRawCallbackMethod_Tokenize<
                v1::EncoderService::WithRawCallbackMethod_Decode<
                    v1::EncoderService::WithRawCallbackMethod_ListModels<
                        v1::EncoderService::Service>>>>>>;

// What SubmitEmbed needs to know of a call, whichever front it came from.
struct EmbedCall {
  // Key of the unread-response accounting (the client's connection).
  std::string peer;
  absl::Time deadline = absl::InfiniteFuture();
  std::function<bool()> is_cancelled;  // null: never cancelled
};

class EncoderServiceImpl final : public EncoderServiceBase {
 public:
  // `metrics` must outlive the service. Until SetHost, every call fails
  // with UNAVAILABLE (models loading).
  EncoderServiceImpl(metrics::Metrics* metrics, ServiceLimits limits,
                     DiagnoseLimits diagnose_limits);
  ~EncoderServiceImpl() override;

  // Makes the loaded models available; `host` must outlive the service.
  void SetHost(runner::ModelCatalog* host) { host_.store(host); }

  // Calls must carry a token `auth` accepts (none when never set). `auth`
  // must outlive the service; set before serving.
  void SetAuth(const EdgeAuth* auth) { auth_ = auth; }

  // From now on new calls fail with UNAVAILABLE; accepted ones go on.
  void StartDraining() { draining_.store(true); }
  bool draining() const { return draining_.load(); }

  // The process can no longer serve as it should (a port stopped
  // accepting): calls go on, but health and readiness say so from now on.
  void MarkUnhealthy(std::string reason) {
    absl::MutexLock lock(&unhealthy_mu_);
    if (unhealthy_.empty()) unhealthy_ = std::move(reason);
  }
  // Why the process is unhealthy; empty while it is not.
  std::string unhealthy() const {
    absl::MutexLock lock(&unhealthy_mu_);
    return unhealthy_;
  }
  // The models, once SetHost has run; else null.
  runner::ModelCatalog* host() const { return host_.load(); }
  const ServiceLimits& limits() const { return limits_; }
  const DiagnoseLimits& diagnose_limits() const { return diagnose_limits_; }

  grpc::ServerUnaryReactor* Embed(grpc::CallbackServerContext* context,
                                  const grpc::ByteBuffer* request,
                                  grpc::ByteBuffer* response) override;
  grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* EmbedStream(
      grpc::CallbackServerContext* context) override;
  grpc::ServerUnaryReactor* ListModels(grpc::CallbackServerContext* context,
                                       const grpc::ByteBuffer* request,
                                       grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* Diagnose(grpc::CallbackServerContext* context,
                                     const grpc::ByteBuffer* request,
                                     grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* Tokenize(grpc::CallbackServerContext* context,
                                     const grpc::ByteBuffer* request,
                                     grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* Decode(grpc::CallbackServerContext* context,
                                   const grpc::ByteBuffer* request,
                                   grpc::ByteBuffer* response) override;

  // Validates `request` and queues it. `done` is called exactly once, on
  // the batcher's worker or inline on failure, with `response` filled when
  // OK. `request` and `response` must stay valid until then. Records
  // metrics for the call under `rpc`. `access`, when given, gets the model,
  // inputs, tokens, queue and inference times before `done` (it must stay
  // valid until then too); the caller logs it.
  void SubmitEmbed(const char* rpc, grpc::CallbackServerContext* context,
                   const v1::EmbedRequest* request, v1::EmbedResponse* response,
                   std::function<void(const grpc::Status&)> done,
                   AccessRecord* access = nullptr);
  // The same for any front (the HTTP front calls it): the same admission,
  // validation, limits and batcher; `done` gets the internal status (map it
  // with status_util.h).
  void SubmitEmbed(const char* rpc, EmbedCall call,
                   const v1::EmbedRequest* request, v1::EmbedResponse* response,
                   std::function<void(const absl::Status&)> done,
                   AccessRecord* access = nullptr);

  // An access record for a call of `rpc`: method, peer, the x-request-id
  // metadata when usable and a valid traceparent.
  static AccessRecord BeginAccess(const char* rpc,
                                  const grpc::CallbackServerContext* context);
  // Gives `access` a request id when it has none and sends it back as
  // x-request-id initial metadata, with the traceparent when there is one.
  // Call once per call, before its first write or Finish.
  static void EchoCallMetadata(grpc::CallbackServerContext* context,
                               AccessRecord* access);
  // Completes `access` with the call's status and time since `start`, and
  // logs it.
  static void LogCall(AccessRecord* access, const grpc::Status& status,
                      absl::Time start);

  metrics::Metrics* metrics() const { return metrics_; }

  // Counts `bytes` of a response produced for the call as unread until the
  // returned hold is released (when gRPC is done with the response).
  UnreadResponses::Hold HoldUnread(const grpc::CallbackServerContext* context,
                                   int64_t bytes) {
    return unread_.Add(context->peer(), bytes);
  }

  // Records a call that failed before it reached a model (e.g. a request
  // that does not parse) under `rpc`, as SubmitEmbed would.
  void RecordRejected(const char* rpc, const grpc::Status& status);

 private:
  // Parses a unary request, runs `run(request, host, &response)` on this
  // thread and finishes the call with the serialized response.
  template <typename Request, typename Response, typename Run>
  grpc::ServerUnaryReactor* RunInline(const char* rpc,
                                      grpc::CallbackServerContext* context,
                                      const grpc::ByteBuffer* request_bytes,
                                      grpc::ByteBuffer* response_bytes,
                                      Run run);
  // Finishes a unary reactor, recording the call's metrics.
  // With a response, its bytes count as unread until the call is done.
  void FinishUnary(HoldingReactor* reactor, const char* rpc,
                   const std::string& model, absl::Time start,
                   const grpc::Status& status,
                   UnreadResponses::Hold unread = {});
  // The host if calls may proceed; else nullptr and `*refusal` is set
  // (models loading, or draining).
  runner::ModelCatalog* Admit(grpc::Status* refusal) const;
  // OK, or UNAUTHENTICATED for a missing or refused bearer token.
  grpc::Status Authenticate(const grpc::CallbackServerContext* context) const;
  // Finishes `reactor` at once with `status` (a call refused on entry).
  void Refuse(HoldingReactor* reactor, const char* rpc,
              const grpc::Status& status);
  // Echoes the call's metadata, logs its access line and finishes it.
  void FinishLogged(HoldingReactor* reactor, const grpc::Status& status,
                    UnreadResponses::Hold unread = {});

  std::atomic<runner::ModelCatalog*> host_{nullptr};
  const EdgeAuth* auth_ = nullptr;
  metrics::Metrics* metrics_;
  const ServiceLimits limits_;
  const DiagnoseLimits diagnose_limits_;
  const TokenizeLimits tokenize_limits_;
  std::atomic<bool> draining_{false};
  mutable absl::Mutex unhealthy_mu_;
  std::string unhealthy_ ABSL_GUARDED_BY(unhealthy_mu_);
  UnreadResponses unread_;
  // Diagnose calls waiting or running (on the models' batchers), at most
  // diagnose_limits_.max_pending.
  std::atomic<int64_t> diagnose_pending_{0};
};

}  // namespace encoder::service

#endif  // ENCODER_SERVER_SERVICE_ENCODER_SERVICE_H_
