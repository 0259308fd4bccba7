#include "server/http/http_front.h"

#include <algorithm>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "server/common/status_macros.h"
#include "server/core/compute_timing.h"
#include "server/core/status.h"
#include "server/http/api_docs.h"
#include "server/http/http_status.h"
#include "server/http/model_json.h"
#include "server/http/openai_embeddings.h"
#include "server/http/tei_embed.h"
#include "server/http/tei_info.h"
#include "server/http/tei_score.h"
#include "server/http/tei_tokens.h"
#include "server/logging/access_log.h"
#include "server/tracing/tracer.h"

namespace encoder::http {
namespace {

using json = nlohmann::json;
using core::QuoteInput;
using core::StatusCodeName;
using core::UnknownModelMessage;
using X = std::shared_ptr<Exchange>;

constexpr char kJson[] = "application/json";
constexpr char kEmbeddingsRpc[] = "http:/v1/embeddings";
constexpr char kModelsRpc[] = "http:/v1/models";
constexpr char kInfoRpc[] = "http:/info";
constexpr char kTeiEmbedRpc[] = "http:/embed";
constexpr char kTeiEmbedAllRpc[] = "http:/embed_all";
constexpr char kTeiEmbedSparseRpc[] = "http:/embed_sparse";
constexpr char kTeiRerankRpc[] = "http:/rerank";
constexpr char kTeiPredictRpc[] = "http:/predict";
constexpr char kRerankV1Rpc[] = "http:/v1/rerank";
constexpr char kTeiTokenizeRpc[] = "http:/tokenize";
constexpr char kTeiSimilarityRpc[] = "http:/similarity";
constexpr char kTeiDecodeRpc[] = "http:/decode";

// /info's "kernels" of a model: the libraries' instruction sets and each
// product kernel its warm-up ran (model::TraceKernels).
// OpenAI's error object; `param` and `code` are null when empty.
json ErrorBody(const std::string& message, int http_status,
               const std::string& param, const std::string& code) {
  return {{"error",
           {{"message", message},
            {"type", OpenAiErrorType(http_status)},
            {"param", param.empty() ? json(nullptr) : json(param)},
            {"code", code.empty() ? json(nullptr) : json(code)}}}};
}

Response JsonResponse(int http_status, const json& body) {
  Response r;
  r.status = http_status;
  r.content_type = kJson;
  // Invalid UTF-8 from a caller's input (quoted in a message) is replaced,
  // never a reason to fail the response.
  r.body = body.dump(-1, ' ', false, json::error_handler_t::replace);
  return r;
}

// An error response for `status`; `code` defaults to the lower-case gRPC
// code name ("invalid_argument").
Response ErrorResponse(const absl::Status& status,
                       const std::string& param = "", std::string code = "") {
  const int http_status = HttpStatusFor(status);
  if (code.empty()) {
    code = absl::AsciiStrToLower(StatusCodeName(status.code()));
  }
  Response r = JsonResponse(
      http_status,
      ErrorBody(std::string(status.message()), http_status, param, code));
  if (http_status == 401) {
    r.headers.push_back({"WWW-Authenticate", "Bearer"});
  } else if (http_status == 429 || http_status == 503) {
    r.headers.push_back({"Retry-After", "1"});
  }
  return r;
}

// The paths `routes` serve, each once, in the order added: what a 404
// lists.
std::string PathListing(
    const std::vector<std::pair<std::string, std::string>>& routes) {
  std::vector<std::string> paths;
  for (const auto& [method, pattern] : routes) {
    if (std::find(paths.begin(), paths.end(), pattern) == paths.end()) {
      paths.push_back(pattern);
    }
  }
  return absl::StrJoin(paths, ", ");
}

// Errors the HTTP server answers itself (no route, wrong method, body over
// the limit, malformed framing, request timeout) as OpenAI's error JSON;
// /metrics keeps plain text. `routes`: the paths served (PathListing).
Response RenderServerError(const Request* q, int status,
                           const std::string& message,
                           const std::string& routes) {
  if (q != nullptr && q->path == "/metrics") {
    Response r;
    r.status = status;
    r.body = message + "\n";
    return r;
  }
  std::string text = message;
  std::string code;
  switch (status) {
    case 404:
      text = absl::StrCat("no route ", q != nullptr ? q->method : "", " ",
                          QuoteInput(q != nullptr ? q->path : ""),
                          "; the routes: ", routes);
      break;
    case 405:
      code = "method_not_allowed";
      break;
    case 413:
      code = "request_too_large";
      break;
    case 504:
      code = "deadline_exceeded";
      break;
    default:
      break;
  }
  return JsonResponse(status, ErrorBody(text, status, "", code));
}

// The tokens truncation dropped from a call's inputs, all together (0 when
// nothing was cut): inputs past their model's length are truncated unless
// the request or --long-input says otherwise.
Header TruncatedTokensHeader(int64_t tokens) {
  return {"X-Truncated-Tokens", absl::StrCat(tokens)};
}

// X-Truncated-Tokens and the answer's counts and times
// (core::ComputeTimingFields) as response headers.
template <typename Answer>
void AddComputeHeaders(const Answer& answer, Response* r) {
  r->headers.push_back(TruncatedTokensHeader(answer.truncated_tokens));
  for (auto& [name, value] : core::ComputeTimingFields(answer)) {
    r->headers.push_back({std::move(name), std::move(value)});
  }
}

// One call between its opening and its answer: the access record, and
// the headers echoed on the answer.
struct CallLog {
  absl::Time start = absl::Now();
  logging::AccessRecord access;
  std::vector<Header> echo;  // X-Request-Id, traceparent
};

}  // namespace

class HttpFront::Handlers {
 public:
  Handlers(HttpFrontOptions options, core::Inference* core, core::EdgeAuth auth)
      : options_(std::move(options)), core_(core), auth_(auth) {}

