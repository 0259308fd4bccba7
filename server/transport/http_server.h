// An HTTP/1.1 server for the server's HTTP port (the OpenAI-compatible
// front, probes, /metrics), on Boost.Beast's parser and Boost.Asio,
// optionally over TLS (OpenSSL, with client certificates on request).
//
// What it guarantees a caller (each a number in ServerOptions):
//   - a request body is never held past `max_body_bytes`, with or without
//     Content-Length (chunked bodies are counted while they arrive); over
//     it the client gets 413 and the connection closes; headers past
//     `max_header_bytes` get 431;
//   - message framing is strict (RFC 9112): conflicting Content-Length
//     values, Content-Length beside Transfer-Encoding, or a transfer coding
//     other than chunked get 400 or 501 and the connection closes;
//   - pipelined requests are answered in order, one at a time, with at
//     most `max_pipelined_requests` read ahead;
//   - a handler learns within one event-loop turn that its client closed
//     the connection (Exchange::cancelled), and `request_timeout` bounds
//     the time from a request's last byte to its answer (504);
//   - idle connections close after `keep_alive_timeout`; a request must
//     arrive whole within `io_timeout` of its first byte (else 408), and a
//     response that makes no progress for `io_timeout` closes the
//     connection; at most `max_connections` are open, more wait in the
//     listen queue.
// No thread waits per connection or per request: `io_threads` threads run
// every connection; handlers answer from any thread (Exchange::Respond).
#ifndef ENCODER_SERVER_TRANSPORT_HTTP_SERVER_H_
#define ENCODER_SERVER_TRANSPORT_HTTP_SERVER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace encoder::http {

struct Header {
  std::string name;
  std::string value;
};

struct Request {
  std::string method;           // as sent: "GET", "POST", ...
  std::string target;           // path and query as sent
  std::string path;             // percent-decoded path, without the query
  std::string query;            // after '?', as sent
  int version = 11;             // 10: HTTP/1.0, 11: HTTP/1.1
  std::vector<Header> headers;  // in arrival order
  std::string body;
  std::string remote_address;  // the client's IP address
  int remote_port = 0;
  // A pattern route's capture ("/v1/models/*": the rest of the path).
  std::string path_param;

  // The first value of header `name` (any case); empty when absent.
  std::string_view HeaderValue(std::string_view name) const;
  // Every value of header `name`, in arrival order.
  std::vector<std::string_view> HeaderValues(std::string_view name) const;
};

struct Response {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
  // Sent as given; a header whose name or value holds CR, LF or NUL is
  // dropped.
  std::vector<Header> headers;
  // Close the connection after this response.
  bool close = false;
};

namespace detail {
struct ExchangeLink;
}

// One request being answered. Handlers get it as a shared_ptr and may keep
// it past their return (answering later, from any thread).
class Exchange {
 public:
  enum class CancelReason { kNone, kClientClosed, kTimeout, kServerStopping };

  const Request& request() const { return request_; }

  // True once the answer is no longer wanted: the client closed the
  // connection, the request timeout passed (the client got 504), or the
  // server is stopping. Cheap; poll it, or pass it on as a cancel check.
  bool cancelled() const {
    return reason_.load(std::memory_order_acquire) != CancelReason::kNone;
  }
  CancelReason cancel_reason() const { return reason_.load(); }
  // When the request timeout passes; InfiniteFuture without one.
  absl::Time deadline() const { return deadline_; }

  // Sends `response`. The first call counts; later calls, and calls after
  // cancellation, do nothing. Thread-safe; returns at once (the response is
  // written on the connection's I/O thread).
  void Respond(Response response);

  // Runs `work` on one of the server's I/O threads: for rendering a
  // response off a thread that has better things to do (a model's worker).
  // Dropped, unrun, once the server has stopped.
  void Post(std::function<void()> work);

  Exchange(Request request, absl::Time deadline,
           std::shared_ptr<detail::ExchangeLink> link);
  ~Exchange();
  Exchange(const Exchange&) = delete;
  Exchange& operator=(const Exchange&) = delete;

  // Marks the exchange cancelled (the first reason stays). Internal.
  void Cancel(CancelReason reason);

