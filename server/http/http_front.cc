#include "server/http/http_front.h"

#include <grpcpp/grpcpp.h>

#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "google/protobuf/stubs/common.h"
#include "server/common/status_macros.h"
#include "server/http/openai_embeddings.h"
#include "server/logging/access_log.h"
#include "server/model/config.h"
#include "server/service/status_util.h"

namespace encoder::http {
namespace {

using json = nlohmann::json;
using service::EmbedCall;
using service::EncoderServiceImpl;
using service::GrpcCodeName;
using service::HttpStatusFor;
using service::OpenAiErrorType;
using service::QuoteInput;
using service::UnknownModelMessage;
using X = std::shared_ptr<Exchange>;

constexpr char kJson[] = "application/json";
constexpr char kEmbeddingsRpc[] = "http:/v1/embeddings";
constexpr char kModelsRpc[] = "http:/v1/models";
constexpr char kInfoRpc[] = "http:/info";
constexpr char kRoutes[] =
    "/v1/embeddings, /v1/models, /health, /ready, /info, /metrics";

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
    code = absl::AsciiStrToLower(
        GrpcCodeName(static_cast<grpc::StatusCode>(status.code())));
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

// Errors the HTTP server answers itself (no route, wrong method, body over
// the limit, malformed framing, request timeout) as OpenAI's error JSON;
// /metrics keeps plain text.
Response RenderServerError(const Request* q, int status,
                           const std::string& message) {
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
                          QuoteInput(q != nullptr ? q->path : ""), "; see ",
                          kRoutes);
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

// One POST /v1/embeddings between parsing and its answer.
struct EmbeddingsCall {
  absl::Time start = absl::Now();
  logging::AccessRecord access;
  std::vector<Header> echo;  // X-Request-Id, traceparent
  v1::EmbedRequest request;
  v1::EmbedResponse response;
  bool base64 = false;
};

}  // namespace

class HttpFront::Handlers {
 public:
  Handlers(HttpFrontOptions options, service::EncoderServer* server)
      : options_(std::move(options)),
        server_(server),
        service_(server->service()) {}

  void Register(Router& http) {
    http.Add("POST", "/v1/embeddings",
             [this](X x) { Embeddings(std::move(x)); });
    http.Add("GET", "/v1/models", [this](X x) { Models(x, ""); });
    http.Add("GET", "/v1/models/*",
             [this](X x) { Models(x, x->request().path_param); });
    http.Add("GET", "/health", [this](X x) { Health(x); });
    http.Add("GET", "/ready", [this](X x) { Ready(x, nullptr); });
    http.Add("GET", "/ready/*",
             [this](X x) { Ready(x, &x->request().path_param); });
    http.Add("GET", "/info", [this](X x) { Info(x); });
  }

 private:
  // OK, or UNAUTHENTICATED (counted) for a missing or refused bearer token.
  // `probe`: a health or readiness route, open unless --auth-health.
  absl::Status Authenticate(const Request& q, bool probe) const {
    const service::EdgeAuth& edge = server_->edge_auth();
    if (edge.tokens == nullptr || (probe && !edge.protect_health)) {
      return absl::OkStatus();
    }
    const std::vector<std::string_view> values =
        q.HeaderValues("Authorization");
    std::vector<absl::string_view> views;
    for (std::string_view v : values) views.emplace_back(v.data(), v.size());
    const auth::AuthResult result = edge.tokens->Check(views);
    if (result == auth::AuthResult::kOk) return absl::OkStatus();
    edge.metrics->AuthFailure(auth::AuthResultName(result));
    return absl::UnauthenticatedError(
        result == auth::AuthResult::kMissing
            ? "missing \"Authorization: Bearer <token>\" header"
            : "the bearer token is not accepted");
  }

  // Counts a call answered here (not by SubmitEmbed) under `rpc`.
  void Count(const char* rpc, const absl::Status& status) const {
    service_->metrics()->RequestDone(
        rpc, "", GrpcCodeName(static_cast<grpc::StatusCode>(status.code())),
        0.0);
  }