  void Register(Router& http) {
    http.Add("POST", "/v1/embeddings",
             [this](X x) { Embeddings(std::move(x)); });
    http.Add("POST", "/embed", [this](X x) { TeiEmbed(std::move(x), false); });
    http.Add("POST", "/embed_sparse", [this](X x) {
      TeiEmbedRoute(std::move(x), kTeiEmbedSparseRpc, "POST /embed_sparse",
                    ParseTeiSparseBody, TeiSparseJson);
    });
    http.Add("POST", "/embed_all",
             [this](X x) { TeiEmbed(std::move(x), true); });
    http.Add("POST", "/rerank", [this](X x) {
      Score(std::move(x), kTeiRerankRpc, "POST /rerank", ParseTeiRerankBody,
            TeiRerankJson);
    });
    http.Add("POST", "/predict", [this](X x) {
      Score(std::move(x), kTeiPredictRpc, "POST /predict", ParseTeiPredictBody,
            TeiPredictJson);
    });
    http.Add("POST", "/v1/rerank", [this](X x) { RerankV1(std::move(x)); });
    http.Add("POST", "/similarity",
             [this](X x) { TeiSimilarity(std::move(x)); });
    http.Add("POST", "/", [this](X x) { TeiRoot(std::move(x)); });
    http.Add("POST", "/tokenize", [this](X x) { TeiTokens(x, false); });
    http.Add("POST", "/decode", [this](X x) { TeiTokens(x, true); });
    http.Add("GET", "/v1/models", [this](X x) { Models(x, ""); });
    http.Add("GET", "/v1/models/*",
             [this](X x) { Models(x, x->request().path_param); });
    http.Add("GET", "/health", [this](X x) { Health(x); });
    http.Add("GET", "/ready", [this](X x) { Ready(x, nullptr); });
    http.Add("GET", "/ready/*",
             [this](X x) { Ready(x, &x->request().path_param); });
    http.Add("GET", "/info", [this](X x) { Info(x); });
    if (options_.api_docs) AddApiDocRoutes(http, ENCODER_PROJECT_VERSION);
  }

