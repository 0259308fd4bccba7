#include "server/service/encoder_service.h"

#include <algorithm>
#include <chrono>
#include <type_traits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/core/compute_timing.h"
#include "server/core/long_input.h"
#include "server/service/diagnose_convert.h"
#include "server/service/embed_proto.h"
#include "server/service/extrapolation_convert.h"
#include "server/service/model_info.h"
#include "server/service/request_parser.h"
#include "server/service/score_proto.h"
#include "server/service/status_util.h"
#include "server/tracing/tracer.h"

namespace encoder::service {
namespace {

using logging::IsUsableRequestId;
using logging::LogAccess;

// The call's deadline as absl::Time (InfiniteFuture when none was set).
absl::Time CallDeadline(const grpc::CallbackServerContext* context) {
  const auto deadline = context->deadline();
  const auto now = std::chrono::system_clock::now();
  if (deadline > now + std::chrono::hours(24 * 365)) {
    return absl::InfiniteFuture();
  }
  return absl::FromChrono(deadline);
}

// The answer's counts and times (core::ComputeTimingFields, the HTTP
// front's headers) and x-truncated-tokens in the call's trailing metadata.
template <typename Answer>
void AddTimingMetadata(grpc::CallbackServerContext* context,
                       const Answer& answer) {
  for (const auto& [name, value] : core::ComputeTimingFields(answer)) {
    context->AddTrailingMetadata(name, value);
  }
  context->AddTrailingMetadata("x-truncated-tokens",
                               absl::StrCat(answer.truncated_tokens));
}

double MillisSince(absl::Time start) {
  return absl::ToDoubleMilliseconds(absl::Now() - start);
}

// A unary call's parsed request and its response, owned by the call until
// it finishes.
template <typename Request, typename Response>
struct UnaryMessages {
  Request request;
  Response response;
};

// Whether a request message carries its own request id (C++17: the
// Debian LibTorch build compiles without concepts).
template <typename Request, typename = void>
struct HasRequestId : std::false_type {};
template <typename Request>
struct HasRequestId<
    Request, std::void_t<decltype(std::declval<const Request&>().request_id())>>
    : std::true_type {};

// The first value of metadata `key`, or empty.
std::string MetadataValue(const grpc::CallbackServerContext* context,
                          const char* key) {
  const auto& metadata = context->client_metadata();
  auto it = metadata.find(key);
  if (it == metadata.end()) return "";
  return std::string(it->second.data(), it->second.size());
}

// Counts of a Tokenize or Decode call for its access line.
void CountCall(const v1::TokenizeRequest& request,
               const v1::TokenizeResponse& response, AccessRecord* access) {
  access->inputs = request.texts_size() + request.texts_bytes_size();
  access->tokens = 0;
  for (const auto& e : response.encodings()) access->tokens += e.ids_size();
}

void CountCall(const v1::ListModelsRequest&, const v1::ListModelsResponse&,
               AccessRecord* access) {
  access->inputs = 0;
  access->tokens = 0;
}

// The model a request or response names, for the access log and metrics;
// ListModels names none.
template <typename Message>
std::string ModelOf(const Message& message) {
  return message.model();
}
std::string ModelOf(const v1::ListModelsRequest&) { return ""; }
std::string ModelOf(const v1::ListModelsResponse&) { return ""; }

void CountCall(const v1::DecodeRequest& request, const v1::DecodeResponse&,
               AccessRecord* access) {
  access->inputs = request.inputs_size();
  access->tokens = 0;
  for (const auto& input : request.inputs()) {
    access->tokens += input.ids_size();
  }
}

}  // namespace

HoldingReactor::HoldingReactor(grpc::CallbackServerContext* context,
                               const char* rpc)
    : context(context), access(EncoderServiceImpl::BeginAccess(rpc, context)) {}

AccessRecord EncoderServiceImpl::BeginAccess(
    const char* rpc, const grpc::CallbackServerContext* context) {
  AccessRecord record = logging::BeginAccessRecord(
      "grpc", rpc, context->peer(), MetadataValue(context, "x-request-id"),
      MetadataValue(context, "traceparent"));
  tracing::BeginCall(MetadataValue(context, "tracestate"), &record);
  return record;
}

void EncoderServiceImpl::EchoCallMetadata(grpc::CallbackServerContext* context,
                                          AccessRecord* access, bool trailing) {
  const std::string id = logging::EnsureRequestId(access);
  if (trailing) {
    context->AddTrailingMetadata("x-request-id", id);
    if (!access->traceparent.empty()) {
      context->AddTrailingMetadata("traceparent", access->traceparent);
    }
    return;
  }
  context->AddInitialMetadata("x-request-id", id);
  if (!access->traceparent.empty()) {
    context->AddInitialMetadata("traceparent", access->traceparent);
  }
}

void EncoderServiceImpl::LogCall(AccessRecord* access,
                                 const grpc::Status& status, absl::Time start) {
  access->status = GrpcCodeName(status.error_code());
  access->error = status.error_message();
  access->total_ms = MillisSince(start);
  LogAccess(*access);
  tracing::EndCall(*access);
}

core::Call EncoderServiceImpl::CallOf(const char* rpc,
                                      grpc::CallbackServerContext* context,
                                      AccessRecord* access) {
  core::Call call;
  call.rpc = rpc;
  call.peer = context->peer();
  call.deadline = CallDeadline(context);
  call.is_cancelled = [context] { return context->IsCancelled(); };
  call.access = access;
  return call;
}

void EncoderServiceImpl::FinishLogged(HoldingReactor* reactor,
                                      const grpc::Status& status,
                                      UnreadResponses::Hold unread) {
  // A unary call that fails sent nothing yet: its ids go with the
  // trailers, so the answer is trailers-only, which gRPC's retry policies
  // and transparent retries treat as not committed (a draining server's
  // UNAVAILABLE is retried on another backend).
  EchoCallMetadata(reactor->context, &reactor->access,
                   /*trailing=*/!status.ok());
  LogCall(&reactor->access, status, reactor->start);
  reactor->FinishHolding(status, std::move(unread));
}

void EncoderServiceImpl::FinishSent(HoldingReactor* reactor,
                                    const grpc::Status& status,
                                    const grpc::ByteBuffer* response) {
  FinishLogged(reactor, status,
               status.ok() ? HoldUnread(reactor->context, response->Length())
                           : UnreadResponses::Hold());
}

void EncoderServiceImpl::FinishSerialized(
    HoldingReactor* reactor, const grpc::Status& status,
    const google::protobuf::Message& message, grpc::ByteBuffer* response) {
  FinishSent(
      reactor,
      status.ok() ? ToGrpcStatus(SerializeResponse(message, response)) : status,
      response);
}

EncoderServiceImpl::~EncoderServiceImpl() = default;

grpc::Status EncoderServiceImpl::Authenticate(
    const grpc::CallbackServerContext* context) const {
  if (auth_ == nullptr) return grpc::Status::OK;
  return CheckCallToken(*auth_, context->client_metadata());
}

void EncoderServiceImpl::Refuse(HoldingReactor* reactor, const char* rpc,
                                const grpc::Status& status) {
  RecordRejected(rpc, status);
  FinishLogged(reactor, status);
}

void EncoderServiceImpl::RecordRejected(const char* rpc,
                                        const grpc::Status& status) {
  core_->RecordRejected(
      rpc, absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                        status.error_message()));
}