 private:
  const Request request_;
  const absl::Time deadline_;
  std::atomic<CancelReason> reason_{CancelReason::kNone};
  std::atomic<bool> responded_{false};
  std::shared_ptr<detail::ExchangeLink> link_;
};

using Handler = std::function<void(std::shared_ptr<Exchange>)>;

// Routes by method and path. A pattern ending in "/*" matches any
// non-empty rest of the path (Request::path_param). Exact routes win over
// patterns; HEAD is answered by a GET route without its body. Build it
// before Start; it is read-only while serving.
class Router {
 public:
  void Add(std::string method, std::string pattern, Handler handler);

  // The handler for `method` `path`, with `*param` set for a pattern; null
  // if none. `*allowed` lists the methods the path has (for 405's Allow).
  const Handler* Find(std::string_view method, std::string_view path,
                      std::string* param, std::string* allowed) const;

  // Every route as added: {method, pattern} ("/v1/models/*" for a
  // pattern), in the order added.
  std::vector<std::pair<std::string, std::string>> Routes() const;

 private:
  struct Route {
    std::string method;
    std::string pattern;  // exact path, or prefix when `prefix`
    bool prefix = false;
    Handler handler;
  };
  std::vector<Route> routes_;
};

// Renders an error the server answers itself (400, 404, 405, 408, 413,
// 431, 501, 504, ...). `request` is null when none could be read.
using ErrorRenderer = std::function<Response(const Request* request, int status,
                                             const std::string& message)>;

struct ServerOptions {
  // HOST:PORT ("0.0.0.0:9090", "127.0.0.1:0", "[::]:9090"); port 0 picks a
  // free port. An empty HOST (":9090") binds `default_host`.
  std::string listen;
  std::string default_host = "127.0.0.1";
  int max_connections = 64;  // open at once; more wait to be accepted
  // PEM files; both set: HTTPS only.
  std::string tls_cert_file;
  std::string tls_key_file;
  // PEM CA certificates; set (with TLS): clients must present a
  // certificate they sign.
  std::string tls_client_ca_file;
  // Largest request body accepted, counted as it arrives; larger: 413.
  int64_t max_body_bytes = 16 * 1024;
  // Request line and headers together; larger: 431.
  int64_t max_header_bytes = 16 * 1024;
  // Requests read ahead on one connection while an earlier one is answered.
  int max_pipelined_requests = 16;
  absl::Duration keep_alive_timeout = absl::Seconds(2);
  absl::Duration io_timeout = absl::Seconds(5);
  // From a request's last byte to its answer; zero: no limit.
  absl::Duration request_timeout = absl::ZeroDuration();
  int io_threads = 2;
  // Null: "message\n" as text/plain.
  ErrorRenderer render_error;
};

// Counts since start, for tests and metrics.
struct ServerStats {
  int64_t open_connections = 0;
  int64_t accepted_connections = 0;
  int64_t requests = 0;
  int64_t client_closed = 0;     // requests whose client left before the answer
  int64_t timed_out = 0;         // requests answered 504 by request_timeout
  int64_t rejected_framing = 0;  // 400/408/413/431/501 answered by the server
};

class HttpServer {
 public:
  // Binds and starts serving. InvalidArgument for a malformed address or
  // option, NotFound for an unreadable TLS file, Unavailable when the
  // address cannot be bound.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(
      const ServerOptions& options, Router router);

  // Stops accepting, cancels the requests in progress, closes every
  // connection and joins the I/O threads.
  ~HttpServer();

  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  int port() const;
  ServerStats stats() const;
  // The routes it serves (Router::Routes).
  std::vector<std::pair<std::string, std::string>> routes() const;

  class Impl;

 private:
  explicit HttpServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The Boost version the server was built with ("1.74.0").
std::string BoostVersion();

// Splits "HOST:PORT" or "[V6HOST]:PORT" (numeric port <= 65535).
bool SplitHostPort(const std::string& address, std::string* host, int* port);

}  // namespace encoder::http

#endif  // ENCODER_SERVER_TRANSPORT_HTTP_SERVER_H_