 private:
  // OK, or UNAUTHENTICATED (counted) for a missing or refused bearer token.
  // `probe`: a health or readiness route, open unless --auth-health.
  absl::Status Authenticate(const Request& q, bool probe) const {
    if (probe && !auth_.protect_health) return absl::OkStatus();
    std::vector<absl::string_view> views;
    for (std::string_view v : q.HeaderValues("Authorization")) {
      views.emplace_back(v.data(), v.size());
    }
    return core::CheckBearer(auth_, views,
                             "\"Authorization: Bearer <token>\" header");
  }

  // Every logged route's opening: an access record with the request id
  // from X-Request-Id (else a new one, sent back either way) and a valid
  // traceparent echoed, and the bearer token checked. A refused call is
  // counted under `rpc` and answered here; then null.
  std::shared_ptr<CallLog> Open(const X& x, const char* rpc,
                                const char* method) {
    const Request& q = x->request();
    auto log = std::make_shared<CallLog>();
    log->access = logging::BeginAccessRecord(
        "http", method, absl::StrCat(q.remote_address, ":", q.remote_port),
        q.HeaderValue("X-Request-Id"), q.HeaderValue("traceparent"));
    tracing::BeginCall(q.HeaderValue("tracestate"), &log->access);
    log->echo.push_back(
        {"X-Request-Id", logging::EnsureRequestId(&log->access)});
    if (!log->access.traceparent.empty()) {
      log->echo.push_back({"traceparent", log->access.traceparent});
    }
    if (absl::Status auth = Authenticate(q, false); !auth.ok()) {
      core_->RecordRejected(rpc, auth);
      Finish(x, log.get(), auth, ErrorResponse(auth));
      return nullptr;
    }
    return log;
  }

  // The core's description of the call: its connection, deadline and
  // cancellation (a client that left stops its work).
  static core::Call CallOf(const X& x, const char* rpc,
                           logging::AccessRecord* access) {
    const Request& q = x->request();
    core::Call call;
    call.rpc = rpc;
    call.peer = absl::StrCat("http:", q.remote_address, ":", q.remote_port);
    call.deadline = x->deadline();
    call.is_cancelled = [x] { return x->cancelled(); };
    call.access = access;
    return call;
  }

  // Every route's core -> render step: the core's answer (on a batcher
  // thread) posted to the exchange's I/O thread, there rendered by
  // `render` (a JSON body, with the compute-time headers) or, failed, by
  // `error`, and the call finished and logged.
  template <typename Answer>
  static std::function<void(absl::StatusOr<Answer>)> Reply(
      X x, std::shared_ptr<CallLog> log,
      std::function<std::string(const Answer&)> render,
      std::function<Response(const absl::Status&)> error) {
    return [x = std::move(x), log = std::move(log), render = std::move(render),
            error = std::move(error)](absl::StatusOr<Answer> answer) {
      auto shared = std::make_shared<absl::StatusOr<Answer>>(std::move(answer));
      x->Post([x, log, render, error, shared] {
        if (!shared->ok()) {
          return Finish(x, log.get(), shared->status(),
                        error(shared->status()));
        }
        Response r;
        r.content_type = kJson;
        r.body = render(**shared);
        AddComputeHeaders(**shared, &r);
        Finish(x, log.get(), absl::OkStatus(), std::move(r));
      });
    };
  }

  // OpenAI's POST /v1/embeddings (openai_embeddings.h).
  void Embeddings(X x) {
    std::shared_ptr<CallLog> log =
        Open(x, kEmbeddingsRpc, "POST /v1/embeddings");
    if (log == nullptr) return;
    core::EmbedQuery query;
    bool base64 = false;
    std::string param;
    if (absl::Status parsed =
            ParseEmbeddingsBody(x->request().body, &query, &base64, &param);
        !parsed.ok()) {
      core_->RecordRejected(kEmbeddingsRpc, parsed);
      return Finish(x, log.get(), parsed, ErrorResponse(parsed, param));
    }
    core_->Embed(CallOf(x, kEmbeddingsRpc, &log->access), std::move(query),
                 Reply<core::EmbedAnswer>(
                     x, log,
                     [base64](const core::EmbedAnswer& answer) {
                       return EmbeddingsResponseJson(answer, base64);
                     },
                     [](const absl::Status& status) {
                       std::string code;
                       const std::string param =
                           EmbeddingsErrorParam(status, &code);
                       return ErrorResponse(status, param, code);
                     }));
  }