template <typename Request>
bool EncoderServiceImpl::Open(const char* rpc,
                              grpc::CallbackServerContext* context,
                              const grpc::ByteBuffer* request_bytes,
                              Request* request, HoldingReactor** reactor) {
  *reactor = new HoldingReactor(context, rpc);
  grpc::Status refused = Authenticate(context);
  if (refused.ok())
    refused = ToGrpcStatus(ParseRequest(*request_bytes, request));
  if (refused.ok()) {
    // The request's own id comes before the metadata's.
    if constexpr (HasRequestId<Request>::value) {
      if (IsUsableRequestId(request->request_id())) {
        (*reactor)->access.request_id = request->request_id();
      }
    }
    return true;
  }
  Refuse(*reactor, rpc, refused);
  return false;
}

void EncoderServiceImpl::SubmitEmbed(
    const char* rpc, grpc::CallbackServerContext* context,
    v1::EmbedRequest* request, v1::EmbedResponse* response,
    std::function<void(const grpc::Status&)> done, AccessRecord* access,
    bool timing_metadata) {
  absl::StatusOr<core::EmbedQuery> query = ToEmbedQuery(request);
  if (!query.ok()) {
    const grpc::Status status = ToGrpcStatus(query.status());
    RecordRejected(rpc, status);
    return done(status);
  }
  core_->Embed(CallOf(rpc, context, access), *std::move(query),
               [response, context, timing_metadata, done = std::move(done)](
                   absl::StatusOr<core::EmbedAnswer> answer) {
                 if (answer.ok()) {
                   FillEmbedResponse(*answer, response);
                   if (timing_metadata) AddTimingMetadata(context, *answer);
                 }
                 done(ToGrpcStatus(answer.status()));
               });
}

