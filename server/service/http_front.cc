#include "server/service/http_front.h"

#include <grpcpp/grpcpp.h>
#include <httplib.h>

#include <future>
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
#include "server/logging/access_log.h"
#include "server/model/config.h"
#include "server/service/openai_embeddings.h"
#include "server/service/status_util.h"

namespace encoder::service {
namespace {

using json = nlohmann::json;

constexpr char kJson[] = "application/json";
constexpr char kEmbeddingsRpc[] = "http:/v1/embeddings";
constexpr char kModelsRpc[] = "http:/v1/models";
constexpr char kInfoRpc[] = "http:/info";

// OpenAI's error object; `param` and `code` are null when empty.
json ErrorBody(const std::string& message, int http_status,
               const std::string& param, const std::string& code) {
  return {{"error",
           {{"message", message},
            {"type", OpenAiErrorType(http_status)},
            {"param", param.empty() ? json(nullptr) : json(param)},
            {"code", code.empty() ? json(nullptr) : json(code)}}}};
}

void SendJson(httplib::Response& response, int http_status, const json& body) {
  response.status = http_status;
  // Invalid UTF-8 from a caller's input (quoted in a message) is replaced,
  // never a reason to fail the response.
  response.set_content(
      body.dump(-1, ' ', false, json::error_handler_t::replace), kJson);
}

// An error response for `status`; `code` defaults to the lower-case gRPC
// code name ("invalid_argument").
void SendError(httplib::Response& response, const absl::Status& status,
               const std::string& param = "", std::string code = "") {
  const int http_status = HttpStatusFor(status);
  if (code.empty()) {
    code = absl::AsciiStrToLower(
        GrpcCodeName(static_cast<grpc::StatusCode>(status.code())));
  }
  if (http_status == 401) {
    response.set_header("WWW-Authenticate", "Bearer");
  } else if (http_status == 429 || http_status == 503) {
    response.set_header("Retry-After", "1");
  }
  SendJson(response, http_status,
           ErrorBody(std::string(status.message()), http_status, param, code));
}

}  // namespace

class HttpFront::Handlers {
 public:
  Handlers(HttpFrontOptions options, EncoderServer* server)
      : options_(std::move(options)),
        server_(server),
        service_(server->service()) {}

  void Register(httplib::Server& http) {
    http.Post("/v1/embeddings",
              [this](const httplib::Request& q, httplib::Response& r) {
                Embeddings(q, r);
              });
    http.Get("/v1/models", [this](const httplib::Request& q,
                                  httplib::Response& r) { Models(q, r, ""); });
    http.Get(R"(/v1/models/(.+))",
             [this](const httplib::Request& q, httplib::Response& r) {
               Models(q, r, q.matches[1].str());
             });
    http.Get("/health", [this](const httplib::Request& q,
                               httplib::Response& r) { Health(q, r); });
    http.Get("/ready", [this](const httplib::Request& q, httplib::Response& r) {
      Ready(q, r, nullptr);
    });
    http.Get(R"(/ready/(.+))",
             [this](const httplib::Request& q, httplib::Response& r) {
               const std::string model = q.matches[1].str();
               Ready(q, r, &model);
             });
    http.Get("/info", [this](const httplib::Request& q, httplib::Response& r) {
      Info(q, r);
    });
    // Errors httplib produces itself (no route, body over the limit, bad
    // request line) get OpenAI's error JSON too; /metrics keeps its text.
    http.set_error_handler([](const httplib::Request& q, httplib::Response& r) {
      if (!r.body.empty() || q.path == "/metrics") return;
      std::string message;
      switch (r.status) {
        case 404:
          message = absl::StrCat("no route ", q.method, " ", QuoteInput(q.path),
                                 "; see /v1/embeddings, /v1/models, /health, "
                                 "/ready, /info, /metrics");
          break;
        case 413:
          message =
              "the request body is over the limit (--http-max-body-bytes)";
          break;
        case 405:
          message = absl::StrCat("method ", q.method, " not allowed here");
          break;
        default:
          message = absl::StrCat("HTTP ", r.status);
      }
      SendJson(r, r.status,
               ErrorBody(message, r.status, "",
                         r.status == 413 ? "request_too_large" : ""));
    });
    // Wrong methods on the API's routes: 405 naming the right one.
    auto only = [](const char* allowed) {
      return [allowed](const httplib::Request& q, httplib::Response& r) {
        r.set_header("Allow", allowed);
        SendJson(r, 405,
                 ErrorBody(absl::StrCat("use ", allowed, " for ", q.path), 405,
                           "", "method_not_allowed"));
      };
    };
    http.Get("/v1/embeddings", only("POST"));
    for (const char* path : {"/v1/models", "/health", "/ready", "/info"}) {
      http.Post(path, only("GET"));
    }
  }