  // text-embeddings-inference's /embed (pooled vectors) and /embed_all
  // (every token's vector), with its error shape (tei_embed.h).
  void TeiEmbed(X x, bool all) {
    if (all) {
      return TeiEmbedRoute(
          std::move(x), kTeiEmbedAllRpc, "POST /embed_all",
          [](const std::string& body, core::EmbedQuery* query) {
            return ParseTeiEmbedBody(body, true, query);
          },
          [](const core::EmbedAnswer& answer) {
            return TeiEmbedJson(answer, true);
          });
    }
    TeiEmbedRoute(
        std::move(x), kTeiEmbedRpc, "POST /embed",
        [](const std::string& body, core::EmbedQuery* query) {
          return ParseTeiEmbedBody(body, false, query);
        },
        [](const core::EmbedAnswer& answer) {
          return TeiEmbedJson(answer, false);
        });
  }

  // TEI's POST /similarity (tei_embed.h).
  void TeiSimilarity(X x) {
    TeiEmbedRoute(std::move(x), kTeiSimilarityRpc, "POST /similarity",
                  ParseTeiSimilarityBody, TeiSimilarityJson);
  }

  // TEI's POST /: the route of the named (or default) model's task, as
  // TEI routes it: rerank for a cross-encoder, predict for a classifier,
  // embed otherwise (a late-interaction model embeds).
  void TeiRoot(X x) {
    const api::ModelCatalog* host = core_->host();
    const api::ServedModel* model =
        host == nullptr ? nullptr : host->Find(TeiModelOf(x->request().body));
    auto has = [model](api::Task task) {
      return model != nullptr && model->description().serves(task);
    };
    if (has(api::Task::kRerank) && !model->description().late_interaction) {
      return Score(std::move(x), kTeiRerankRpc, "POST /", ParseTeiRerankBody,
                   TeiRerankJson);
    }
    if (has(api::Task::kClassify)) {
      return Score(std::move(x), kTeiPredictRpc, "POST /", ParseTeiPredictBody,
                   TeiPredictJson);
    }
    TeiEmbed(std::move(x), false);
  }

  // An Embed through TEI's request and error shapes: `parse` maps the
  // body, `render` the answer (on an I/O thread).
  using ParseEmbed =
      std::function<absl::Status(const std::string&, core::EmbedQuery*)>;
  using RenderEmbed = std::function<std::string(const core::EmbedAnswer&)>;
  void TeiEmbedRoute(X x, const char* rpc, const char* method,
                     const ParseEmbed& parse, RenderEmbed render) {
    std::shared_ptr<CallLog> log = Open(x, rpc, method);
    if (log == nullptr) return;
    core::EmbedQuery query;
    if (absl::Status parsed = parse(x->request().body, &query); !parsed.ok()) {
      core_->RecordRejected(rpc, parsed);
      return Finish(x, log.get(), parsed, TeiErrorResponse(parsed));
    }
    core_->Embed(
        CallOf(x, rpc, &log->access), std::move(query),
        Reply<core::EmbedAnswer>(x, log, std::move(render), TeiErrorResponse));
  }

  // Runs a parsed ScoreQuery and renders the answer with `render` on an
  // I/O thread; errors in `error`'s shape.
  using Render = std::string (*)(const core::ScoreAnswer&,
                                 const ScoreRendering&);
  using RenderError = Response (*)(const absl::Status&);
  void RunScore(const X& x, const char* rpc, std::shared_ptr<CallLog> log,
                core::ScoreQuery query,
                std::shared_ptr<const ScoreRendering> rendering, Render render,
                RenderError error) {
    core_->Score(CallOf(x, rpc, &log->access), std::move(query),
                 Reply<core::ScoreAnswer>(
                     x, log,
                     [rendering, render](const core::ScoreAnswer& answer) {
                       return render(answer, *rendering);
                     },
                     error));
  }