grpc::ServerUnaryReactor* EncoderServiceImpl::Embed(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response) {
  auto call =
      std::make_shared<UnaryMessages<v1::EmbedRequest, v1::EmbedResponse>>();
  HoldingReactor* reactor = nullptr;
  if (!Open("Embed", context, request, &call->request, &reactor)) {
    return reactor;
  }
  SubmitEmbed(
      "Embed", context, &call->request, &call->response,
      [this, reactor, call, response](const grpc::Status& status) {
        FinishSerialized(reactor, status, call->response, response);
      },
      &reactor->access, /*timing_metadata=*/true);
  return reactor;
}

grpc::ServerUnaryReactor* EncoderServiceImpl::EmbedSparse(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response) {
  auto call = std::make_shared<
      UnaryMessages<v1::EmbedSparseRequest, v1::EmbedSparseResponse>>();
  HoldingReactor* reactor = nullptr;
  if (!Open("EmbedSparse", context, request, &call->request, &reactor)) {
    return reactor;
  }
  core_->Embed(CallOf("EmbedSparse", context, &reactor->access),
               ToSparseQuery(&call->request),
               [this, reactor, call, context,
                response](absl::StatusOr<core::EmbedAnswer> answer) {
                 if (answer.ok()) {
                   FillSparseResponse(*answer, &call->response);
                   AddTimingMetadata(context, *answer);
                 }
                 FinishSerialized(reactor, ToGrpcStatus(answer.status()),
                                  call->response, response);
               });
  return reactor;
}

template <typename Request, typename Response, typename Fill>
grpc::ServerUnaryReactor* EncoderServiceImpl::RunScore(
    const char* rpc, grpc::CallbackServerContext* context,
    const grpc::ByteBuffer* request_bytes, grpc::ByteBuffer* response_bytes,
    Fill fill) {
  auto call = std::make_shared<UnaryMessages<Request, Response>>();
  HoldingReactor* reactor = nullptr;
  if (!Open(rpc, context, request_bytes, &call->request, &reactor)) {
    return reactor;
  }
  absl::StatusOr<core::ScoreQuery> query = ToScoreQuery(call->request);
  if (!query.ok()) {
    Refuse(reactor, rpc, ToGrpcStatus(query.status()));
    return reactor;
  }
  core_->Score(CallOf(rpc, context, &reactor->access), *std::move(query),
               [this, reactor, call, response_bytes, context,
                fill](absl::StatusOr<core::ScoreAnswer> answer) {
                 if (answer.ok()) {
                   fill(call->request, *answer, &call->response);
                   AddTimingMetadata(context, *answer);
                 }
                 FinishSerialized(reactor, ToGrpcStatus(answer.status()),
                                  call->response, response_bytes);
               });
  return reactor;
}

grpc::ServerUnaryReactor* EncoderServiceImpl::Rerank(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response) {
  return RunScore<v1::RerankRequest, v1::RerankResponse>(
      "Rerank", context, request, response, FillRerankResponse);
}

grpc::ServerUnaryReactor* EncoderServiceImpl::Classify(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response) {
  return RunScore<v1::ClassifyRequest, v1::ClassifyResponse>(
      "Classify", context, request, response, FillClassifyResponse);
}

grpc::ServerUnaryReactor* EncoderServiceImpl::ListModels(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response) {
  // Raw like the other methods, so that bytes that are no message get the
  // same INVALID_ARGUMENT.
  return RunInline<v1::ListModelsRequest, v1::ListModelsResponse>(
      "ListModels", context, request, response,
      [this](const v1::ListModelsRequest&, const api::ModelCatalog& host,
             v1::ListModelsResponse* out) {
        out->set_default_model(host.default_model());
        out->set_server_version(ENCODER_PROJECT_VERSION);
        out->set_max_inputs_per_request(core_->limits().max_inputs_per_request);
        out->set_max_tokenize_texts_per_request(
            core_->limits().max_tokenize_texts_per_request);
        for (const core::ModelReport& report : core::DescribeModels(
                 host, core_->limits(), core_->diagnose_limits())) {
          FillModelInfo(report, out->add_models());
        }
        return absl::OkStatus();
      });
}

