// The server's HTTP port, served by cpp-httplib (Debian's libcpp-httplib),
// optionally over TLS: GET /metrics answered with the Prometheus text
// exposition format (behind HTTP basic auth when configured), plus the
// routes a caller adds (HttpOptions::routes; the HTTP front adds its API).
//
// Each connection is served on a thread of a pool of `max_connections`
// threads started with the default stack size (prometheus::Exposer's
// civetweb uses fixed 100 KiB stacks, smaller than the static TLS of a
// process that loads LibTorch, so its threads fail to start). A connection
// that sends nothing is dropped after kKeepAliveSeconds; a slow or idle
// client holds one thread and delays no one else while fewer than
// `max_connections` connections are open.
#ifndef ENCODER_SERVER_METRICS_METRICS_HTTP_SERVER_H_
#define ENCODER_SERVER_METRICS_METRICS_HTTP_SERVER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"

namespace httplib {
class Server;
}

namespace encoder::metrics {

struct HttpOptions {
  // HOST:PORT ("0.0.0.0:9090", "127.0.0.1:0", "[::]:9090"); port 0 picks a
  // free port. An empty HOST (":9090") binds `default_host`.
  std::string listen;
  std::string default_host = "127.0.0.1";
  int max_connections = 64;  // served at once; more wait for a thread
  // PEM files; both set: HTTPS only.
  std::string tls_cert_file;
  std::string tls_key_file;
  // PEM CA certificates; set (with TLS): clients must present a
  // certificate they sign.
  std::string tls_client_ca_file;
  // "user:password" lines; set: /metrics needs basic auth.
  std::string basic_auth_file;
  // Largest request body accepted; larger ones get 413.
  int64_t max_body_bytes = 16 * 1024;
  // Called once before the port is bound, to add routes (and replace the
  // error handler); they run on the server's threads.
  std::function<void(httplib::Server&)> routes;
};

class MetricsHttpServer {
 public:
  // Returns the body of GET /metrics. Called on the server's threads; must
  // be thread-safe with respect to the rest of the program.
  using Render = std::function<std::string()>;

  static constexpr int kKeepAliveSeconds = 2;
  static constexpr int kIoTimeoutSeconds = 5;

  // Binds and starts serving. InvalidArgument for a malformed address or
  // option, NotFound for an unreadable file, Unavailable when the address
  // cannot be bound.
  static absl::StatusOr<std::unique_ptr<MetricsHttpServer>> Start(
      const HttpOptions& options, Render render);

  // Stops accepting, finishes the requests in progress and joins.
  ~MetricsHttpServer();

  MetricsHttpServer(const MetricsHttpServer&) = delete;
  MetricsHttpServer& operator=(const MetricsHttpServer&) = delete;

  // The bound TCP port.
  int port() const { return port_; }

 private:
  MetricsHttpServer() = default;

  std::unique_ptr<httplib::Server> server_;
  std::vector<std::string> credentials_;  // "user:password"
  Render render_;
  int port_ = 0;
  std::thread thread_;
};

}  // namespace encoder::metrics

#endif  // ENCODER_SERVER_METRICS_METRICS_HTTP_SERVER_H_
