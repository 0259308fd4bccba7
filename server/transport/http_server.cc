#include "server/transport/http_server.h"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/version.hpp>
#include <chrono>
#include <fstream>
#include <thread>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/common/thread_name.h"
#include "server/transport/http_internal.h"

namespace encoder::http {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using boost::system::error_code;

namespace {
// Debian's abseil has its own string_view type.
absl::string_view AV(std::string_view s) { return {s.data(), s.size()}; }
}  // namespace

bool SplitHostPort(const std::string& address, std::string* host, int* port) {
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

std::string BoostVersion() {
  return absl::StrCat(BOOST_VERSION / 100000, ".", BOOST_VERSION / 100 % 1000,
                      ".", BOOST_VERSION % 100);
}

std::string_view Request::HeaderValue(std::string_view name) const {
  for (const Header& h : headers) {
    if (absl::EqualsIgnoreCase(h.name, AV(name))) return h.value;
  }
  return {};
}

std::vector<std::string_view> Request::HeaderValues(
    std::string_view name) const {
  std::vector<std::string_view> values;
  for (const Header& h : headers) {
    if (absl::EqualsIgnoreCase(h.name, AV(name))) values.emplace_back(h.value);
  }
  return values;
}

Exchange::Exchange(Request request, absl::Time deadline,
                   std::shared_ptr<detail::ExchangeLink> link)
    : request_(std::move(request)),
      deadline_(deadline),
      link_(std::move(link)) {}

Exchange::~Exchange() = default;

void Exchange::Cancel(CancelReason reason) {
  CancelReason none = CancelReason::kNone;
  reason_.compare_exchange_strong(none, reason, std::memory_order_acq_rel);
}

void Exchange::Respond(Response response) {
  if (responded_.exchange(true) || cancelled()) return;
  detail::Life& life = *link_->life;
  absl::ReaderMutexLock lock(&life.mu);
  if (life.stopped) return;
  if (auto session = link_->session.lock()) {
    session->Deliver(this, std::move(response));
  }
}

void Exchange::Post(std::function<void()> work) {
  detail::Life& life = *link_->life;
  absl::ReaderMutexLock lock(&life.mu);
  if (life.stopped) return;
  asio::post(*life.io, std::move(work));
}

void Router::Add(std::string method, std::string pattern, Handler handler) {
  Route route;
  route.method = std::move(method);
  route.prefix = absl::EndsWith(pattern, "/*");
  if (route.prefix) pattern.pop_back();  // keep the '/'
  route.pattern = std::move(pattern);
  route.handler = std::move(handler);
  routes_.push_back(std::move(route));
}

std::vector<std::pair<std::string, std::string>> Router::Routes() const {
  std::vector<std::pair<std::string, std::string>> out;
  out.reserve(routes_.size());
  for (const Route& r : routes_) {
    out.emplace_back(r.method, r.prefix ? r.pattern + "*" : r.pattern);
  }
  return out;
}

const Handler* Router::Find(std::string_view method, std::string_view path,
                            std::string* param, std::string* allowed) const {
  std::vector<std::string> methods;
  auto note = [&methods](const std::string& m) {
    if (std::find(methods.begin(), methods.end(), m) == methods.end()) {
      methods.push_back(m);
    }
  };
  const Route* exact = nullptr;
  const Route* prefix = nullptr;
  bool exact_path = false;
  for (const Route& r : routes_) {
    if (!r.prefix && r.pattern == path) {
      exact_path = true;
      note(r.method);
      if (r.method == method) exact = &r;
    }
  }
  if (!exact_path) {
    for (const Route& r : routes_) {
      if (r.prefix && path.size() > r.pattern.size() &&
          absl::StartsWith(AV(path), r.pattern)) {
        note(r.method);
        if (r.method == method && prefix == nullptr) prefix = &r;
      }
    }
  }
  if (std::find(methods.begin(), methods.end(), "GET") != methods.end()) {
    note("HEAD");
  }
  *allowed = absl::StrJoin(methods, ", ");
  if (exact != nullptr) return &exact->handler;
  if (prefix != nullptr) {
    *param = std::string(path.substr(prefix->pattern.size()));
    return &prefix->handler;
  }
  return nullptr;
}

namespace detail {

Response Core::RenderError(const Request* request, int status,
                           const std::string& message) const {
  if (options.render_error)
    return options.render_error(request, status, message);
  Response r;
  r.status = status;
  r.body = message + "\n";
  return r;
}

}  // namespace detail

namespace {

absl::Status CheckReadable(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return absl::NotFoundError(absl::StrCat("cannot open ", what, " ", path));
  return absl::OkStatus();
}

absl::Status CheckOptions(const ServerOptions& o) {
  if (o.max_connections < 1) {
    return absl::InvalidArgumentError("HTTP max connections must be >= 1");
  }
  if (o.max_body_bytes < 1) {
    return absl::InvalidArgumentError("HTTP max body bytes must be >= 1");
  }
  if (o.max_header_bytes < 256 || o.max_header_bytes > (1 << 24)) {
    return absl::InvalidArgumentError(
        "HTTP max header bytes must be 256 to 16 MiB");
  }
  if (o.max_pipelined_requests < 1) {
    return absl::InvalidArgumentError("HTTP pipelined requests must be >= 1");
  }
  if (o.io_threads < 1) {
    return absl::InvalidArgumentError("HTTP threads must be >= 1");
  }
  if (o.keep_alive_timeout <= absl::ZeroDuration() ||
      o.io_timeout <= absl::ZeroDuration() ||
      o.request_timeout < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("HTTP timeouts must be positive");
  }
  return absl::OkStatus();
}

}  // namespace

class HttpServer::Impl {
 public:
  explicit Impl(const ServerOptions& options, Router router)
      : acceptor_(io_),
        accept_strand_(asio::make_strand(io_)),
        retry_timer_(accept_strand_) {
    core_.options = options;
    core_.router = std::move(router);
    core_.life = std::make_shared<detail::Life>();
    core_.life->io = &io_;
    core_.on_session_closed = [this] { SessionClosed(); };
  }

  ~Impl() {
    {
      absl::MutexLock lock(&core_.life->mu);
      core_.life->stopped = true;
    }
    stopping_.store(true);
    asio::post(accept_strand_, [this] {
      error_code ignored;
      acceptor_.close(ignored);
      retry_timer_.cancel();
    });
    std::vector<std::shared_ptr<detail::SessionBase>> live;
    {
      absl::MutexLock lock(&core_.sessions_mu);
      for (auto& weak : core_.sessions) {
        if (auto s = weak.lock()) live.push_back(std::move(s));
      }
    }
    for (auto& s : live) s->Stop();
    live.clear();
    // Sessions end as their operations complete with errors.
    const auto give_up =
        std::chrono::steady_clock::now() + std::chrono::seconds(2);
    while (core_.open_connections.load() > 0 &&
           std::chrono::steady_clock::now() < give_up) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    io_.stop();
    for (std::thread& t : threads_) t.join();
  }

  absl::Status Bind(const std::string& host, int port) {
    error_code ec;
    const asio::ip::address address = asio::ip::make_address(host, ec);
    std::vector<tcp::endpoint> endpoints;
    if (!ec) {
      endpoints.emplace_back(address, static_cast<uint16_t>(port));
    } else {
      tcp::resolver resolver(io_);
      auto results = resolver.resolve(host, std::to_string(port),
                                      tcp::resolver::passive, ec);
      if (ec) {
        return absl::UnavailableError(absl::StrCat(
            "cannot resolve HTTP address ", host, ": ", ec.message()));
      }
      for (const auto& r : results) endpoints.push_back(r.endpoint());
    }
    std::string last;
    for (const tcp::endpoint& e : endpoints) {
      error_code e1;
      acceptor_.open(e.protocol(), e1);
      // SO_REUSEADDR only: another process must not share the port.
      if (!e1) acceptor_.set_option(tcp::acceptor::reuse_address(true), e1);
      if (!e1) acceptor_.bind(e, e1);
      if (!e1) acceptor_.listen(asio::socket_base::max_listen_connections, e1);
      if (!e1) {
        port_ = acceptor_.local_endpoint().port();
        return absl::OkStatus();
      }
      last = e1.message();
      error_code ignored;
      acceptor_.close(ignored);
    }
    return absl::UnavailableError(absl::StrCat("cannot serve HTTP on ",
                                               core_.options.listen, " (", host,
                                               "): ", last));
  }

  absl::Status SetUpTls() {
    const ServerOptions& o = core_.options;
    if (o.tls_cert_file.empty() && o.tls_key_file.empty())
      return absl::OkStatus();
    if (o.tls_cert_file.empty() || o.tls_key_file.empty()) {
      return absl::InvalidArgumentError(
          "HTTP TLS needs both a certificate and a key");
    }
    for (const std::string* f :
         {&o.tls_cert_file, &o.tls_key_file, &o.tls_client_ca_file}) {
      if (f->empty()) continue;
      if (absl::Status s = CheckReadable(*f, "HTTP TLS file"); !s.ok())
        return s;
    }
    auto& tls = core_.tls.emplace(asio::ssl::context::tls_server);
    tls.set_options(
        asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
        asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 |
        asio::ssl::context::no_tlsv1_1 | asio::ssl::context::single_dh_use);
    error_code ec;
    tls.use_certificate_chain_file(o.tls_cert_file, ec);
    if (!ec)
      tls.use_private_key_file(o.tls_key_file, asio::ssl::context::pem, ec);
    if (ec) {
      return absl::InvalidArgumentError(
          absl::StrCat("HTTP TLS: cannot use certificate ", o.tls_cert_file,
                       " with key ", o.tls_key_file, ": ", ec.message()));
    }
    if (!o.tls_client_ca_file.empty()) {
      tls.load_verify_file(o.tls_client_ca_file, ec);
      if (ec) {
        return absl::InvalidArgumentError(
            absl::StrCat("HTTP TLS: cannot read client CA ",
                         o.tls_client_ca_file, ": ", ec.message()));
      }
      tls.set_verify_mode(asio::ssl::verify_peer |
                          asio::ssl::verify_fail_if_no_peer_cert);
    }
    return absl::OkStatus();
  }

  void Run() {
    asio::post(accept_strand_, [this] { Accept(); });
    const int n = core_.options.io_threads;
    for (int i = 0; i < n; ++i) {
      threads_.emplace_back([this] {
        NameThisThread("http-io");
        io_.run();
      });
    }
  }

  int port() const { return port_; }
  const detail::Core& core() const { return core_; }

 private:
  // On the accept strand.
  void Accept() {
    if (stopping_.load() || !acceptor_.is_open()) return;
    if (core_.open_connections.load() >= core_.options.max_connections) {
      paused_ = true;  // SessionClosed resumes
      return;
    }
    acceptor_.async_accept(asio::make_strand(io_), [this](const error_code& ec,
                                                          tcp::socket socket) {
      if (ec == asio::error::operation_aborted || stopping_.load()) return;
      if (ec) {
        // Out of descriptors or buffers (or a connection gone before it
        // was taken): try again shortly instead of giving up.
        retry_timer_.expires_after(std::chrono::milliseconds(100));
        retry_timer_.async_wait([this](const error_code& e) {
          if (!e) Accept();
        });
        return;
      }
      detail::StartSession(&core_, std::move(socket));
      Accept();
    });
  }

  void SessionClosed() {
    if (stopping_.load()) return;
    asio::post(accept_strand_, [this] {
      if (paused_ &&
          core_.open_connections.load() < core_.options.max_connections) {
        paused_ = false;
        Accept();
      }
    });
  }

  // Destroyed in reverse: the I/O objects, then the context (and with it
  // every session still queued in it, which reads core_ and stopping_),
  // then the state the sessions share.
  detail::Core core_;
  std::atomic<bool> stopping_{false};
  asio::io_context io_;
  tcp::acceptor acceptor_;
  asio::strand<asio::io_context::executor_type> accept_strand_;
  asio::steady_timer retry_timer_;
  bool paused_ = false;  // on the accept strand
  std::vector<std::thread> threads_;
  int port_ = 0;
};

HttpServer::HttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

HttpServer::~HttpServer() = default;

int HttpServer::port() const { return impl_->port(); }

std::vector<std::pair<std::string, std::string>> HttpServer::routes() const {
  return impl_->core().router.Routes();
}

ServerStats HttpServer::stats() const {
  const detail::Core& c = impl_->core();
  ServerStats s;
  s.open_connections = c.open_connections.load();
  s.accepted_connections = c.accepted_connections.load();
  s.requests = c.requests.load();
  s.client_closed = c.client_closed.load();
  s.timed_out = c.timed_out.load();
  s.rejected_framing = c.rejected_framing.load();
  return s;
}

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(
    const ServerOptions& options, Router router) {
  std::string host;
  int port = 0;
  if (!SplitHostPort(options.listen, &host, &port)) {
    return absl::InvalidArgumentError("HTTP address \"" + options.listen +
                                      "\" is not HOST:PORT");
  }
  if (host.empty()) host = options.default_host;
  if (absl::Status s = CheckOptions(options); !s.ok()) return s;
  auto impl = std::make_unique<Impl>(options, std::move(router));
  if (absl::Status s = impl->SetUpTls(); !s.ok()) return s;
  if (absl::Status s = impl->Bind(host, port); !s.ok()) return s;
  impl->Run();
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(impl)));
}

}  // namespace encoder::http
