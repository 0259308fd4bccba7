// The gRPC front: reactors on the callback API (no thread waits per
// request) that authenticate, parse, call the core (core/inference.h) and
// finish with the serialized response or the status mapped by
// status_util.h. Validation, admission, limits and metrics are the core's.
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
#include "server/core/inference.h"
#include "server/core/unread_responses.h"
#include "server/logging/access_log.h"
#include "server/metrics/metrics.h"
#include "server/service/auth_interceptor.h"
#include "server/service/tokenize_rpc.h"

namespace encoder::service {

using logging::AccessRecord;

using core::DiagnoseLimits;
using core::ServiceLimits;
using core::UnreadLimits;
using core::UnreadResponses;

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
                        v1::EncoderService::WithRawCallbackMethod_Rerank<
                            v1::EncoderService::WithRawCallbackMethod_Classify<
                                v1::EncoderService::
                                    WithRawCallbackMethod_EmbedSparse<
                                        v1::EncoderService::Service>>>>>>>>>;

class EncoderServiceImpl final : public EncoderServiceBase {
 public:
  // `core` must outlive the service.
  explicit EncoderServiceImpl(core::Inference* core) : core_(core) {}
  ~EncoderServiceImpl() override;

  // Calls must carry a token `auth` accepts (none when never set). `auth`
  // must outlive the service; set before serving.
  void SetAuth(const EdgeAuth* auth) { auth_ = auth; }

  core::Inference* core() const { return core_; }

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
  grpc::ServerUnaryReactor* Rerank(grpc::CallbackServerContext* context,
                                   const grpc::ByteBuffer* request,
                                   grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* Classify(grpc::CallbackServerContext* context,
                                     const grpc::ByteBuffer* request,
                                     grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* EmbedSparse(grpc::CallbackServerContext* context,
                                        const grpc::ByteBuffer* request,
                                        grpc::ByteBuffer* response) override;

  // Parses an EmbedRequest, maps it to the core's query and queues it.
  // `done` is called exactly once, on a batcher thread or inline on
  // failure, with `response` filled when OK; `request` and `response` must
  // stay valid until then. `access` gets the call's counts before `done`.
  // `timing_metadata`: the answer's times also go in the call's trailing
  // metadata (a unary call's; a stream's items carry them in each
  // response's timing alone).
  void SubmitEmbed(const char* rpc, grpc::CallbackServerContext* context,
                   v1::EmbedRequest* request, v1::EmbedResponse* response,
                   std::function<void(const grpc::Status&)> done,
                   AccessRecord* access, bool timing_metadata = false);

  // The core's description of the call: peer, deadline and cancellation
  // from `context`.
  static core::Call CallOf(const char* rpc,
                           grpc::CallbackServerContext* context,
                           AccessRecord* access);

  // An access record for a call of `rpc`: method, peer, the x-request-id
  // metadata when usable and a valid traceparent.
  static AccessRecord BeginAccess(const char* rpc,
                                  const grpc::CallbackServerContext* context);
  // Gives `access` a request id when it has none and sends it back as
  // x-request-id metadata, with the traceparent when there is one: initial
  // metadata, or with `trailing` the trailers (a call refused before any
  // message: its answer is then trailers-only, so clients may retry it).
  // Call once per call, before its first write or Finish.
  static void EchoCallMetadata(grpc::CallbackServerContext* context,
                               AccessRecord* access, bool trailing = false);
  // Completes `access` with the call's status and time since `start`, and
  // logs it.
  static void LogCall(AccessRecord* access, const grpc::Status& status,
                      absl::Time start);

  // Counts `bytes` of a response produced for the call as unread until the
  // returned hold is released (when gRPC is done with the response).
  UnreadResponses::Hold HoldUnread(const grpc::CallbackServerContext* context,
                                   int64_t bytes) {
    return core_->HoldUnread(context->peer(), bytes);
  }

  // Records a call that failed before it reached the core (e.g. a request
  // that does not parse) under `rpc`.
  void RecordRejected(const char* rpc, const grpc::Status& status);

 private:
  // Every unary handler's opening: a reactor for the call, the bearer
  // token checked, the request parsed and its request id (where it has a
  // usable one) made the call's. Returns false when the call was
  // refused (counted, logged and finished); `*reactor` is the call's either
  // way.
  template <typename Request>
  bool Open(const char* rpc, grpc::CallbackServerContext* context,
            const grpc::ByteBuffer* request_bytes, Request* request,
            HoldingReactor** reactor);
  // Rerank and Classify: parse, map into the core's Score, fill the
  // response with `fill` on the batcher's thread.
  template <typename Request, typename Response, typename Fill>
  grpc::ServerUnaryReactor* RunScore(const char* rpc,
                                     grpc::CallbackServerContext* context,
                                     const grpc::ByteBuffer* request_bytes,
                                     grpc::ByteBuffer* response_bytes,
                                     Fill fill);
  // Parses a unary request, admits it, runs `run(request, host,
  // &response)` on this thread and finishes the call with the serialized
  // response.
  template <typename Request, typename Response, typename Run>
  grpc::ServerUnaryReactor* RunInline(const char* rpc,
                                      grpc::CallbackServerContext* context,
                                      const grpc::ByteBuffer* request_bytes,
                                      grpc::ByteBuffer* response_bytes,
                                      Run run);
  // OK, or UNAUTHENTICATED for a missing or refused bearer token.
  grpc::Status Authenticate(const grpc::CallbackServerContext* context) const;
  // Finishes `reactor` at once with `status` (a call refused on entry).
  void Refuse(HoldingReactor* reactor, const char* rpc,
              const grpc::Status& status);
  // Echoes the call's metadata, logs its access line and finishes it.
  void FinishLogged(HoldingReactor* reactor, const grpc::Status& status,
                    UnreadResponses::Hold unread = {});
  // FinishLogged for a call whose serialized response is `response`: on
  // OK its bytes count as unread until gRPC is done with them.
  void FinishSent(HoldingReactor* reactor, const grpc::Status& status,
                  const grpc::ByteBuffer* response);
  // FinishSent after serializing `message` into `response` when `status`
  // is OK (a serialization failure becomes the call's status).
  void FinishSerialized(HoldingReactor* reactor, const grpc::Status& status,
                        const google::protobuf::Message& message,
                        grpc::ByteBuffer* response);

  core::Inference* const core_;
  const EdgeAuth* auth_ = nullptr;
};

}  // namespace encoder::service

#endif  // ENCODER_SERVER_SERVICE_ENCODER_SERVICE_H_
