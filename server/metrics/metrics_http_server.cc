#include "server/metrics/metrics_http_server.h"

#include <httplib.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "server/auth/token_auth.h"
#include "server/common/status_macros.h"

namespace encoder::metrics {
namespace {

constexpr char kTextFormat[] = "text/plain; version=0.0.4; charset=utf-8";

// Splits "HOST:PORT" or "[V6HOST]:PORT"; the port must be numeric.
bool SplitAddress(const std::string& address, std::string* host, int* port) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon + 1 == address.size()) return false;
  const std::string digits = address.substr(colon + 1);
  if (digits.size() > 5 ||
      digits.find_first_not_of("0123456789") != std::string::npos) {
    return false;
  }
  *port = std::stoi(digits);
  *host = address.substr(0, colon);
  if (host->size() >= 2 && host->front() == '[' && host->back() == ']') {
    *host = host->substr(1, host->size() - 2);
  }
  return *port <= 65535;
}

absl::StatusOr<std::string> ReadFile(const std::string& path,
                                     const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return absl::NotFoundError(absl::StrCat("cannot open ", what, " ", path));
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// Whether `header` ("Basic base64(user:password)") names one of
// `credentials`, compared in constant time.
bool BasicAuthOk(const std::string& header,
                 const std::vector<std::string>& credentials) {
  constexpr absl::string_view kScheme = "basic ";
  if (!absl::StartsWithIgnoreCase(header, kScheme)) return false;
  std::string decoded;
  if (!absl::Base64Unescape(
          absl::StripAsciiWhitespace(
              absl::string_view(header).substr(kScheme.size())),
          &decoded)) {
    return false;
  }
  return auth::MatchesAnyToken(decoded, credentials);
}

}  // namespace

absl::StatusOr<std::unique_ptr<MetricsHttpServer>> MetricsHttpServer::Start(
    const HttpOptions& options, Render render) {
  std::string host;
  int port = 0;
  if (!SplitAddress(options.listen, &host, &port)) {
    return absl::InvalidArgumentError("metrics address \"" + options.listen +
                                      "\" is not HOST:PORT");
  }
  if (host.empty()) host = options.default_host;
  if (options.max_connections < 1) {
    return absl::InvalidArgumentError("metrics max connections must be >= 1");
  }
  std::unique_ptr<MetricsHttpServer> s(new MetricsHttpServer());
  s->render_ = std::move(render);
  const bool tls =
      !options.tls_cert_file.empty() || !options.tls_key_file.empty();
  if (tls) {
    if (options.tls_cert_file.empty() || options.tls_key_file.empty()) {
      return absl::InvalidArgumentError(
          "metrics TLS needs both a certificate and a key");
    }
    for (const std::string* f : {&options.tls_cert_file, &options.tls_key_file,
                                 &options.tls_client_ca_file}) {
      if (f->empty()) continue;
      RETURN_IF_ERROR(ReadFile(*f, "metrics TLS file").status());
    }
    auto ssl = std::make_unique<httplib::SSLServer>(
        options.tls_cert_file.c_str(), options.tls_key_file.c_str(),
        options.tls_client_ca_file.empty()
            ? nullptr
            : options.tls_client_ca_file.c_str());
    if (!ssl->is_valid()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "metrics TLS: cannot use certificate ", options.tls_cert_file,
          " with key ", options.tls_key_file));
    }
    s->server_ = std::move(ssl);
  } else {
    s->server_ = std::make_unique<httplib::Server>();
  }
  if (!options.basic_auth_file.empty()) {
    ASSIGN_OR_RETURN(auto text, ReadFile(options.basic_auth_file,
                                         "metrics basic auth file"));
    auto lines = auth::ParseTokens(text);
    if (!lines.ok() || !absl::StrContains(lines->front(), ':')) {
      return absl::InvalidArgumentError(
          absl::StrCat("metrics basic auth file ", options.basic_auth_file,
                       ": expected user:password lines"));
    }
    s->credentials_ = *std::move(lines);
  }
  const int threads = options.max_connections;
  s->server_->new_task_queue = [threads] {
    return new httplib::ThreadPool(static_cast<size_t>(threads));
  };
  // SO_REUSEADDR only: cpp-httplib's default adds SO_REUSEPORT, which
  // would let a second process bind the same port and take scrapes.
  // TCP_NODELAY (inherited by accepted sockets): cpp-httplib writes a
  // response's headers and body apart, and Nagle's algorithm would hold
  // the body until the client's delayed ACK (tens of ms per request).
  s->server_->set_socket_options([](int fd) {
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  });
  s->server_->set_tcp_nodelay(true);
  s->server_->set_keep_alive_timeout(kKeepAliveSeconds);
  s->server_->set_read_timeout(kIoTimeoutSeconds);
  s->server_->set_write_timeout(kIoTimeoutSeconds);
  if (options.max_body_bytes < 1) {
    return absl::InvalidArgumentError("HTTP max body bytes must be >= 1");
  }
  s->server_->set_payload_max_length(
      static_cast<size_t>(options.max_body_bytes));
  MetricsHttpServer* self = s.get();
  auto handle = [self](const httplib::Request& request,
                       httplib::Response& response) {
    if (!self->credentials_.empty() &&
        !BasicAuthOk(request.get_header_value("Authorization"),
                     self->credentials_)) {
      response.status = 401;
      response.set_header("WWW-Authenticate", "Basic realm=\"metrics\"");
      response.set_content("authentication required\n", "text/plain");
      return;
    }
    response.set_content(self->render_(), kTextFormat);
  };
  s->server_->Get("/metrics", handle);
  auto not_allowed = [](const httplib::Request&, httplib::Response& response) {
    response.status = 405;
    response.set_header("Allow", "GET, HEAD");
    response.set_content("use GET\n", "text/plain");
  };
  s->server_->Post("/metrics", not_allowed);
  s->server_->Put("/metrics", not_allowed);
  s->server_->Delete("/metrics", not_allowed);
  s->server_->Patch("/metrics", not_allowed);
  s->server_->set_error_handler(
      [](const httplib::Request& request, httplib::Response& response) {
        if (response.status == 404 && request.path != "/metrics" &&
            response.body.empty()) {
          response.set_content("metrics are at /metrics\n", "text/plain");
        }
      });
  if (options.routes) options.routes(*s->server_);
  if (port == 0) {
    port = s->server_->bind_to_any_port(host);
  } else if (!s->server_->bind_to_port(host, port)) {
    port = -1;
  }
  if (port <= 0) {
    return absl::UnavailableError(absl::StrCat(
        "cannot serve metrics on ", options.listen, " (", host, ")"));
  }
  s->port_ = port;
  s->thread_ = std::thread([self] { self->server_->listen_after_bind(); });
  // stop() only stops a server that is already running: wait for that, so
  // that destroying the server right after Start cannot hang.
  for (int i = 0; i < 5000 && !s->server_->is_running(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return s;
}

MetricsHttpServer::~MetricsHttpServer() {
  if (server_) server_->stop();
  if (thread_.joinable()) thread_.join();
}

}  // namespace encoder::metrics
