// The HTTP front: an OpenAI-compatible embeddings API, probes and server
// information next to Prometheus' /metrics, on one port
// (MetricsHttpServer on HttpServer, optionally TLS).
//
//   POST /v1/embeddings   OpenAI's embeddings request and response
//   GET  /v1/models       OpenAI's model list; /v1/models/{model} one model
//   GET  /health          liveness: 200 while the process serves
//   GET  /ready           200 once the models are loaded, 503 while loading
//                         or draining; /ready/{model} the same for one
//                         model (404 for an unknown one)
//   GET  /info            version, build, models and the limits in force
//   GET  /metrics         Prometheus text (the same registry as gRPC's)
//   GET  /openapi.json    the OpenAPI document of these routes; /docs
//                         renders it (api_docs.h; --no-http-docs: off)
//
// Embeddings go through the core (core::Inference::Embed): the same
// admission, validation, limits, batcher and metrics as gRPC Embed
// (counted under rpc="http:/v1/embeddings"). No thread waits for a
// result: the batcher's answer is rendered on an HTTP I/O thread. A client
// that closes its connection cancels its request (the batcher drops its
// queued inputs and stops a batch nobody waits for), and
// --http-request-timeout is the request's deadline (504).
// Bearer tokens are the gRPC port's (`Authorization: Bearer <token>`);
// /health and /ready are open unless --auth-health, /metrics follows the
// metrics basic-auth option. Errors are OpenAI's error JSON with the HTTP
// status of status_util.h's HttpStatusFor.
#ifndef ENCODER_SERVER_HTTP_HTTP_FRONT_H_
#define ENCODER_SERVER_HTTP_HTTP_FRONT_H_

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "server/core/edge_auth.h"
#include "server/core/inference.h"
#include "server/http/metrics_http_server.h"

namespace encoder::http {

struct HttpFrontOptions {
  // Address, TLS, threads, body limit and /metrics' basic auth. `routes`
  // is set by the front.
  MetricsHttpOptions http;
  // The body of /metrics; null: an empty page.
  std::function<std::string()> render_metrics;
  // What /info reports of the build besides the library versions (the
  // executable's --version facts).
  std::string git_commit;
  std::string build_type;
  std::string libtorch_version;
  std::string grpc_version;
  std::string protobuf_version;
  // Serve the OpenAPI document and Swagger UI (api_docs.h).
  bool api_docs = true;
};

class HttpFront {
 public:
  // Binds and serves. `core` must outlive the front; its models may come
  // later (Inference::SetHost): until then /ready is 503. `auth`'s
  // pointers must outlive the front too.
  static absl::StatusOr<std::unique_ptr<HttpFront>> Start(
      HttpFrontOptions options, core::Inference* core, core::EdgeAuth auth);
  // Stops accepting, cancels the requests in progress and joins.
  ~HttpFront();

  HttpFront(const HttpFront&) = delete;
  HttpFront& operator=(const HttpFront&) = delete;

  int port() const { return http_->port(); }
  ServerStats stats() const { return http_->stats(); }
  // Every route served: {method, pattern}, "/*" ending a pattern.
  std::vector<std::pair<std::string, std::string>> routes() const {
    return http_->routes();
  }

 private:
  class Handlers;
  HttpFront() = default;

  std::unique_ptr<Handlers> handlers_;
  // Declared last: stops serving before the handlers go.
  std::unique_ptr<MetricsHttpServer> http_;
};

}  // namespace encoder::http

#endif  // ENCODER_SERVER_HTTP_HTTP_FRONT_H_
