// The server's HTTP port (HttpServer, optionally over TLS): GET /metrics
// answered with the text a caller renders (the Prometheus exposition
// format; behind HTTP basic auth when configured), plus the routes a caller
// adds (MetricsHttpOptions::routes; the HTTP front adds its API). The
// metrics library only renders: registering /metrics is this layer's. Idle
// connections close after the keep-alive timeout; slow or idle clients delay no
// one else (no thread waits per connection).
#ifndef ENCODER_SERVER_HTTP_METRICS_HTTP_SERVER_H_
#define ENCODER_SERVER_HTTP_METRICS_HTTP_SERVER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "server/transport/http_server.h"

namespace encoder::http {

struct MetricsHttpOptions : ServerOptions {
  // "user:password" lines; set: /metrics needs basic auth.
  std::string basic_auth_file;
  // Called once before the port is bound, to add routes; they run on the
  // server's threads.
  std::function<void(Router&)> routes;
};

class MetricsHttpServer {
 public:
  // Returns the body of GET /metrics. Called on the server's threads; must
  // be thread-safe with respect to the rest of the program.
  using Render = std::function<std::string()>;

  // The defaults of ServerOptions' keep_alive_timeout and io_timeout.
  static constexpr int kKeepAliveSeconds = 2;
  static constexpr int kIoTimeoutSeconds = 5;

  // Binds and starts serving. InvalidArgument for a malformed address or
  // option, NotFound for an unreadable file, Unavailable when the address
  // cannot be bound.
  static absl::StatusOr<std::unique_ptr<MetricsHttpServer>> Start(
      const MetricsHttpOptions& options, Render render);

  // Stops accepting, cancels the requests in progress and joins.
  ~MetricsHttpServer();

  MetricsHttpServer(const MetricsHttpServer&) = delete;
  MetricsHttpServer& operator=(const MetricsHttpServer&) = delete;

  // The bound TCP port.
  int port() const { return server_->port(); }
  ServerStats stats() const { return server_->stats(); }
  // Every route served, /metrics and those `routes` added.
  std::vector<std::pair<std::string, std::string>> routes() const {
    return server_->routes();
  }

 private:
  MetricsHttpServer() = default;

  std::vector<std::string> credentials_;  // "user:password"
  Render render_;
  // Declared last: stops serving before the members above go.
  std::unique_ptr<HttpServer> server_;
};

}  // namespace encoder::http

#endif  // ENCODER_SERVER_HTTP_METRICS_HTTP_SERVER_H_
