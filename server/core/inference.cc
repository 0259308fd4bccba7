#include "server/core/inference.h"

#include <algorithm>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/core/long_input.h"
#include "server/core/status.h"

namespace encoder::core {
namespace {

constexpr char kDrainingMessage[] = "server is shutting down; retry elsewhere";
constexpr char kLoadingMessage[] = "models are still loading; retry shortly";

// The call's trace when it records spans; else null.
tracing::CallTrace* TraceOf(logging::AccessRecord* access) {
  return access != nullptr && access->trace.sampled ? &access->trace : nullptr;
}

// Fills the access record's request (when the front keeps one) and stamps
// the core's start on a traced call; the call's trace, else null.
tracing::CallTrace* OpenRecord(logging::AccessRecord* access,
                               const std::string& requested, int64_t inputs,
                               absl::Time start) {
  if (access == nullptr) return nullptr;
  access->model = requested;
  access->inputs = inputs;
  tracing::CallTrace* trace = TraceOf(access);
  if (trace != nullptr) trace->core_start = start;
  return trace;
}

// The call's sequences are queued on `model` now.
void StampQueued(const api::ServedModel& model,
                 const std::vector<api::EmbedSpec>& sequences,
                 tracing::CallTrace* trace) {
  trace->queued = absl::Now();
  const api::ModelDescription& d = model.description();
  trace->scheme = d.scheme.name;
  trace->precision = model::PrecisionName(d.precision);
  trace->sequences = static_cast<int64_t>(sequences.size());
}

// When the batches of `results` ran, and which they were.
void StampBatches(const std::vector<api::EmbedResult>& results,
                  tracing::CallTrace* trace) {
  for (const api::EmbedResult& r : results) {
    const absl::Time end =
        r.batch.start + absl::Seconds(r.batch.inference_seconds);
    if (trace->first_batch == absl::InfinitePast() ||
        r.batch.start < trace->first_batch) {
      trace->first_batch = r.batch.start;
    }
    trace->last_batch_end = std::max(trace->last_batch_end, end);
    if (std::find(trace->batches.begin(), trace->batches.end(), r.batch.id) ==
        trace->batches.end()) {
      trace->batches.push_back(r.batch.id);
    }
  }
}

double MillisSince(absl::Time start) {
  return absl::ToDoubleMilliseconds(absl::Now() - start);
}

// A model's refusal to queue: UNAVAILABLE means it is draining, said the
// same way as the core's own refusal.
absl::Status QueueRefusal(absl::Status submitted) {
  if (submitted.code() == absl::StatusCode::kUnavailable) {
    return absl::UnavailableError(kDrainingMessage);
  }
  return submitted;
}

// The extrapolation probe's longest forward pass: its longest length, cut
// to what the scheme can run.
int64_t LongestExtrapolationRun(const api::ExtrapolationOptions& o,
                                const api::ModelDescription& d) {
  const int64_t longest = o.lengths.empty() ? 0 : o.lengths.back();
  const int64_t limit = d.reach.max_length;
  return limit > 0 ? std::min(longest, limit) : longest;
}

// Diagnose runs forward passes with every layer's attention: priced and
// budgeted like an Embed input that asks for statistics. The extrapolation
// probe's longest run is the call's largest pass.
api::EmbedSpec PriceDiagnose(const api::DiagnoseOptions& options,
                             const api::ServedModel& model) {
  api::EmbedSpec priced;
  priced.token_ids = options.token_ids;
  if (options.extrapolation) {
    priced.token_ids.resize(std::max<int64_t>(
        static_cast<int64_t>(priced.token_ids.size()),
        LongestExtrapolationRun(*options.extrapolation, model.description())));
  }
  priced.want_attention_stats = true;
  priced.attention_layers = {0};
  priced.cost = model.Price(priced);
  return priced;
}

}  // namespace

int64_t MaxExtrapolationTokens(const api::ServedModel& model,
                               const DiagnoseLimits& limits) {
  return ModelExtrapolationTokens(model, limits.max_extrapolation_tokens);
}

Inference::Inference(metrics::Metrics* metrics, ServiceLimits limits,
                     DiagnoseLimits diagnose_limits)
    : metrics_(metrics),
      limits_([&] {
        limits.max_extrapolation_tokens =
            diagnose_limits.max_extrapolation_tokens;
        return limits;
      }()),
      diagnose_limits_(diagnose_limits),
      unread_(limits.unread, [metrics](int64_t bytes) {
        metrics->UnreadResponseBytes(bytes);
      }) {}

void Inference::MarkUnhealthy(std::string reason) {
  absl::MutexLock lock(&unhealthy_mu_);
  if (unhealthy_.empty()) unhealthy_ = std::move(reason);
}

void Inference::SetStartupState(std::string state, std::string detail) {
  absl::MutexLock lock(&unhealthy_mu_);
  startup_state_ = std::move(state);
  startup_detail_ = std::move(detail);
}

std::pair<std::string, std::string> Inference::startup_state() const {
  absl::MutexLock lock(&unhealthy_mu_);
  return {startup_state_, startup_detail_};
}

std::string Inference::unhealthy() const {
  absl::MutexLock lock(&unhealthy_mu_);
  return unhealthy_;
}

absl::StatusOr<const api::ModelCatalog*> Inference::Admit() const {
  if (draining()) return absl::UnavailableError(kDrainingMessage);
  const api::ModelCatalog* host = host_.load();
  if (host == nullptr) return absl::UnavailableError(kLoadingMessage);
  return host;
}

absl::StatusOr<const api::ModelCatalog*> Inference::Admit(
    const std::string& peer) const {
  absl::StatusOr<const api::ModelCatalog*> host = Admit();
  if (!host.ok()) return host;
  if (absl::Status unread = unread_.Admit(peer); !unread.ok()) return unread;
  return host;
}

void Inference::BeginCall(const char* rpc) { metrics_->InFlight(rpc, +1); }

void Inference::EndCall(const char* rpc, const std::string& model,
                        const absl::Status& status, absl::Time start) {
  metrics_->RequestDone(rpc, model, StatusCodeName(status.code()),
                        absl::ToDoubleSeconds(absl::Now() - start));
  metrics_->InFlight(rpc, -1);
}

void Inference::RecordRejected(const char* rpc, const absl::Status& status) {
  metrics_->RequestDone(rpc, "", StatusCodeName(status.code()), 0.0);
}

template <typename Prepared, typename Answer>
void Inference::Run(
    Call call, const std::string& requested, int64_t inputs,
    std::string request_id,
    const std::function<absl::StatusOr<Prepared>(const api::ModelCatalog&)>&
        prepare,
    const std::function<int64_t(const Prepared&)>& estimate,
    std::function<Answer(std::string, const Prepared&,
                         std::vector<api::EmbedResult>, double)>
        build,
    std::function<void(absl::StatusOr<Answer>)> done) {
  const absl::Time start = absl::Now();
  const char* rpc = call.rpc;
  logging::AccessRecord* access = call.access;
  BeginCall(rpc);
  tracing::CallTrace* trace = OpenRecord(access, requested, inputs, start);
  // Records the call under `model` and hands its outcome to the front.
  auto finish = [this, rpc, start, access](
                    const std::string& model, absl::StatusOr<Answer> outcome,
                    const std::function<void(absl::StatusOr<Answer>)>& done) {
    EndCall(rpc, model, outcome.status(), start);
    if (access != nullptr && !model.empty()) access->model = model;
    done(std::move(outcome));
  };
  absl::StatusOr<const api::ModelCatalog*> admitted = Admit();
  if (!admitted.ok()) {
    // Refusals while draining count under the model they named.
    return finish(LabelOf(requested), admitted.status(), done);
  }
  absl::StatusOr<Prepared> prepared = prepare(**admitted);
  if (!prepared.ok()) {
    return finish(LabelOf(requested), prepared.status(), done);
  }
  // The response is counted as owed to this connection from now on.
  auto reserved = unread_.Reserve(call.peer, estimate(*prepared));
  if (!reserved.ok()) {
    return finish(prepared->model->name(), reserved.status(), done);
  }
  auto reservation =
      std::make_shared<UnreadResponses::Hold>(*std::move(reserved));
  auto shared = std::make_shared<Prepared>(*std::move(prepared));
  const std::string model = shared->model->name();
  const double tokenization_ms = MillisSince(start);
  RecordPrepared(model, shared->sequences, tokenization_ms, access);
  if (trace != nullptr) StampQueued(*shared->model, shared->sequences, trace);
  api::EmbedWork work;
  work.traced = trace != nullptr;
  work.sequences = shared->sequences;
  work.deadline = call.deadline;
  work.is_cancelled = std::move(call.is_cancelled);
  auto shared_done =
      std::make_shared<std::function<void(absl::StatusOr<Answer>)>>(
          std::move(done));
  work.done = [this, shared, request_id = std::move(request_id), start, model,
               finish, reservation, access, trace, shared_done,
               build = std::move(build), tokenization_ms](
                  absl::Status status, std::vector<api::EmbedResult> results) {
    // The front counts what it serializes instead.
    reservation->Reset();
    if (!status.ok()) return finish(model, status, *shared_done);
    if (trace != nullptr) StampBatches(results, trace);
    for (const auto& r : results) {
      metrics_->SequenceTimes(model, r.batch.queue_seconds,
                              r.batch.inference_seconds);
    }
    Answer answer =
        build(request_id, *shared, std::move(results), MillisSince(start));
    answer.tokenization_ms = tokenization_ms;
    if (trace != nullptr) trace->answered = absl::Now();
    if (access != nullptr) {
      access->queue_ms = answer.queue_ms;
      access->inference_ms = answer.inference_ms;
    }
    finish(model, std::move(answer), *shared_done);
  };
  absl::Status submitted = shared->model->Embed(std::move(work));
  if (!submitted.ok()) {
    reservation->Reset();
    finish(model, QueueRefusal(submitted), *shared_done);
  }
}

void Inference::Embed(Call call, EmbedQuery query,
                      std::function<void(absl::StatusOr<EmbedAnswer>)> done) {
  const std::string requested = query.model;
  const int64_t inputs = static_cast<int64_t>(query.inputs.size());
  std::string request_id = query.request_id;
  auto q = std::make_shared<EmbedQuery>(std::move(query));
  Run<PreparedEmbed, EmbedAnswer>(
      std::move(call), requested, inputs, std::move(request_id),
      [this, q](const api::ModelCatalog& host) {
        return PrepareEmbed(*q, host, limits_);
      },
      EstimateResponseBytes, BuildAnswer, std::move(done));
}

void Inference::Score(Call call, ScoreQuery query,
                      std::function<void(absl::StatusOr<ScoreAnswer>)> done) {
  const std::string requested = query.model;
  const int64_t inputs = static_cast<int64_t>(query.items.size());
  std::string request_id = query.request_id;
  auto q = std::make_shared<ScoreQuery>(std::move(query));
  Run<PreparedScore, ScoreAnswer>(
      std::move(call), requested, inputs, std::move(request_id),
      [this, q](const api::ModelCatalog& host) {
        return PrepareScore(*q, host, limits_);
      },
      EstimateScoreResponseBytes, BuildScoreAnswer, std::move(done));
}

std::string Inference::LabelOf(const std::string& requested) const {
  const api::ModelCatalog* host = host_.load();
  const api::ServedModel* m = host == nullptr ? nullptr : host->Find(requested);
  return m == nullptr ? "" : m->name();
}

void Inference::RecordPrepared(const std::string& model,
                               const std::vector<api::EmbedSpec>& sequences,
                               double tokenization_ms,
                               logging::AccessRecord* access) {
  metrics_->Tokenization(model, tokenization_ms / 1e3);
  int64_t tokens = 0;
  for (const auto& sequence : sequences) {
    const auto n = static_cast<int64_t>(sequence.token_ids.size());
    metrics_->InputTokens(model, n);
    tokens += n;
  }
  if (access != nullptr) access->tokens = tokens;
}

absl::Status Inference::TakeDiagnoseSlot() {
  // Waiting or running, across models.
  if (diagnose_pending_.fetch_add(1) >= diagnose_limits_.max_pending) {
    diagnose_pending_.fetch_sub(1);
    return absl::ResourceExhaustedError(
        absl::StrCat("too many Diagnose calls waiting or running (",
                     "--max-pending-diagnose=", diagnose_limits_.max_pending,
                     "); retry later"));
  }
  return absl::OkStatus();
}

void Inference::Diagnose(Call call, const std::string& model_name,
                         DiagnoseQuery query,
                         std::function<absl::Status(DiagnoseAnswer)> render,
                         std::function<void(const absl::Status&)> done) {
  const absl::Time start = absl::Now();
  const char* rpc = call.rpc;
  logging::AccessRecord* access = call.access;
  BeginCall(rpc);
  if (access != nullptr) access->model = model_name;
  auto finish = [this, rpc, start, access](
                    const std::string& model, const absl::Status& status,
                    const std::function<void(const absl::Status&)>& done) {
    EndCall(rpc, model, status, start);
    if (access != nullptr && !model.empty()) access->model = model;
    done(status);
  };
  absl::StatusOr<const api::ModelCatalog*> host = Admit(call.peer);
  if (!host.ok()) return finish("", host.status(), done);
  const api::ServedModel* model = (*host)->Find(model_name);
  if (model == nullptr) {
    return finish(
        "", absl::NotFoundError(UnknownModelMessage(model_name, **host)), done);
  }
  absl::StatusOr<api::DiagnoseOptions> options =
      BuildDiagnoseOptions(query, *model, diagnose_limits_);
  if (!options.ok()) return finish(model->name(), options.status(), done);
  const api::EmbedSpec priced = PriceDiagnose(*options, *model);
  if (absl::Status s = CheckCost(priced, *model,
                                 options->extrapolation
                                     ? "the extrapolation probe's longest run"
                                     : "the Diagnose input");
      !s.ok()) {
    return finish(model->name(), s, done);
  }
  if (access != nullptr) {
    access->inputs = 1;
    access->tokens = static_cast<int64_t>(options->token_ids.size());
  }
  if (absl::Status slot = TakeDiagnoseSlot(); !slot.ok()) {
    return finish(model->name(), slot, done);
  }
  api::DiagnoseWork work;
  work.options = *options;
  if (work.options.extrapolation) {
    work.options.extrapolation->is_cancelled = call.is_cancelled;
  }
  work.length = static_cast<int64_t>(priced.token_ids.size());
  work.cost = priced.cost;
  work.deadline = call.deadline;
  work.is_cancelled = call.is_cancelled;
  auto shared_done = std::make_shared<std::function<void(const absl::Status&)>>(
      std::move(done));
  const int64_t max_tokens = MaxExtrapolationTokens(*model, diagnose_limits_);
  work.done = [this, model, finish, access, max_tokens, shared_done,
               render = std::move(render), opts = *std::move(options)](
                  absl::StatusOr<api::DiagnoseReport> report,
                  const batching::BatchStats& ran) {
    if (access != nullptr) {
      access->queue_ms = ran.queue_seconds * 1e3;
      access->inference_ms = ran.inference_seconds * 1e3;
    }
    absl::Status status = report.status();
    if (report.ok()) {
      DiagnoseAnswer answer;
      answer.model = model;
      answer.options = opts;
      answer.report = *std::move(report);
      answer.max_extrapolation_tokens = max_tokens;
      status = render(std::move(answer));
    }
    diagnose_pending_.fetch_sub(1);
    finish(model->name(), status, *shared_done);
  };
  if (absl::Status submitted = model->Diagnose(std::move(work));
      !submitted.ok()) {
    diagnose_pending_.fetch_sub(1);
    finish(model->name(), QueueRefusal(submitted), *shared_done);
  }
}

}  // namespace encoder::core
