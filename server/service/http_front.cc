#include "server/service/http_front.h"

#include <grpcpp/grpcpp.h>
#include <httplib.h>

#include <cstring>
#include <future>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "google/protobuf/stubs/common.h"
#include "server/common/status_macros.h"
#include "server/logging/access_log.h"
#include "server/model/model_repository.h"
#include "server/runner/precision_choice.h"
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

// Little-endian float32 bytes to floats.
std::vector<float> DecodeFloat32(const std::string& data) {
  std::vector<float> out(data.size() / 4);
  for (size_t i = 0; i < out.size(); ++i) {
    const auto* p = reinterpret_cast<const unsigned char*>(data.data()) + 4 * i;
    const uint32_t bits =
        static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 |
        static_cast<uint32_t>(p[2]) << 16 | static_cast<uint32_t>(p[3]) << 24;
    std::memcpy(&out[i], &bits, 4);
  }
  return out;
}

// A JSON token id: an integer in [0, 2^63).
bool ReadTokenId(const json& value, int64_t* id) {
  if (value.is_number_unsigned()) {
    const uint64_t v = value.get<uint64_t>();
    if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return false;
    }
    *id = static_cast<int64_t>(v);
    return true;
  }
  if (value.is_number_integer()) {
    *id = value.get<int64_t>();
    return true;
  }
  return false;
}

absl::Status InvalidParam(const std::string& message, std::string* param,
                          const char* name) {
  *param = name;
  return absl::InvalidArgumentError(message);
}

