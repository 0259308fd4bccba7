#include "server/service/encoder_service.h"

#include <algorithm>
#include <chrono>

#include "absl/strings/str_cat.h"
#include "server/service/diagnose_convert.h"
#include "server/service/extrapolation_convert.h"
#include "server/service/model_info.h"
#include "server/service/request_parser.h"
#include "server/service/status_util.h"

namespace encoder::service {
namespace {

using logging::IsUsableRequestId;
using logging::LogAccess;

constexpr char kDrainingMessage[] = "server is shutting down; retry elsewhere";
constexpr char kLoadingMessage[] = "models are still loading; retry shortly";
const grpc::Status kDraining(grpc::StatusCode::UNAVAILABLE, kDrainingMessage);

// The call's deadline as absl::Time (InfiniteFuture when none was set).
absl::Time CallDeadline(const grpc::CallbackServerContext* context) {
  const auto deadline = context->deadline();
  const auto now = std::chrono::system_clock::now();
  if (deadline > now + std::chrono::hours(24 * 365)) {
    return absl::InfiniteFuture();
  }
  return absl::FromChrono(deadline);
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

// The final status of a call whose response must still be serialized into
// the raw response buffer.
grpc::Status SerializeOnSuccess(const grpc::Status& status,
                                const google::protobuf::Message& response,
                                grpc::ByteBuffer* out) {
  if (!status.ok()) return status;
  return ToGrpcStatus(SerializeResponse(response, out));
}

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
  return logging::BeginAccessRecord("grpc", rpc, context->peer(),
                                    MetadataValue(context, "x-request-id"),
                                    MetadataValue(context, "traceparent"));
}

void EncoderServiceImpl::EchoCallMetadata(grpc::CallbackServerContext* context,
                                          AccessRecord* access) {
  context->AddInitialMetadata("x-request-id", logging::EnsureRequestId(access));
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
}

void EncoderServiceImpl::FinishLogged(HoldingReactor* reactor,
                                      const grpc::Status& status,
                                      UnreadResponses::Hold unread) {
  EchoCallMetadata(reactor->context, &reactor->access);
  LogCall(&reactor->access, status, reactor->start);
  reactor->FinishHolding(status, std::move(unread));
}

EncoderServiceImpl::EncoderServiceImpl(metrics::Metrics* metrics,
                                       ServiceLimits limits,
                                       DiagnoseLimits diagnose_limits)
    : metrics_(metrics),
      limits_(limits),
      diagnose_limits_(diagnose_limits),
      unread_(limits.unread, [metrics](int64_t bytes) {
        metrics->UnreadResponseBytes(bytes);
      }) {}

EncoderServiceImpl::~EncoderServiceImpl() = default;

runner::ModelCatalog* EncoderServiceImpl::Admit(grpc::Status* refusal) const {
  if (draining()) {
    *refusal = kDraining;
    return nullptr;
  }
  runner::ModelCatalog* host = host_.load();
  if (host == nullptr) {
    *refusal = ToGrpcStatus(absl::UnavailableError(kLoadingMessage));
  }
  return host;
}

grpc::Status EncoderServiceImpl::Authenticate(
    const grpc::CallbackServerContext* context) const {
  if (auth_ == nullptr) return grpc::Status::OK;
  return CheckCallToken(*auth_, context->client_metadata());
}

void EncoderServiceImpl::Refuse(HoldingReactor* reactor, const char* rpc,
                                const grpc::Status& status) {
  metrics_->RequestDone(rpc, "", GrpcCodeName(status.error_code()), 0);
  FinishLogged(reactor, status);
}

void EncoderServiceImpl::FinishUnary(HoldingReactor* reactor, const char* rpc,
                                     const std::string& model, absl::Time start,
                                     const grpc::Status& status,
                                     UnreadResponses::Hold unread) {
  metrics_->RequestDone(rpc, model, GrpcCodeName(status.error_code()),
                        absl::ToDoubleSeconds(absl::Now() - start));
  metrics_->InFlight(rpc, -1);
  if (!model.empty()) reactor->access.model = model;
  FinishLogged(reactor, status, std::move(unread));
}

void EncoderServiceImpl::SubmitEmbed(
    const char* rpc, grpc::CallbackServerContext* context,
    const v1::EmbedRequest* request, v1::EmbedResponse* response,
    std::function<void(const grpc::Status&)> done, AccessRecord* access) {
  EmbedCall call;
  call.peer = context->peer();
  call.deadline = CallDeadline(context);
  call.is_cancelled = [context] { return context->IsCancelled(); };
  SubmitEmbed(
      rpc, std::move(call), request, response,
      [done = std::move(done)](const absl::Status& status) {
        done(ToGrpcStatus(status));
      },
      access);
}

void EncoderServiceImpl::SubmitEmbed(
    const char* rpc, EmbedCall call, const v1::EmbedRequest* request,
    v1::EmbedResponse* response, std::function<void(const absl::Status&)> done,
    AccessRecord* access) {
  const absl::Time start = absl::Now();
  metrics_->InFlight(rpc, +1);
  if (access != nullptr) {
    access->model = request->model();
    access->inputs = request->inputs_size();
  }
  auto finish = [this, rpc, start, done, access](const std::string& model,
                                                 const absl::Status& status) {
    metrics_->RequestDone(
        rpc, model, GrpcCodeName(static_cast<grpc::StatusCode>(status.code())),
        absl::ToDoubleSeconds(absl::Now() - start));
    metrics_->InFlight(rpc, -1);
    if (access != nullptr && !model.empty()) access->model = model;
    done(status);
  };
  const absl::Status draining = absl::UnavailableError(kDrainingMessage);
  runner::ModelCatalog* host = host_.load();
  if (draining_.load() || host == nullptr) {
    // Count refusals while draining under the model they named.
    const runner::ServedModel* m =
        host == nullptr ? nullptr : host->Find(request->model());
    return finish(
        m == nullptr ? "" : m->name(),
        draining_.load() ? draining : absl::UnavailableError(kLoadingMessage));
  }
  auto prepared = PrepareEmbed(*request, *host, limits_);
  if (!prepared.ok()) {
    const runner::ServedModel* m = host->Find(request->model());
    return finish(m ? m->name() : "", prepared.status());
  }
  // The response is counted as owed to this connection from now on.
  auto reserved = unread_.Reserve(call.peer, EstimateResponseBytes(*prepared));
  if (!reserved.ok()) {
    return finish(prepared->model->name(), reserved.status());
  }
  auto reservation =
      std::make_shared<UnreadResponses::Hold>(*std::move(reserved));
  auto shared = std::make_shared<PreparedEmbed>(*std::move(prepared));
  const std::string model = shared->model->name();
  for (const auto& sequence : shared->sequences) {
    metrics_->InputTokens(model,
                          static_cast<int64_t>(sequence.token_ids.size()));
  }
  if (access != nullptr) access->tokens = shared->total_tokens;
  runner::EmbedWork work;
  work.sequences = shared->sequences;
  work.deadline = call.deadline;
  work.is_cancelled = std::move(call.is_cancelled);
  work.done = [this, shared, request, response, start, model, finish,
               reservation, access](absl::Status status,
                                    std::vector<runner::EmbedResult> results) {
    if (status.ok()) {
      for (const auto& r : results) {
        metrics_->SequenceTimes(model, r.batch.queue_seconds,
                                r.batch.inference_seconds);
        if (access != nullptr) {
          access->queue_ms =
              std::max(access->queue_ms, r.batch.queue_seconds * 1e3);
          access->inference_ms =
              std::max(access->inference_ms, r.batch.inference_seconds * 1e3);
        }
      }
      FillEmbedResponse(*request, *shared, results, MillisSince(start),
                        response);
    }
    // The caller counts the serialized response instead.
    reservation->Reset();
    finish(model, status);
  };
  absl::Status submitted = shared->model->Embed(std::move(work));
  if (!submitted.ok()) {
    if (submitted.code() == absl::StatusCode::kUnavailable) {
      return finish(model, draining);
    }
    finish(model, submitted);
  }
}

void EncoderServiceImpl::RecordRejected(const char* rpc,
                                        const grpc::Status& status) {
  metrics_->RequestDone(rpc, "", GrpcCodeName(status.error_code()), 0.0);
}

grpc::ServerUnaryReactor* EncoderServiceImpl::Embed(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response) {
  auto* reactor = new HoldingReactor(context, "Embed");
  if (grpc::Status auth = Authenticate(context); !auth.ok()) {
    Refuse(reactor, "Embed", auth);
    return reactor;
  }
  auto call =
      std::make_shared<UnaryMessages<v1::EmbedRequest, v1::EmbedResponse>>();
  if (absl::Status parsed = ParseRequest(*request, &call->request);
      !parsed.ok()) {
    Refuse(reactor, "Embed", ToGrpcStatus(parsed));
    return reactor;
  }
  // The request's own id comes before the metadata's.
  if (IsUsableRequestId(call->request.request_id())) {
    reactor->access.request_id = call->request.request_id();
  }
  SubmitEmbed(
      "Embed", context, &call->request, &call->response,
      [this, context, reactor, call, response](const grpc::Status& status) {
        const grpc::Status out =
            SerializeOnSuccess(status, call->response, response);
        FinishLogged(reactor, out,
                     out.ok() ? HoldUnread(context, response->Length())
                              : UnreadResponses::Hold());
      },
      &reactor->access);
  return reactor;
}

grpc::ServerUnaryReactor* EncoderServiceImpl::ListModels(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response) {
  // Raw like the other methods, so that bytes that are no message get the
  // same INVALID_ARGUMENT.
  return RunInline<v1::ListModelsRequest, v1::ListModelsResponse>(
      "ListModels", context, request, response,
      [this](const v1::ListModelsRequest&, const runner::ModelCatalog& host,
             v1::ListModelsResponse* out) {
        out->set_default_model(host.default_model());
        for (const auto& m : host.List()) {
          v1::ModelInfo* info = out->add_models();
          FillModelInfo(m->description(), m->name() == host.default_model(),
                        info);
          info->set_max_extrapolation_tokens(static_cast<int32_t>(
              MaxExtrapolationTokens(*m, diagnose_limits_)));
        }
        return absl::OkStatus();
      });
}

grpc::ServerUnaryReactor* EncoderServiceImpl::Diagnose(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request_bytes,
    grpc::ByteBuffer* response_bytes) {
  auto* reactor = new HoldingReactor(context, "Diagnose");
  if (grpc::Status auth = Authenticate(context); !auth.ok()) {
    Refuse(reactor, "Diagnose", auth);
    return reactor;
  }
  const absl::Time start = absl::Now();
  metrics_->InFlight("Diagnose", +1);
  auto call = std::make_shared<
      UnaryMessages<v1::DiagnoseRequest, v1::DiagnoseResponse>>();
  if (absl::Status parsed = ParseRequest(*request_bytes, &call->request);
      !parsed.ok()) {
    FinishUnary(reactor, "Diagnose", "", start, ToGrpcStatus(parsed));
    return reactor;
  }
  const v1::DiagnoseRequest* request = &call->request;
  v1::DiagnoseResponse* response = &call->response;
  reactor->access.model = request->model();
  grpc::Status refusal;
  runner::ModelCatalog* host = Admit(&refusal);
  if (host == nullptr) {
    FinishUnary(reactor, "Diagnose", "", start, refusal);
    return reactor;
  }
  if (absl::Status unread = unread_.Admit(context->peer()); !unread.ok()) {
    FinishUnary(reactor, "Diagnose", "", start, ToGrpcStatus(unread));
    return reactor;
  }
  const runner::ServedModel* model = host->Find(request->model());
  if (model == nullptr) {
    FinishUnary(reactor, "Diagnose", "", start,
                ToGrpcStatus(absl::NotFoundError(
                    UnknownModelMessage(request->model(), *host))));
    return reactor;
  }
  auto options = BuildDiagnoseOptions(*request, *model, diagnose_limits_);
  if (!options.ok()) {
    FinishUnary(reactor, "Diagnose", model->name(), start,
                ToGrpcStatus(options.status()));
    return reactor;
  }
  // Diagnose runs forward passes with every layer's attention: priced and
  // budgeted like an Embed input that asks for statistics.
  // The extrapolation probe's longest run is the call's largest pass.
  runner::EmbedSpec priced;
  priced.token_ids = options->token_ids;
  if (options->extrapolation) {
    priced.token_ids.resize(std::max<int64_t>(
        static_cast<int64_t>(priced.token_ids.size()),
        LongestExtrapolationRun(*options->extrapolation,
                                model->description().config)));
  }
  priced.want_attention_stats = true;
  priced.attention_layers = {0};
  priced.cost = model->Price(priced);
  if (absl::Status s = CheckCost(priced, *model,
                                 options->extrapolation
                                     ? "the extrapolation probe's longest run"
                                     : "the Diagnose input");
      !s.ok()) {
    FinishUnary(reactor, "Diagnose", model->name(), start, ToGrpcStatus(s));
    return reactor;
  }
  reactor->access.inputs = 1;
  reactor->access.tokens = static_cast<int64_t>(options->token_ids.size());
  // Waiting or running, across models.
  if (diagnose_pending_.fetch_add(1) >= diagnose_limits_.max_pending) {
    diagnose_pending_.fetch_sub(1);
    FinishUnary(reactor, "Diagnose", model->name(), start,
                ToGrpcStatus(absl::ResourceExhaustedError(absl::StrCat(
                    "too many Diagnose calls waiting or running (",
                    "--max-pending-diagnose=", diagnose_limits_.max_pending,
                    "); retry later"))));
    return reactor;
  }
  const int64_t max_send = limits_.max_send_message_bytes;
  const int64_t max_tokens = MaxExtrapolationTokens(*model, diagnose_limits_);
  runner::DiagnoseWork work;
  work.options = *options;
  if (work.options.extrapolation) {
    work.options.extrapolation->is_cancelled = [context] {
      return context->IsCancelled();
    };
  }
  work.length = static_cast<int64_t>(priced.token_ids.size());
  work.cost = priced.cost;
  work.deadline = CallDeadline(context);
  work.is_cancelled = [context] { return context->IsCancelled(); };
  work.done = [this, reactor, model, call, response, response_bytes, start,
               max_send, max_tokens, context, opts = *std::move(options)](
                  absl::StatusOr<diagnostics::DiagnoseReport> report,
                  const batching::BatchStats& ran) {
    reactor->access.queue_ms = ran.queue_seconds * 1e3;
    reactor->access.inference_ms = ran.inference_seconds * 1e3;
    grpc::Status status = ToGrpcStatus(report.status());
    if (report.ok()) {
      FillDiagnoseResponse(*report, *model, opts, response);
      if (report->extrapolation) {
        FillExtrapolation(*report->extrapolation, *opts.extrapolation,
                          max_tokens, response->mutable_extrapolation());
      }
      const int64_t bytes = static_cast<int64_t>(response->ByteSizeLong());
      if (bytes > max_send) {
        response->Clear();
        status = ToGrpcStatus(absl::ResourceExhaustedError(absl::StrCat(
            "the diagnosis is ", bytes, " bytes, over the send limit of ",
            max_send,
            " bytes; ask for fewer structure_positions, a shorter input, or "
            "no attention maps")));
      }
    }
    const grpc::Status out =
        SerializeOnSuccess(status, *response, response_bytes);
    diagnose_pending_.fetch_sub(1);
    FinishUnary(reactor, "Diagnose", model->name(), start, out,
                out.ok() ? HoldUnread(context, response_bytes->Length())
                         : UnreadResponses::Hold());
  };
  if (absl::Status submitted = model->Diagnose(std::move(work));
      !submitted.ok()) {
    diagnose_pending_.fetch_sub(1);
    FinishUnary(reactor, "Diagnose", model->name(), start,
                ToGrpcStatus(submitted.code() == absl::StatusCode::kUnavailable
                                 ? absl::UnavailableError(kDrainingMessage)
                                 : submitted));
  }
  return reactor;
}

// Tokenizing is cheap next to a forward pass, so these run on the RPC
// thread; the limits bound the work of one call.
// Tokenize and Decode run inline on the gRPC thread: tokenizing is
// microseconds per input and the inputs per call are bounded.
template <typename Request, typename Response, typename Run>
grpc::ServerUnaryReactor* EncoderServiceImpl::RunInline(
    const char* rpc, grpc::CallbackServerContext* context,
    const grpc::ByteBuffer* request_bytes, grpc::ByteBuffer* response_bytes,
    Run run) {
  auto* reactor = new HoldingReactor(context, rpc);
  if (grpc::Status auth = Authenticate(context); !auth.ok()) {
    Refuse(reactor, rpc, auth);
    return reactor;
  }
  const absl::Time start = absl::Now();
  metrics_->InFlight(rpc, +1);
  grpc::Status refusal;
  runner::ModelCatalog* host = Admit(&refusal);
  if (host == nullptr) {
    FinishUnary(reactor, rpc, "", start, refusal);
    return reactor;
  }
  Request request;
  Response response;
  absl::Status s = unread_.Admit(context->peer());
  if (s.ok()) s = ParseRequest(*request_bytes, &request);
  if (s.ok()) {
    reactor->access.model = ModelOf(request);
    s = run(request, *host, &response);
    CountCall(request, response, &reactor->access);
  }
  if (s.ok()) s = SerializeResponse(response, response_bytes);
  FinishUnary(reactor, rpc, s.ok() ? ModelOf(response) : "", start,
              ToGrpcStatus(s),
              s.ok() ? HoldUnread(context, response_bytes->Length())
                     : UnreadResponses::Hold());
  return reactor;
}

grpc::ServerUnaryReactor* EncoderServiceImpl::Tokenize(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response) {
  return RunInline<v1::TokenizeRequest, v1::TokenizeResponse>(
      "Tokenize", context, request, response,
      [this](const v1::TokenizeRequest& r, const runner::ModelCatalog& host,
             v1::TokenizeResponse* out) {
        return RunTokenize(r, host, tokenize_limits_, out);
      });
}

grpc::ServerUnaryReactor* EncoderServiceImpl::Decode(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response) {
  return RunInline<v1::DecodeRequest, v1::DecodeResponse>(
      "Decode", context, request, response,
      [this](const v1::DecodeRequest& r, const runner::ModelCatalog& host,
             v1::DecodeResponse* out) {
        return RunDecode(r, host, tokenize_limits_, out);
      });
}

}  // namespace encoder::service