  // One access-log line per call, as the gRPC front writes: the request id
  // from X-Request-Id (else a new one, sent back either way) and a valid
  // traceparent echoed. The batcher's answer is rendered on an I/O thread.
  void Embeddings(X x) {
    const Request& q = x->request();
    auto call = std::make_shared<EmbeddingsCall>();
    call->access = logging::BeginAccessRecord(
        "http", "POST /v1/embeddings",
        absl::StrCat(q.remote_address, ":", q.remote_port),
        q.HeaderValue("X-Request-Id"), q.HeaderValue("traceparent"));
    call->echo.push_back(
        {"X-Request-Id", logging::EnsureRequestId(&call->access)});
    if (!call->access.traceparent.empty()) {
      call->echo.push_back({"traceparent", call->access.traceparent});
    }
    absl::Status refused = Authenticate(q, false);
    std::string param;
    if (refused.ok()) {
      refused =
          ParseEmbeddingsBody(q.body, &call->request, &call->base64, &param);
    }
    if (!refused.ok()) {
      Count(kEmbeddingsRpc, refused);
      return Finish(x, call.get(), refused, ErrorResponse(refused, param));
    }
    EmbedCall embed;
    embed.peer = absl::StrCat("http:", q.remote_address, ":", q.remote_port);
    embed.deadline = x->deadline();
    // Polled by the batcher: a client that left stops its work.
    embed.is_cancelled = [x] { return x->cancelled(); };
    EmbeddingsCall* raw = call.get();
    service_->SubmitEmbed(
        kEmbeddingsRpc, std::move(embed), &raw->request, &raw->response,
        [x, call](const absl::Status& status) {
          x->Post([x, call, status] {
            if (!status.ok()) {
              std::string code;
              const std::string param = EmbeddingsErrorParam(status, &code);
              return Finish(x, call.get(), status,
                            ErrorResponse(status, param, code));
            }
            Response r;
            r.content_type = kJson;
            r.body = EmbeddingsResponseJson(call->response, call->base64);
            Finish(x, call.get(), status, std::move(r));
          });
        },
        &raw->access);
  }

  static void Finish(const X& x, EmbeddingsCall* call,
                     const absl::Status& status, Response response) {
    for (Header& h : call->echo) response.headers.push_back(std::move(h));
    logging::AccessRecord& access = call->access;
    access.status = GrpcCodeName(static_cast<grpc::StatusCode>(status.code()));
    if (!status.ok()) access.error = std::string(status.message());
    // A client that left gets nothing; the log says so (499).
    access.http_status =
        x->cancel_reason() == Exchange::CancelReason::kClientClosed
            ? 499
            : response.status;
    access.total_ms = absl::ToDoubleMilliseconds(absl::Now() - call->start);
    logging::LogAccess(access);
    x->Respond(std::move(response));
  }

  void Models(const X& x, const std::string& one) {
    absl::Status status = Authenticate(x->request(), false);
    runner::ModelCatalog* host = service_->host();
    if (status.ok() && (host == nullptr || service_->draining())) {
      status =
          absl::UnavailableError(host == nullptr ? "models are still loading"
                                                 : "server is shutting down");
    }
    if (!status.ok()) {
      Count(kModelsRpc, status);
      return x->Respond(ErrorResponse(status));
    }
    json data = json::array();
    for (const auto& m : host->List()) {
      json entry = {{"id", m->name()},
                    {"object", "model"},
                    {"created", 0},
                    {"owned_by", "encoder-server"}};
      if (!one.empty() && m->name() == one) {
        Count(kModelsRpc, absl::OkStatus());
        return x->Respond(JsonResponse(200, entry));
      }
      data.push_back(std::move(entry));
    }
    if (!one.empty()) {
      const absl::Status missing =
          absl::NotFoundError(UnknownModelMessage(one, *host));
      Count(kModelsRpc, missing);
      return x->Respond(ErrorResponse(missing, "model", "model_not_found"));
    }
    Count(kModelsRpc, absl::OkStatus());
    x->Respond(
        JsonResponse(200, {{"object", "list"}, {"data", std::move(data)}}));
  }

  void Health(const X& x) {
    if (absl::Status auth = Authenticate(x->request(), true); !auth.ok()) {
      return x->Respond(ErrorResponse(auth));
    }
    if (std::string why = service_->unhealthy(); !why.empty()) {
      return x->Respond(
          JsonResponse(503, {{"status", "unhealthy"}, {"reason", why}}));
    }
    x->Respond(JsonResponse(200, {{"status", "ok"}}));
  }