grpc::ServerUnaryReactor* EncoderServiceImpl::Diagnose(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request_bytes,
    grpc::ByteBuffer* response_bytes) {
  auto call = std::make_shared<
      UnaryMessages<v1::DiagnoseRequest, v1::DiagnoseResponse>>();
  HoldingReactor* reactor = nullptr;
  if (!Open("Diagnose", context, request_bytes, &call->request, &reactor)) {
    return reactor;
  }
  const int64_t max_send = core_->limits().max_send_message_bytes;
  core_->Diagnose(
      CallOf("Diagnose", context, &reactor->access), call->request.model(),
      ToDiagnoseQuery(call->request),
      // The response is filled and serialized on the batcher's thread.
      [call, response_bytes, max_send](core::DiagnoseAnswer answer) {
        v1::DiagnoseResponse* response = &call->response;
        FillDiagnoseResponse(answer.report, *answer.model, answer.options,
                             response);
        if (answer.report.extrapolation) {
          FillExtrapolation(*answer.report.extrapolation,
                            *answer.options.extrapolation,
                            answer.max_extrapolation_tokens,
                            response->mutable_extrapolation());
        }
        const int64_t bytes = static_cast<int64_t>(response->ByteSizeLong());
        if (bytes > max_send) {
          response->Clear();
          return absl::ResourceExhaustedError(absl::StrCat(
              "the diagnosis is ", bytes, " bytes, over the send limit of ",
              max_send,
              " bytes; ask for fewer structure_positions, a shorter input, "
              "or no attention maps"));
        }
        return SerializeResponse(*response, response_bytes);
      },
      [this, reactor, response_bytes](const absl::Status& status) {
        FinishSent(reactor, ToGrpcStatus(status), response_bytes);
      });
  return reactor;
}

// Tokenize, Decode and ListModels run inline on the gRPC thread:
// tokenizing is microseconds per input and the inputs per call are
// bounded.
template <typename Request, typename Response, typename Run>
grpc::ServerUnaryReactor* EncoderServiceImpl::RunInline(
    const char* rpc, grpc::CallbackServerContext* context,
    const grpc::ByteBuffer* request_bytes, grpc::ByteBuffer* response_bytes,
    Run run) {
  Request request;
  HoldingReactor* reactor = nullptr;
  if (!Open(rpc, context, request_bytes, &request, &reactor)) return reactor;
  const absl::Time start = absl::Now();
  core_->BeginCall(rpc);
  reactor->access.model = ModelOf(request);
  Response response;
  absl::StatusOr<const api::ModelCatalog*> host = core_->Admit(context->peer());
  absl::Status s = host.status();
  if (s.ok()) {
    s = run(request, **host, &response);
    CountCall(request, response, &reactor->access);
  }
  if (s.ok()) s = SerializeResponse(response, response_bytes);
  const std::string model = s.ok() ? ModelOf(response) : "";
  core_->EndCall(rpc, model, s, start);
  if (!model.empty()) reactor->access.model = model;
  FinishSent(reactor, ToGrpcStatus(s), response_bytes);
  return reactor;
}

grpc::ServerUnaryReactor* EncoderServiceImpl::Tokenize(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response) {
  return RunInline<v1::TokenizeRequest, v1::TokenizeResponse>(
      "Tokenize", context, request, response,
      [this](const v1::TokenizeRequest& r, const api::ModelCatalog& host,
             v1::TokenizeResponse* out) {
        return RunTokenize(r, host, core_->limits(), out);
      });
}

grpc::ServerUnaryReactor* EncoderServiceImpl::Decode(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response) {
  return RunInline<v1::DecodeRequest, v1::DecodeResponse>(
      "Decode", context, request, response,
      [this](const v1::DecodeRequest& r, const api::ModelCatalog& host,
             v1::DecodeResponse* out) {
        return RunDecode(r, host, core_->limits(), out);
      });
}

}  // namespace encoder::service