  // text-embeddings-inference's /rerank and /predict (tei_score.h).
  using ParseTei = absl::Status (*)(const std::string&, core::ScoreQuery*,
                                    ScoreRendering*);
  void Score(X x, const char* rpc, const char* method, ParseTei parse,
             Render render) {
    std::shared_ptr<CallLog> log = Open(x, rpc, method);
    if (log == nullptr) return;
    core::ScoreQuery query;
    auto rendering = std::make_shared<ScoreRendering>();
    if (absl::Status parsed = parse(x->request().body, &query, rendering.get());
        !parsed.ok()) {
      core_->RecordRejected(rpc, parsed);
      return Finish(x, log.get(), parsed, TeiErrorResponse(parsed));
    }
    RunScore(x, rpc, std::move(log), std::move(query), std::move(rendering),
             render, TeiErrorResponse);
  }

  // The Cohere/Jina-style /v1/rerank, with OpenAI's error shape.
  void RerankV1(X x) {
    std::shared_ptr<CallLog> log = Open(x, kRerankV1Rpc, "POST /v1/rerank");
    if (log == nullptr) return;
    core::ScoreQuery query;
    auto rendering = std::make_shared<ScoreRendering>();
    std::string param;
    if (absl::Status parsed = ParseRerankV1Body(x->request().body, &query,
                                                rendering.get(), &param);
        !parsed.ok()) {
      core_->RecordRejected(kRerankV1Rpc, parsed);
      return Finish(x, log.get(), parsed, ErrorResponse(parsed, param));
    }
    query.request_id = log->access.request_id;
    RunScore(x, kRerankV1Rpc, std::move(log), std::move(query),
             std::move(rendering), RerankV1Json,
             [](const absl::Status& status) { return ErrorResponse(status); });
  }

  // text-embeddings-inference's /tokenize and /decode (tei_tokens.h),
  // answered on this thread: no model runs.
  void TeiTokens(const X& x, bool decode) {
    const char* rpc = decode ? kTeiDecodeRpc : kTeiTokenizeRpc;
    std::shared_ptr<CallLog> log =
        Open(x, rpc, decode ? "POST /decode" : "POST /tokenize");
    if (log == nullptr) return;
    core_->BeginCall(rpc);
    std::string model_name;
    auto answer = [&](const absl::Status& status, Response response) {
      core_->EndCall(rpc, model_name, status, log->start);
      Finish(x, log.get(), status, std::move(response));
    };
    core::TokenizeQuery tokenize;
    core::DecodeQuery ids;
    const std::string& body = x->request().body;
    const absl::Status parsed = decode ? ParseTeiDecodeBody(body, &ids)
                                       : ParseTeiTokenizeBody(body, &tokenize);
    if (!parsed.ok()) return answer(parsed, TeiErrorResponse(parsed));
    absl::StatusOr<const api::ModelCatalog*> host = core_->Admit();
    if (!host.ok()) {
      return answer(host.status(), TeiErrorResponse(host.status()));
    }
    Response r;
    r.content_type = kJson;
    if (decode) {
      absl::StatusOr<core::DecodeAnswer> out =
          core::Decode(**host, ids, core_->limits());
      if (!out.ok()) {
        return answer(out.status(), TeiErrorResponse(out.status()));
      }
      model_name = out->model->name();
      r.body = TeiDecodeJson(*out);
    } else {
      absl::StatusOr<core::TokenizeAnswer> out =
          core::Tokenize(**host, tokenize, core_->limits());
      if (!out.ok()) {
        return answer(out.status(), TeiErrorResponse(out.status()));
      }
      model_name = out->model->name();
      r.body = TeiTokenizeJson(*out);
    }
    answer(absl::OkStatus(), std::move(r));
  }

