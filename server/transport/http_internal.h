// What http_server.cc and http_session.cc share: the server's state that
// outlives a connection, the link an Exchange answers through, and the
// session factory. Not for other files.
#ifndef ENCODER_SERVER_TRANSPORT_HTTP_INTERNAL_H_
#define ENCODER_SERVER_TRANSPORT_HTTP_INTERNAL_H_

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <functional>
#include <memory>
#include <optional>

#include "absl/synchronization/mutex.h"
#include "server/transport/http_server.h"

namespace encoder::http::detail {

namespace asio = boost::asio;

// A connection as the server and its exchanges see it.
class SessionBase {
 public:
  virtual ~SessionBase() = default;
  // Sends `response` as the answer to `exchange` if it is still the one
  // being answered; any thread (the work moves to the connection's own).
  virtual void Deliver(const Exchange* exchange, Response response) = 0;
  // Cancels what is in progress and closes; any thread.
  virtual void Stop() = 0;
};

// Whether the I/O context still runs handlers. Set `stopped` (under `mu`)
// before the context goes; whoever posts to it holds `mu` shared.
struct Life {
  absl::Mutex mu;
  bool stopped ABSL_GUARDED_BY(mu) = false;
  asio::io_context* io = nullptr;
};

struct ExchangeLink {
  std::shared_ptr<Life> life;
  std::weak_ptr<SessionBase> session;
};

// The server's state every connection reads. Owned by the server; the
// I/O context (and with it every session) goes before it.
struct Core {
  ServerOptions options;
  Router router;
  std::shared_ptr<Life> life;
  std::optional<asio::ssl::context> tls;

  std::atomic<int64_t> open_connections{0};
  std::atomic<int64_t> accepted_connections{0};
  std::atomic<int64_t> requests{0};
  std::atomic<int64_t> client_closed{0};
  std::atomic<int64_t> timed_out{0};
  std::atomic<int64_t> rejected_framing{0};

  // Called by a closing session after it left `open_connections` (on any
  // thread; may be empty).
  std::function<void()> on_session_closed;

  absl::Mutex sessions_mu;
  std::vector<std::weak_ptr<SessionBase>> sessions ABSL_GUARDED_BY(sessions_mu);

  // The server's answer to an error of its own (the renderer, or text).
  Response RenderError(const Request* request, int status,
                       const std::string& message) const;
};

// Starts serving `socket` (TLS first when core.tls is set) and registers
// the session with `core`.
void StartSession(Core* core, asio::ip::tcp::socket socket);

}  // namespace encoder::http::detail

#endif  // ENCODER_SERVER_TRANSPORT_HTTP_INTERNAL_H_
