// libFuzzer target: arbitrary bytes sent to a real HTTP server
// (server/transport/http_server.h) over a loopback connection, what comes back
// read until it pauses for 30 ms, then the connection closed. Exercises the
// session's whole state machine on hostile input: Beast's parser fed by hand,
// framing and limit checks, 100-continue, pipelining (several requests in one
// input), routes answering at once, later from another thread, or never
// (request timeout), error answers with lingering close, and a client that
// leaves with work in progress. Small limits and timeouts keep each run short.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "server/transport/http_server.h"

namespace {

using encoder::http::Exchange;
using encoder::http::HttpServer;
using encoder::http::Response;

Response Text(std::string body) {
  Response r;
  r.body = std::move(body);
  return r;
}

// Kept for the whole process (reachable, so not a leak): the fuzzer never
// tears it down.
HttpServer* server = nullptr;

int Port() {
  static const int port = [] {
    encoder::http::ServerOptions options;
    options.listen = "127.0.0.1:0";
    options.max_body_bytes = 4096;
    options.max_header_bytes = 1024;
    options.max_pipelined_requests = 4;
    options.keep_alive_timeout = absl::Milliseconds(200);
    options.io_timeout = absl::Milliseconds(200);
    options.request_timeout = absl::Milliseconds(300);
    encoder::http::Router router;
    router.Add("POST", "/echo", [](std::shared_ptr<Exchange> x) {
      x->Respond(Text(x->request().body));
    });
    router.Add("GET", "/items/*", [](std::shared_ptr<Exchange> x) {
      Response r = Text(x->request().path_param);
      r.content_type = "application/json";
      r.headers.push_back(
          {"X-Echo", std::string(x->request().HeaderValue("X-Echo"))});
      x->Respond(std::move(r));
    });
    router.Add("GET", "/later", [](std::shared_ptr<Exchange> x) {
      std::thread([x] {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
        x->Post([x] { x->Respond(Text("later")); });
      }).detach();
    });
    router.Add("POST", "/never", [](std::shared_ptr<Exchange>) {});
    server = HttpServer::Start(options, std::move(router))->release();
    return server->port();
  }();
  return port;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const int port = Port();
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  timeval send_limit{};
  send_limit.tv_sec = 2;
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &send_limit, sizeof(send_limit));
  // Answers to routes that answer at once or within a few ms come in this
  // pause; a route that never answers is left with its client gone.
  timeval pause{};
  pause.tv_usec = 30000;
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &pause, sizeof(pause));
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
    size_t sent = 0;
    while (sent < size) {
      const ssize_t n = send(fd, data + sent, size - sent, MSG_NOSIGNAL);
      if (n <= 0) break;
      sent += static_cast<size_t>(n);
    }
    char buffer[4096];
    while (recv(fd, buffer, sizeof(buffer), 0) > 0) {
    }
  }
  close(fd);
  return 0;
}