  void Ready(const X& x, const std::string* model) {
    if (absl::Status auth = Authenticate(x->request(), true); !auth.ok()) {
      return x->Respond(ErrorResponse(auth));
    }
    runner::ModelCatalog* host = service_->host();
    if (host == nullptr) {
      return x->Respond(JsonResponse(503, {{"status", "loading"}}));
    }
    if (service_->draining()) {
      return x->Respond(JsonResponse(503, {{"status", "draining"}}));
    }
    if (std::string why = service_->unhealthy(); !why.empty()) {
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
    if (absl::Status auth = Authenticate(x->request(), false); !auth.ok()) {
      Count(kInfoRpc, auth);
      return x->Respond(ErrorResponse(auth));
    }
    const service::ServiceLimits& limits = service_->limits();
    const ServerOptions& http = options_.http;
    json info = {
        {"version", ENCODER_PROJECT_VERSION},
        {"build",
         {{"commit", options_.git_commit},
          {"build_type", options_.build_type},
          {"libtorch", options_.libtorch_version},
          {"compiler", __VERSION__},
          {"grpc", grpc::Version()},
          {"protobuf",
           google::protobuf::internal::VersionString(GOOGLE_PROTOBUF_VERSION)},
          {"boost", BoostVersion()}}},
        {"state", service_->host() == nullptr
                      ? "loading"
                      : (service_->draining() ? "draining" : "ready")},
        {"limits",
         {{"max_inputs_per_request", limits.max_inputs_per_request},
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
          {"max_diagnose_tokens", service_->diagnose_limits().max_tokens},
          {"max_pending_diagnose", service_->diagnose_limits().max_pending}}},
        {"models", json::array()}};
    if (runner::ModelCatalog* host = service_->host(); host != nullptr) {
      info["default_model"] = host->default_model();
      info["limits"]["batch_memory_budget_bytes"] =
          host->batch_memory_budget_bytes();
      for (const runner::ServedModel* m : host->List()) {
        const runner::ModelDescription& d = m->description();
        const model::ModelConfig& c = d.config;
        info["models"].push_back(
            json{{"name", d.name},
                 {"family", d.family},
                 {"scheme", d.scheme.name},
                 {"dimensions", d.output_dim},
                 {"d_model", c.d_model},
                 {"num_layers", c.num_layers},
                 {"num_heads", c.num_heads},
                 {"max_input_tokens", c.max_length()},
                 {"pooling", model::PoolingName(c.pooling)},
                 {"normalize", c.normalize},
                 {"accepts_text", m->tokenizer() != nullptr},
                 {"prompts", d.prompts},
                 {"default_prompt_name", d.default_prompt_name},
                 {"device", d.device},
                 {"precision", d.precision},
                 {"skip_padding_min_share", d.skip_padding_min_share},
                 {"attention_kernel", d.attention_kernel},
                 {"batching",
                  {{"max_batch_sequences", d.batching.max_batch_sequences},
                   {"max_batch_tokens", d.batching.max_batch_tokens},
                   {"max_queued_sequences", d.batching.max_queued_sequences},
                   {"max_batch_memory_bytes", d.batching.max_batch_cost_bytes},
                   {"executions", d.batching.executions}}}});
      }
    }
    Count(kInfoRpc, absl::OkStatus());
    x->Respond(JsonResponse(200, info));
  }

  const HttpFrontOptions options_;
  service::EncoderServer* server_;
  EncoderServiceImpl* service_;
};

absl::StatusOr<std::unique_ptr<HttpFront>> HttpFront::Start(
    HttpFrontOptions options, service::EncoderServer* server) {
  std::unique_ptr<HttpFront> front(new HttpFront());
  options.http.render_error = RenderServerError;
  front->handlers_ = std::make_unique<Handlers>(options, server);
  Handlers* handlers = front->handlers_.get();
  options.http.routes = [handlers](Router& router) {
    handlers->Register(router);
  };
  auto render = options.render_metrics;
  if (!render) render = [] { return std::string(); };
  ASSIGN_OR_RETURN(auto http, metrics::MetricsHttpServer::Start(
                                  options.http, std::move(render)));
  front->http_ = std::move(http);
  return front;
}

HttpFront::~HttpFront() = default;

}  // namespace encoder::http