 private:
  // OK, or UNAUTHENTICATED (counted) for a missing or refused bearer token.
  // `probe`: a health or readiness route, open unless --auth-health.
  absl::Status Authenticate(const httplib::Request& q, bool probe) const {
    const EdgeAuth& edge = server_->edge_auth();
    if (edge.tokens == nullptr || (probe && !edge.protect_health)) {
      return absl::OkStatus();
    }
    std::vector<absl::string_view> values;
    auto [begin, end] = q.headers.equal_range("Authorization");
    for (auto it = begin; it != end; ++it) values.emplace_back(it->second);
    const auth::AuthResult result = edge.tokens->Check(values);
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
  // traceparent echoed.
  void Embeddings(const httplib::Request& q, httplib::Response& r) {
    const absl::Time start = absl::Now();
    logging::AccessRecord access = logging::BeginAccessRecord(
        "http", "POST /v1/embeddings",
        absl::StrCat(q.remote_addr, ":", q.remote_port),
        q.get_header_value("X-Request-Id"), q.get_header_value("traceparent"));
    r.set_header("X-Request-Id", logging::EnsureRequestId(&access));
    if (!access.traceparent.empty()) {
      r.set_header("traceparent", access.traceparent);
    }
    const absl::Status status = ServeEmbeddings(q, r, &access);
    access.status = GrpcCodeName(static_cast<grpc::StatusCode>(status.code()));
    if (!status.ok()) access.error = std::string(status.message());
    access.http_status = r.status;
    access.total_ms = absl::ToDoubleMilliseconds(absl::Now() - start);
    logging::LogAccess(access);
  }

  absl::Status ServeEmbeddings(const httplib::Request& q, httplib::Response& r,
                               logging::AccessRecord* access) {
    if (absl::Status auth = Authenticate(q, false); !auth.ok()) {
      Count(kEmbeddingsRpc, auth);
      SendError(r, auth);
      return auth;
    }
    v1::EmbedRequest request;
    bool base64 = false;
    std::string param;
    if (absl::Status parsed =
            ParseEmbeddingsBody(q.body, &request, &base64, &param);
        !parsed.ok()) {
      Count(kEmbeddingsRpc, parsed);
      SendError(r, parsed, param);
      return parsed;
    }
    v1::EmbedResponse response;
    std::promise<absl::Status> promise;
    std::future<absl::Status> result = promise.get_future();
    EmbedCall call;
    call.peer = absl::StrCat("http:", q.remote_addr, ":", q.remote_port);
    service_->SubmitEmbed(
        kEmbeddingsRpc, std::move(call), &request, &response,
        [&promise](const absl::Status& s) { promise.set_value(s); }, access);
    const absl::Status status = result.get();
    if (!status.ok()) {
      std::string code;
      param = EmbeddingsErrorParam(status, &code);
      SendError(r, status, param, code);
      return status;
    }
    r.status = 200;
    r.set_content(EmbeddingsResponseJson(response, base64), kJson);
    return absl::OkStatus();
  }

  void Models(const httplib::Request& q, httplib::Response& r,
              const std::string& one) {
    absl::Status status = Authenticate(q, false);
    runner::ModelCatalog* host = service_->host();
    if (status.ok() && (host == nullptr || service_->draining())) {
      status =
          absl::UnavailableError(host == nullptr ? "models are still loading"
                                                 : "server is shutting down");
    }
    if (!status.ok()) {
      Count(kModelsRpc, status);
      return SendError(r, status);
    }
    json data = json::array();
    for (const auto& m : host->List()) {
      json entry = {{"id", m->name()},
                    {"object", "model"},
                    {"created", 0},
                    {"owned_by", "encoder-server"}};
      if (!one.empty() && m->name() == one) {
        Count(kModelsRpc, absl::OkStatus());
        return SendJson(r, 200, entry);
      }
      data.push_back(std::move(entry));
    }
    if (!one.empty()) {
      const absl::Status missing =
          absl::NotFoundError(UnknownModelMessage(one, *host));
      Count(kModelsRpc, missing);
      return SendError(r, missing, "model", "model_not_found");
    }
    Count(kModelsRpc, absl::OkStatus());
    SendJson(r, 200, {{"object", "list"}, {"data", std::move(data)}});
  }

  void Health(const httplib::Request& q, httplib::Response& r) {
    if (absl::Status auth = Authenticate(q, true); !auth.ok()) {
      return SendError(r, auth);
    }
    SendJson(r, 200, {{"status", "ok"}});
  }

  void Ready(const httplib::Request& q, httplib::Response& r,
             const std::string* model) {
    if (absl::Status auth = Authenticate(q, true); !auth.ok()) {
      return SendError(r, auth);
    }
    runner::ModelCatalog* host = service_->host();
    if (host == nullptr) {
      return SendJson(r, 503, {{"status", "loading"}});
    }
    if (service_->draining()) {
      return SendJson(r, 503, {{"status", "draining"}});
    }
    if (model != nullptr) {
      if (host->Find(*model) == nullptr) {
        return SendError(
            r, absl::NotFoundError(UnknownModelMessage(*model, *host)), "model",
            "model_not_found");
      }
      return SendJson(r, 200, {{"status", "ready"}, {"model", *model}});
    }
    json names = json::array();
    for (const auto& m : host->List()) names.push_back(m->name());
    SendJson(r, 200, {{"status", "ready"}, {"models", names}});
  }

  void Info(const httplib::Request& q, httplib::Response& r) {
    if (absl::Status auth = Authenticate(q, false); !auth.ok()) {
      Count(kInfoRpc, auth);
      return SendError(r, auth);
    }
    const ServiceLimits& limits = service_->limits();
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
          {"cpp_httplib", CPPHTTPLIB_VERSION}}},
        {"state", service_->host() == nullptr
                      ? "loading"
                      : (service_->draining() ? "draining" : "ready")},
        {"limits",
         {{"max_inputs_per_request", limits.max_inputs_per_request},
          {"max_send_message_bytes", limits.max_send_message_bytes},
          {"max_unread_response_bytes", limits.unread.total_bytes},
          {"max_unread_response_bytes_per_connection",
           limits.unread.per_connection_bytes},
          {"http_max_body_bytes", options_.http.max_body_bytes},
          {"http_max_connections", options_.http.max_connections},
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
    SendJson(r, 200, info);
  }

  const HttpFrontOptions options_;
  EncoderServer* server_;
  EncoderServiceImpl* service_;
};

absl::StatusOr<std::unique_ptr<HttpFront>> HttpFront::Start(
    HttpFrontOptions options, EncoderServer* server) {
  std::unique_ptr<HttpFront> front(new HttpFront());
  front->handlers_ = std::make_unique<Handlers>(options, server);
  Handlers* handlers = front->handlers_.get();
  options.http.routes = [handlers](httplib::Server& http) {
    handlers->Register(http);
  };
  auto render = options.render_metrics;
  if (!render) render = [] { return std::string(); };
  ASSIGN_OR_RETURN(auto http, metrics::MetricsHttpServer::Start(
                                  options.http, std::move(render)));
  front->http_ = std::move(http);
  return front;
}

HttpFront::~HttpFront() = default;

}  // namespace encoder::service