// The body of POST /v1/embeddings as an EmbedRequest. `*param` names the
// offending field on error. `*base64` reports encoding_format.
absl::Status ParseEmbeddingsBody(const std::string& body,
                                 v1::EmbedRequest* request, bool* base64,
                                 std::string* param) {
  const json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    return absl::InvalidArgumentError(
        "the request body is not valid JSON; send an object such as "
        "{\"input\": \"text\", \"model\": \"name\"}");
  }
  if (!j.is_object()) {
    return absl::InvalidArgumentError("the request body must be a JSON object");
  }
  if (auto it = j.find("model"); it != j.end() && !it->is_null()) {
    if (!it->is_string()) {
      return InvalidParam("model must be a string", param, "model");
    }
    request->set_model(it->get<std::string>());
  }
  *base64 = false;
  if (auto it = j.find("encoding_format"); it != j.end() && !it->is_null()) {
    const std::string format = it->is_string() ? it->get<std::string>() : "";
    if (format == "base64") {
      *base64 = true;
    } else if (format != "float") {
      return InvalidParam("encoding_format must be \"float\" or \"base64\"",
                          param, "encoding_format");
    }
  }
  if (auto it = j.find("dimensions"); it != j.end() && !it->is_null()) {
    if (!it->is_number_integer()) {
      return InvalidParam("dimensions must be an integer", param, "dimensions");
    }
    const bool fits =
        it->is_number_unsigned()
            ? it->get<uint64_t>() <= std::numeric_limits<int32_t>::max()
            : it->get<int64_t>() >= std::numeric_limits<int32_t>::min() &&
                  it->get<int64_t>() <= std::numeric_limits<int32_t>::max();
    if (!fits) {
      return InvalidParam(
          absl::StrCat("dimensions ", it->dump(), " is out of range"), param,
          "dimensions");
    }
    // The range the model allows is checked with the request (PrepareEmbed).
    request->set_dimensions(static_cast<int32_t>(it->get<int64_t>()));
    // OpenAI's shortened embeddings are unit vectors.
    request->set_normalize(true);
  }
  // Extensions: the EmbedRequest fields of the same names.
  if (auto it = j.find("normalize"); it != j.end() && !it->is_null()) {
    if (!it->is_boolean()) {
      return InvalidParam("normalize must be true or false", param,
                          "normalize");
    }
    request->set_normalize(it->get<bool>());
  }
  if (auto it = j.find("truncate"); it != j.end() && !it->is_null()) {
    if (!it->is_boolean()) {
      return InvalidParam("truncate must be true or false", param, "truncate");
    }
    request->set_truncate(it->get<bool>());
  }
  if (auto it = j.find("prompt_name"); it != j.end() && !it->is_null()) {
    if (!it->is_string()) {
      return InvalidParam("prompt_name must be a string", param, "prompt_name");
    }
    request->set_prompt_name(it->get<std::string>());
  }
  // "user" (an end-user id for the provider's abuse monitoring) is
  // accepted and not used.
  const auto input = j.find("input");
  if (input == j.end() || input->is_null()) {
    return InvalidParam("input is missing", param, "input");
  }
  const char* kShape =
      "input must be a string, a list of strings, a list of token ids or "
      "a list of token-id lists";
  if (input->is_string()) {
    request->add_inputs()->set_text(input->get<std::string>());
    return absl::OkStatus();
  }
  if (!input->is_array()) return InvalidParam(kShape, param, "input");
  if (input->empty()) {
    return InvalidParam("input is an empty list", param, "input");
  }
  const json& first = input->front();
  if (first.is_number()) {
    // One input of token ids.
    v1::TokenIds* ids = request->add_inputs()->mutable_token_ids();
    for (size_t k = 0; k < input->size(); ++k) {
      int64_t id = 0;
      if (!ReadTokenId((*input)[k], &id)) {
        return InvalidParam(
            absl::StrCat("input[", k, "] is not a token id (an integer); ",
                         kShape),
            param, "input");
      }
      ids->add_ids(id);
    }
    return absl::OkStatus();
  }
  for (size_t i = 0; i < input->size(); ++i) {
    const json& item = (*input)[i];
    if (item.is_string() && first.is_string()) {
      request->add_inputs()->set_text(item.get<std::string>());
    } else if (item.is_array() && first.is_array()) {
      if (item.empty()) {
        return InvalidParam(absl::StrCat("input[", i, "] has no token ids"),
                            param, "input");
      }
      v1::TokenIds* ids = request->add_inputs()->mutable_token_ids();
      for (size_t k = 0; k < item.size(); ++k) {
        int64_t id = 0;
        if (!ReadTokenId(item[k], &id)) {
          return InvalidParam(
              absl::StrCat("input[", i, "][", k, "] is not a token id"), param,
              "input");
        }
        ids->add_ids(id);
      }
    } else {
      return InvalidParam(
          absl::StrCat(kShape, "; input[", i, "] does not match input[0]"),
          param, "input");
    }
  }
  return absl::OkStatus();
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
    logging::AccessRecord access;
    access.protocol = "http";
    access.method = "POST /v1/embeddings";
    access.peer = absl::StrCat(q.remote_addr, ":", q.remote_port);
    const std::string id = q.get_header_value("X-Request-Id");
    access.request_id =
        logging::IsUsableRequestId(id) ? id : logging::NewRequestId();
    r.set_header("X-Request-Id", access.request_id);
    const std::string traceparent = q.get_header_value("traceparent");
    if (logging::IsValidTraceparent(traceparent)) {
      access.traceparent = traceparent;
      r.set_header("traceparent", traceparent);
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
      if (status.code() == absl::StatusCode::kNotFound) {
        param = "model";
        code = "model_not_found";
      } else if (absl::StrContains(status.message(), "prompt")) {
        param = "prompt_name";
      } else if (absl::StrContains(status.message(), "dimensions")) {
        param = "dimensions";
      } else if (absl::StrContains(status.message(), "inputs")) {
        param = "input";
      }
      SendError(r, status, param, code);
      return status;
    }
    // Written by hand: one float at a time through nlohmann::json would
    // allocate a node per value.
    std::string out = R"({"object":"list","data":[)";
    int64_t tokens = 0;
    for (int i = 0; i < response.results_size(); ++i) {
      const v1::EmbedResult& e = response.results(i);
      tokens += e.num_tokens();
      absl::StrAppend(&out, i == 0 ? "" : ",",
                      R"({"object":"embedding","index":)", i,
                      R"(,"embedding":)");
      if (base64) {
        absl::StrAppend(&out, "\"", absl::Base64Escape(e.pooled().data()),
                        "\"}");
        continue;
      }
      out += '[';
      const std::vector<float> values = DecodeFloat32(e.pooled().data());
      for (size_t k = 0; k < values.size(); ++k) {
        if (k > 0) out += ',';
        // Shortest text that reads back as the same float32 (%.9g always
        // does); JSON has no NaN or infinity, which a model never yields.
        char buffer[32];
        std::snprintf(buffer, sizeof(buffer), "%.9g",
                      static_cast<double>(values[k]));
        out += buffer;
      }
      out += "]}";
    }
    absl::StrAppend(&out, R"(],"model":)", json(response.model()).dump(),
                    R"(,"usage":{"prompt_tokens":)", tokens,
                    R"(,"total_tokens":)", tokens, "}}");
    r.status = 200;
    r.set_content(std::move(out), kJson);
    return absl::OkStatus();
  }

  void Models(const httplib::Request& q, httplib::Response& r,
              const std::string& one) {
    absl::Status status = Authenticate(q, false);
    runner::ModelHost* host = service_->host();
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
    for (const auto& m : host->models()) {
      json entry = {{"id", m->spec.name},
                    {"object", "model"},
                    {"created", 0},
                    {"owned_by", "encoder-server"}};
      if (!one.empty() && m->spec.name == one) {
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
    runner::ModelHost* host = service_->host();
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
    for (const auto& m : host->models()) names.push_back(m->spec.name);
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
          {"max_diagnose_tokens", service_->diagnose_limits().max_tokens}}},
        {"models", json::array()}};
    if (runner::ModelHost* host = service_->host(); host != nullptr) {
      info["default_model"] = host->default_model();
      if (host->memory_budget() != nullptr) {
        info["limits"]["batch_memory_budget_bytes"] =
            host->memory_budget()->capacity();
      }
      for (const auto& m : host->models()) {
        const model::ModelConfig& c = m->spec.config;
        info["models"].push_back(json{
            {"name", m->spec.name},
            {"family", m->spec.family},
            {"scheme", m->encoder->scheme().Describe().name},
            {"dimensions", m->encoder->output_dim()},
            {"d_model", c.d_model},
            {"num_layers", c.num_layers},
            {"num_heads", c.num_heads},
            {"max_input_tokens", c.max_length()},
            {"pooling", model::PoolingName(c.pooling)},
            {"normalize", c.normalize},
            {"accepts_text", m->tokenizer != nullptr},
            {"prompts", m->spec.prompts},
            {"default_prompt_name", m->spec.default_prompt_name},
            {"device", m->encoder->device().str()},
            {"precision", runner::PrecisionName(*m->encoder)},
            {"batching",
             {{"max_batch_sequences", m->batch_options.max_batch_sequences},
              {"max_batch_tokens", m->batch_options.max_batch_tokens},
              {"max_queued_sequences", m->batch_options.max_queued_sequences},
              {"max_batch_memory_bytes",
               m->batch_options.max_batch_cost_bytes}}}});
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