  static Response TeiErrorResponse(const absl::Status& status) {
    const TeiError e = TeiErrorOf(status);
    Response r;
    r.status = e.http_status;
    r.content_type = kJson;
    r.body = e.body;
    if (e.http_status == 429 || e.http_status == 503) {
      r.headers.push_back({"Retry-After", "1"});
    }
    return r;
  }

  static void Finish(const X& x, CallLog* log, const absl::Status& status,
                     Response response) {
    for (Header& h : log->echo) response.headers.push_back(std::move(h));
    logging::AccessRecord& access = log->access;
    access.status = StatusCodeName(status.code());
    if (!status.ok()) access.error = std::string(status.message());
    // A client that left gets nothing; the log says so (499).
    access.http_status =
        x->cancel_reason() == Exchange::CancelReason::kClientClosed
            ? 499
            : response.status;
    access.total_ms = absl::ToDoubleMilliseconds(absl::Now() - log->start);
    logging::LogAccess(access);
    tracing::EndCall(access);
    x->Respond(std::move(response));
  }

  void Models(const X& x, const std::string& one) {
    std::shared_ptr<CallLog> log = Open(x, kModelsRpc, "GET /v1/models");
    if (log == nullptr) return;
    core_->BeginCall(kModelsRpc);
    auto answer = [&](const absl::Status& status, Response response) {
      core_->EndCall(kModelsRpc, "", status, log->start);
      Finish(x, log.get(), status, std::move(response));
    };
    absl::StatusOr<const api::ModelCatalog*> host = core_->Admit();
    if (!host.ok()) return answer(host.status(), ErrorResponse(host.status()));
    json data = json::array();
    for (const auto& m : (*host)->List()) {
      json entry = {{"id", m->name()},
                    {"object", "model"},
                    {"created", 0},
                    {"owned_by", "encoder-server"}};
      if (!one.empty() && m->name() == one) {
        return answer(absl::OkStatus(), JsonResponse(200, entry));
      }
      data.push_back(std::move(entry));
    }
    if (!one.empty()) {
      const absl::Status missing =
          absl::NotFoundError(UnknownModelMessage(one, **host));
      return answer(missing,
                    ErrorResponse(missing, "model", "model_not_found"));
    }
    answer(absl::OkStatus(),
           JsonResponse(200, {{"object", "list"}, {"data", std::move(data)}}));
  }

  void Health(const X& x) {
    if (absl::Status auth = Authenticate(x->request(), true); !auth.ok()) {
      return x->Respond(ErrorResponse(auth));
    }
    if (std::string why = core_->unhealthy(); !why.empty()) {
      return x->Respond(
          JsonResponse(503, {{"status", "unhealthy"}, {"reason", why}}));
    }
    x->Respond(JsonResponse(200, {{"status", "ok"}}));
  }

  // {"status": "loading" | "downloading", "detail": ...} before the models
  // are served.
  json StartupState() const {
    auto [state, detail] = core_->startup_state();
    json out = {{"status", state}};
    if (!detail.empty()) out["detail"] = detail;
    return out;
  }

  void Ready(const X& x, const std::string* model) {
    if (absl::Status auth = Authenticate(x->request(), true); !auth.ok()) {
      return x->Respond(ErrorResponse(auth));
    }
    const api::ModelCatalog* host = core_->host();
    if (host == nullptr) {
      return x->Respond(JsonResponse(503, StartupState()));
    }
    if (core_->draining()) {
      return x->Respond(JsonResponse(503, {{"status", "draining"}}));
    }
    if (std::string why = core_->unhealthy(); !why.empty()) {
      return x->Respond(
          JsonResponse(503, {{"status", "unhealthy"}, {"reason", why}}));
    }
    if (model != nullptr) {
      if (host->Find(*model) == nullptr) {
        return x->Respond(ErrorResponse(
            absl::NotFoundError(UnknownModelMessage(*model, *host)), "model",
            "model_not_found"));
      }
      return x->Respond(
          JsonResponse(200, {{"status", "ready"}, {"model", *model}}));
    }
    json names = json::array();
    for (const auto& m : host->List()) names.push_back(m->name());
    x->Respond(JsonResponse(200, {{"status", "ready"}, {"models", names}}));
  }

