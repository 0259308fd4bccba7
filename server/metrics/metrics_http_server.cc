#include "server/metrics/metrics_http_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/status/status.h"

namespace encoder::metrics {
namespace {

// Request line and headers beyond this are refused (431).
constexpr size_t kMaxRequestBytes = 16 * 1024;

std::string Response(const std::string& status, const std::string& type,
                     const std::string& body, bool head_only) {
  std::string response = "HTTP/1.1 " + status + "\r\nContent-Type: " + type +
                         "\r\nContent-Length: " + std::to_string(body.size()) +
                         "\r\nConnection: close\r\n\r\n";
  if (!head_only) response += body;
  return response;
}

// Splits "HOST:PORT" or "[V6HOST]:PORT"; an empty host means every
// interface.
bool SplitAddress(const std::string& address, std::string* host,
                  std::string* port) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon + 1 == address.size()) return false;
  *host = address.substr(0, colon);
  *port = address.substr(colon + 1);
  if (host->size() >= 2 && host->front() == '[' && host->back() == ']') {
    *host = host->substr(1, host->size() - 2);
  }
  return port->find_first_not_of("0123456789") == std::string::npos;
}

void SetIoTimeouts(int fd, int seconds) {
  timeval timeout{};
  timeout.tv_sec = seconds;
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
}

void SendAll(int fd, const std::string& data) {
  size_t sent = 0;
  while (sent < data.size()) {
    const ssize_t n =
        send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    sent += static_cast<size_t>(n);
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<MetricsHttpServer>> MetricsHttpServer::Start(
    const std::string& listen_address, Render render) {
  std::string host;
  std::string port;
  if (!SplitAddress(listen_address, &host, &port)) {
    return absl::InvalidArgumentError("metrics address \"" + listen_address +
                                      "\" is not HOST:PORT");
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* addresses = nullptr;
  const int gai = getaddrinfo(host.empty() ? nullptr : host.c_str(),
                              port.c_str(), &hints, &addresses);
  if (gai != 0) {
    return absl::InvalidArgumentError("metrics address \"" + listen_address +
                                      "\": " + gai_strerror(gai));
  }
  int fd = -1;
  std::string error = "no address";
  for (addrinfo* a = addresses; a != nullptr && fd < 0; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, a->ai_addr, a->ai_addrlen) != 0 || listen(fd, 64) != 0) {
      error = std::strerror(errno);
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(addresses);
  if (fd < 0) {
    return absl::UnavailableError("cannot serve metrics on " + listen_address +
                                  ": " + error);
  }
  sockaddr_storage bound{};
  socklen_t length = sizeof(bound);
  getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &length);
  const int bound_port =
      bound.ss_family == AF_INET6
          ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
          : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  int wake[2];
  if (pipe2(wake, O_CLOEXEC) != 0) {
    close(fd);
    return absl::InternalError(std::string("pipe: ") + std::strerror(errno));
  }
  return std::unique_ptr<MetricsHttpServer>(new MetricsHttpServer(
      fd, wake[0], wake[1], bound_port, std::move(render)));
}

MetricsHttpServer::MetricsHttpServer(int listen_fd, int wake_read_fd,
                                     int wake_write_fd, int port, Render render)
    : listen_fd_(listen_fd),
      wake_read_fd_(wake_read_fd),
      wake_write_fd_(wake_write_fd),
      port_(port),
      render_(std::move(render)),
      thread_([this] { Serve(); }) {}

MetricsHttpServer::~MetricsHttpServer() {
  const char byte = 0;
  while (write(wake_write_fd_, &byte, 1) < 0 && errno == EINTR) {
  }
  thread_.join();
  close(listen_fd_);
  close(wake_read_fd_);
  close(wake_write_fd_);
}

void MetricsHttpServer::Serve() {
  pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_read_fd_, POLLIN, 0}};
  while (true) {
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[1].revents != 0) return;
    if ((fds[0].revents & POLLIN) == 0) continue;
    const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    SetIoTimeouts(fd, kIoTimeoutSeconds);
    HandleConnection(fd);
    close(fd);
  }
}

void MetricsHttpServer::HandleConnection(int fd) const {
  std::string request;
  char buffer[4096];
  while (request.find("\r\n\r\n") == std::string::npos) {
    if (request.size() > kMaxRequestBytes) {
      SendAll(fd, Response("431 Request Header Fields Too Large", "text/plain",
                           "request too large\n", false));
      return;
    }
    const ssize_t n = recv(fd, buffer, sizeof(buffer), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    request.append(buffer, static_cast<size_t>(n));
  }
  const size_t method_end = request.find(' ');
  const size_t target_end = request.find(' ', method_end + 1);
  if (method_end == std::string::npos || target_end == std::string::npos) {
    SendAll(fd,
            Response("400 Bad Request", "text/plain", "bad request\n", false));
    return;
  }
  const std::string method = request.substr(0, method_end);
  std::string path =
      request.substr(method_end + 1, target_end - method_end - 1);
  path = path.substr(0, path.find('?'));
  const bool head = method == "HEAD";
  if (path != "/metrics") {
    SendAll(fd, Response("404 Not Found", "text/plain",
                         "metrics are at /metrics\n", head));
  } else if (method != "GET" && !head) {
    SendAll(fd, Response("405 Method Not Allowed", "text/plain", "use GET\n",
                         false));
  } else {
    SendAll(fd, Response("200 OK", "text/plain; version=0.0.4; charset=utf-8",
                         render_(), head));
  }
}

}  // namespace encoder::metrics
