// The /metrics HTTP server under slow and idle clients, with basic auth and
// gzip. A scrape must not wait for other clients.
#include "server/http/metrics_http_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "gtest/gtest.h"

namespace encoder::http {
namespace {

int Connect(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// Sends `request` (Connection: close is added) and returns the response.
std::string Request(int port, const std::string& request) {
  const int fd = Connect(port);
  EXPECT_GE(fd, 0);
  const std::string full = request + "Connection: close\r\n\r\n";
  EXPECT_EQ(send(fd, full.data(), full.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(full.size()));
  std::string response;
  char buffer[4096];
  ssize_t n;
  while ((n = recv(fd, buffer, sizeof(buffer), 0)) > 0) {
    response.append(buffer, static_cast<size_t>(n));
  }
  close(fd);
  return response;
}

std::string Status(const std::string& response) {
  return response.substr(0, response.find("\r\n"));
}

std::unique_ptr<MetricsHttpServer> StartServer(
    MetricsHttpOptions options = {}) {
  options.listen = "127.0.0.1:0";
  auto server = MetricsHttpServer::Start(
      options, [] { return std::string("encoder_up 1\n"); });
  EXPECT_TRUE(server.ok()) << server.status();
  return server.ok() ? std::move(server).value() : nullptr;
}

TEST(MetricsHttpServerTest, IdleAndSlowClientsDoNotDelayAScrape) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  // 50 connections that never send a byte.
  std::vector<int> idle;
  for (int i = 0; i < 50; ++i) {
    const int fd = Connect(server->port());
    ASSERT_GE(fd, 0);
    idle.push_back(fd);
  }
  // A slow-loris client: a request header trickled one byte every 200 ms.
  std::atomic<bool> stop{false};
  std::thread loris([&] {
    const int fd = Connect(server->port());
    const std::string header = "GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: ";
    size_t i = 0;
    while (!stop.load() && fd >= 0) {
      const char c = i < header.size() ? header[i] : 'a';
      if (send(fd, &c, 1, MSG_NOSIGNAL) != 1) break;
      ++i;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    if (fd >= 0) close(fd);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  double slowest = 0;
  for (int i = 0; i < 5; ++i) {
    const auto start = std::chrono::steady_clock::now();
    const std::string response =
        Request(server->port(), "GET /metrics HTTP/1.1\r\nHost: x\r\n");
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
    slowest = std::max(slowest, seconds);
    EXPECT_EQ(Status(response), "HTTP/1.1 200 OK");
    EXPECT_NE(response.find("encoder_up 1"), std::string::npos);
  }
  EXPECT_LT(slowest, 1.0) << "a scrape waited behind idle or slow clients";
  RecordProperty("slowest_scrape_ms", static_cast<int>(slowest * 1000));
  stop.store(true);
  loris.join();
  for (int fd : idle) close(fd);
}

TEST(MetricsHttpServerTest, IdleConnectionsAreDropped) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  const int fd = Connect(server->port());
  ASSERT_GE(fd, 0);
  const auto start = std::chrono::steady_clock::now();
  char byte;
  EXPECT_EQ(recv(fd, &byte, 1, 0), 0);  // closed by the server
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  EXPECT_LT(seconds, MetricsHttpServer::kKeepAliveSeconds + 2.0);
  close(fd);
}

TEST(MetricsHttpServerTest, BasicAuth) {
  const std::string path = ::testing::TempDir() + "/metrics_basic_auth.txt";
  { std::ofstream(path) << "# scraper\nprometheus:p4ss\n"; }
  MetricsHttpOptions options;
  options.basic_auth_file = path;
  auto server = StartServer(options);
  ASSERT_NE(server, nullptr);
  const std::string get = "GET /metrics HTTP/1.1\r\nHost: x\r\n";
  const std::string none = Request(server->port(), get);
  EXPECT_EQ(Status(none), "HTTP/1.1 401 Unauthorized");
  EXPECT_NE(none.find("WWW-Authenticate: Basic"), std::string::npos);
  EXPECT_EQ(none.find("encoder_up"), std::string::npos);
  const std::string wrong = Request(
      server->port(), get + "Authorization: Basic " +
                          absl::Base64Escape("prometheus:nope") + "\r\n");
  EXPECT_EQ(Status(wrong), "HTTP/1.1 401 Unauthorized");
  const std::string right = Request(
      server->port(), get + "Authorization: Basic " +
                          absl::Base64Escape("prometheus:p4ss") + "\r\n");
  EXPECT_EQ(Status(right), "HTTP/1.1 200 OK");
  EXPECT_NE(right.find("encoder_up 1"), std::string::npos);
  std::remove(path.c_str());
}

TEST(MetricsHttpServerTest, GzipForScrapersThatAskForIt) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  const std::string response =
      Request(server->port(),
              "GET /metrics HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\n");
  EXPECT_EQ(Status(response), "HTTP/1.1 200 OK");
  EXPECT_NE(response.find("Content-Encoding: gzip"), std::string::npos);
  const size_t body = response.find("\r\n\r\n") + 4;
  ASSERT_LT(body + 1, response.size());
  EXPECT_EQ(static_cast<unsigned char>(response[body]), 0x1f);  // gzip magic
  EXPECT_EQ(static_cast<unsigned char>(response[body + 1]), 0x8b);
}

TEST(MetricsHttpServerTest, RejectsBadOptions) {
  MetricsHttpOptions options;
  options.listen = "127.0.0.1:0";
  options.tls_cert_file = "/nonexistent/cert.pem";
  EXPECT_EQ(MetricsHttpServer::Start(options, [] { return std::string(); })
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);  // cert without key
  options.tls_key_file = "/nonexistent/key.pem";
  EXPECT_EQ(MetricsHttpServer::Start(options, [] { return std::string(); })
                .status()
                .code(),
            absl::StatusCode::kNotFound);
  MetricsHttpOptions auth;
  auth.listen = "127.0.0.1:0";
  auth.basic_auth_file = "/nonexistent/users";
  EXPECT_EQ(MetricsHttpServer::Start(auth, [] { return std::string(); })
                .status()
                .code(),
            absl::StatusCode::kNotFound);
}

TEST(MetricsHttpServerTest, RejectsEmptyMalformedAndBusyAddresses) {
  const auto start = [](const std::string& listen) {
    MetricsHttpOptions options;
    options.listen = listen;
    return MetricsHttpServer::Start(options, [] { return std::string(); });
  };
  EXPECT_EQ(start("").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(start("127.0.0.1").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(start("127.0.0.1:http").status().code(),
            absl::StatusCode::kInvalidArgument);
  auto first = start("127.0.0.1:0");
  ASSERT_TRUE(first.ok()) << first.status();
  const std::string busy = "127.0.0.1:" + std::to_string((*first)->port());
  EXPECT_EQ(start(busy).status().code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace encoder::http