  void Info(const X& x) {
    std::shared_ptr<CallLog> log = Open(x, kInfoRpc, "GET /info");
    if (log == nullptr) return;
    core_->BeginCall(kInfoRpc);
    const core::ServiceLimits& limits = core_->limits();
    const ServerOptions& http = options_.http;
    json info = {
        {"version", ENCODER_PROJECT_VERSION},
        {"build",
         {{"commit", options_.git_commit},
          {"build_type", options_.build_type},
          {"libtorch", options_.libtorch_version},
          {"compiler", __VERSION__},
          {"grpc", options_.grpc_version},
          {"protobuf", options_.protobuf_version},
          {"boost", BoostVersion()}}},
        {"state", core_->host() == nullptr
                      ? core_->startup_state().first
                      : (core_->draining() ? "draining" : "ready")},
        {"limits",
         {{"max_inputs_per_request", limits.max_inputs_per_request},
          {"max_tokenize_texts_per_request",
           limits.max_tokenize_texts_per_request},
          {"max_chunks_per_input", limits.max_chunks_per_input},
          {"max_send_message_bytes", limits.max_send_message_bytes},
          {"max_unread_response_bytes", limits.unread.total_bytes},
          {"max_unread_response_bytes_per_connection",
           limits.unread.per_connection_bytes},
          {"http_max_body_bytes", http.max_body_bytes},
          {"http_max_header_bytes", http.max_header_bytes},
          {"http_max_connections", http.max_connections},
          {"http_max_pipelined_requests", http.max_pipelined_requests},
          {"http_request_timeout_seconds",
           absl::ToDoubleSeconds(http.request_timeout)},
          {"http_keep_alive_seconds",
           absl::ToDoubleSeconds(http.keep_alive_timeout)},
          {"max_diagnose_tokens", core_->diagnose_limits().max_tokens},
          {"max_pending_diagnose", core_->diagnose_limits().max_pending}}},
        {"models", json::array()}};
    if (const api::ModelCatalog* host = core_->host(); host != nullptr) {
      info["default_model"] = host->default_model();
      info["limits"]["batch_memory_budget_bytes"] =
          host->batch_memory_budget_bytes();
      for (const core::ModelReport& report :
           core::DescribeModels(*host, limits, core_->diagnose_limits())) {
        if (report.is_default) {
          info.update(TeiInfoFields(report, limits, http.io_threads));
        }
        info["models"].push_back(ModelReportJson(report));
      }
    }
    core_->EndCall(kInfoRpc, "", absl::OkStatus(), log->start);
    Finish(x, log.get(), absl::OkStatus(), JsonResponse(200, info));
  }

  const HttpFrontOptions options_;
  core::Inference* const core_;
  const core::EdgeAuth auth_;
};

absl::StatusOr<std::unique_ptr<HttpFront>> HttpFront::Start(
    HttpFrontOptions options, core::Inference* core, core::EdgeAuth auth) {
  std::unique_ptr<HttpFront> front(new HttpFront());
  // Written once, while the routes are added before the port is bound;
  // read only by answers after that.
  auto listing = std::make_shared<std::string>();
  options.http.render_error = [listing](const Request* q, int status,
                                        const std::string& message) {
    return RenderServerError(q, status, message, *listing);
  };
  front->handlers_ = std::make_unique<Handlers>(options, core, auth);
  Handlers* handlers = front->handlers_.get();
  options.http.routes = [handlers, listing](Router& router) {
    handlers->Register(router);
    *listing = PathListing(router.Routes());
  };
  auto render = options.render_metrics;
  if (!render) render = [] { return std::string(); };
  ASSIGN_OR_RETURN(auto http,
                   MetricsHttpServer::Start(options.http, std::move(render)));
  front->http_ = std::move(http);
  return front;
}

HttpFront::~HttpFront() = default;

}  // namespace encoder::http
