#include "server/service/encoder_service.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "server/model/tokenizer.h"
#include "server/service/diagnose_convert.h"
#include "server/service/model_info.h"
#include "server/service/status_util.h"

namespace encoder::service {
namespace {

const grpc::Status kDraining(grpc::StatusCode::UNAVAILABLE,
                             "server is shutting down; retry elsewhere");

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

}  // namespace

EncoderServiceImpl::EncoderServiceImpl(metrics::Metrics* metrics,
                                       ServiceLimits limits,
                                       DiagnoseLimits diagnose_limits)
    : metrics_(metrics),
      limits_(limits),
      diagnose_limits_(diagnose_limits),
      diagnose_queue_(diagnose_limits.max_pending) {}

EncoderServiceImpl::~EncoderServiceImpl() = default;

runner::ModelHost* EncoderServiceImpl::Admit(grpc::Status* refusal) const {
  if (draining()) {
    *refusal = kDraining;
    return nullptr;
  }
  runner::ModelHost* host = host_.load();
  if (host == nullptr) {
    *refusal = grpc::Status(grpc::StatusCode::UNAVAILABLE,
                            "models are still loading; retry shortly");
  }
  return host;
}

grpc::Status EncoderServiceImpl::Authenticate(
    const grpc::CallbackServerContext* context) const {
  if (auth_ == nullptr) return grpc::Status::OK;
  return CheckCallToken(*auth_, context->client_metadata());
}

void EncoderServiceImpl::Refuse(grpc::ServerUnaryReactor* reactor,
                                const char* rpc, const grpc::Status& status) {
  metrics_->RequestDone(rpc, "", GrpcCodeName(status.error_code()), 0);
  reactor->Finish(status);
}

void EncoderServiceImpl::FinishUnary(grpc::ServerUnaryReactor* reactor,
                                     const char* rpc, const std::string& model,
                                     absl::Time start,
                                     const grpc::Status& status) {
  metrics_->RequestDone(rpc, model, GrpcCodeName(status.error_code()),
                        absl::ToDoubleSeconds(absl::Now() - start));
  metrics_->InFlight(rpc, -1);
  reactor->Finish(status);
}

void EncoderServiceImpl::SubmitEmbed(
    const char* rpc, grpc::CallbackServerContext* context,
    const v1::EmbedRequest* request, v1::EmbedResponse* response,
    std::function<void(const grpc::Status&)> done) {
  const absl::Time start = absl::Now();
  metrics_->InFlight(rpc, +1);
  auto finish = [this, rpc, start, done](const std::string& model,
                                         const grpc::Status& status) {
    metrics_->RequestDone(rpc, model, GrpcCodeName(status.error_code()),
                          absl::ToDoubleSeconds(absl::Now() - start));
    metrics_->InFlight(rpc, -1);
    done(status);
  };
  grpc::Status refusal;
  runner::ModelHost* host = Admit(&refusal);
  if (host == nullptr) {
    // Count refusals while draining under the model they named.
    const runner::ModelHost* loaded = host_.load();
    const runner::HostedModel* m =
        loaded == nullptr ? nullptr : loaded->Find(request->model());
    return finish(m == nullptr ? "" : m->spec.name, refusal);
  }
  auto prepared = PrepareEmbed(*request, *host, limits_);
  if (!prepared.ok()) {
    const runner::HostedModel* m = host->Find(request->model());
    return finish(m ? m->spec.name : "", ToGrpcStatus(prepared.status()));
  }
  auto shared = std::make_shared<PreparedEmbed>(*std::move(prepared));
  const std::string model = shared->model->spec.name;
  auto work = std::make_shared<batching::Request>();
  work->sequences = shared->sequences;
  work->deadline = CallDeadline(context);
  work->is_cancelled = [context] { return context->IsCancelled(); };
  work->done = [this, shared, request, response, start, model, finish](
                   absl::Status status,
                   std::vector<batching::SequenceResult> results) {
    if (status.ok()) {
      for (const auto& r : results) {
        metrics_->SequenceTimes(model, r.batch.queue_seconds,
                                r.batch.inference_seconds);
      }
      FillEmbedResponse(*request, *shared, results, MillisSince(start),
                        response);
    }
    finish(model, ToGrpcStatus(status));
  };
  absl::Status submitted = shared->model->batcher->Submit(work);
  if (!submitted.ok()) {
    if (submitted.code() == absl::StatusCode::kUnavailable) {
      return finish(model, kDraining);
    }
    finish(model, ToGrpcStatus(submitted));
  }
}

grpc::ServerUnaryReactor* EncoderServiceImpl::Embed(
    grpc::CallbackServerContext* context, const v1::EmbedRequest* request,
    v1::EmbedResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (grpc::Status auth = Authenticate(context); !auth.ok()) {
    Refuse(reactor, "Embed", auth);
    return reactor;
  }
  SubmitEmbed(
      "Embed", context, request, response,
      [reactor](const grpc::Status& status) { reactor->Finish(status); });
  return reactor;
}

grpc::ServerUnaryReactor* EncoderServiceImpl::ListModels(
    grpc::CallbackServerContext* context, const v1::ListModelsRequest*,
    v1::ListModelsResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (grpc::Status auth = Authenticate(context); !auth.ok()) {
    Refuse(reactor, "ListModels", auth);
    return reactor;
  }
  const absl::Time start = absl::Now();
  metrics_->InFlight("ListModels", +1);
  grpc::Status refusal;
  runner::ModelHost* host = Admit(&refusal);
  if (host == nullptr) {
    FinishUnary(reactor, "ListModels", "", start, refusal);
    return reactor;
  }
  response->set_default_model(host->default_model());
  for (const auto& m : host->models()) {
    FillModelInfo(*m, m->spec.name == host->default_model(),
                  response->add_models());
  }
  FinishUnary(reactor, "ListModels", "", start, grpc::Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* EncoderServiceImpl::Diagnose(
    grpc::CallbackServerContext* context, const v1::DiagnoseRequest* request,
    v1::DiagnoseResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (grpc::Status auth = Authenticate(context); !auth.ok()) {
    Refuse(reactor, "Diagnose", auth);
    return reactor;
  }
  const absl::Time start = absl::Now();
  metrics_->InFlight("Diagnose", +1);
  grpc::Status refusal;
  runner::ModelHost* host = Admit(&refusal);
  if (host == nullptr) {
    FinishUnary(reactor, "Diagnose", "", start, refusal);
    return reactor;
  }
  const runner::HostedModel* model = host->Find(request->model());
  if (model == nullptr) {
    FinishUnary(reactor, "Diagnose", "", start,
                grpc::Status(grpc::StatusCode::NOT_FOUND,
                             absl::StrCat("model \"", request->model(),
                                          "\" not found")));
    return reactor;
  }
  auto options = BuildDiagnoseOptions(*request, *model, diagnose_limits_);
  if (!options.ok()) {
    FinishUnary(reactor, "Diagnose", model->spec.name, start,
                ToGrpcStatus(options.status()));
    return reactor;
  }
  const int64_t max_send = limits_.max_send_message_bytes;
  auto task = [this, reactor, model, response, start, max_send, context,
               opts = *std::move(options)] {
    if (context->IsCancelled()) {
      FinishUnary(reactor, "Diagnose", model->spec.name, start,
                  grpc::Status(grpc::StatusCode::CANCELLED, "call cancelled"));
      return;
    }
    auto report = diagnostics::Diagnose(*model->encoder, opts);
    grpc::Status status = ToGrpcStatus(report.status());
    if (report.ok()) {
      FillDiagnoseResponse(*report, *model, opts, response);
      const int64_t bytes = static_cast<int64_t>(response->ByteSizeLong());
      if (bytes > max_send) {
        response->Clear();
        status = grpc::Status(
            grpc::StatusCode::RESOURCE_EXHAUSTED,
            absl::StrCat("the diagnosis is ", bytes,
                         " bytes, over the send "
                         "limit of ",
                         max_send,
                         " bytes; ask for fewer "
                         "structure_positions, a shorter input, or no "
                         "attention maps"));
      }
    }
    FinishUnary(reactor, "Diagnose", model->spec.name, start, status);
  };
  if (!diagnose_queue_.TrySubmit(std::move(task))) {
    FinishUnary(reactor, "Diagnose", model->spec.name, start,
                grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                             absl::StrCat("too many Diagnose calls queued (",
                                          diagnose_limits_.max_pending,
                                          "); retry later")));
  }
  return reactor;
}

}  // namespace encoder::service
