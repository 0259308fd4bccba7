// The HTTP server against hostile and unusual clients, over real sockets:
// framing (RFC 9112), body and header limits while reading, pipelining,
// cancellation when a client leaves, request timeouts, keep-alive and
// connection limits, HEAD, 100-continue and gzip.
#include "server/transport/http_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "server/transport/gzip.h"

namespace encoder::http {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// A blocking client connection with a receive timeout.
class Client {
 public:
  explicit Client(int port, double timeout_seconds = 10) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    timeval tv{};
    tv.tv_sec = static_cast<time_t>(timeout_seconds);
    tv.tv_usec = static_cast<suseconds_t>(
        (timeout_seconds - static_cast<double>(tv.tv_sec)) * 1e6);
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    const int one = 1;
    setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      close(fd_);
      fd_ = -1;
    }
  }
  ~Client() { Close(); }

  bool ok() const { return fd_ >= 0; }
  void Close() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }
  void ShutdownWrite() { shutdown(fd_, SHUT_WR); }

  // Sends everything; false when the server stopped taking bytes.
  bool Send(const std::string& data) {
    size_t sent = 0;
    while (sent < data.size()) {
      const ssize_t n =
          send(fd_, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) return false;
      sent += static_cast<size_t>(n);
    }
    return true;
  }

  struct Reply {
    int status = 0;  // 0: no response (closed or timed out)
    std::map<std::string, std::string> headers;  // lower-case names
    std::string body;
  };

  // Reads one response (Content-Length framed, or to the end of the
  // connection without one). `head`: the request was HEAD (no body).
  Reply Read(bool head = false) {
    Reply reply;
    size_t end;
    while ((end = buffer_.find("\r\n\r\n")) == std::string::npos) {
      if (!Fill()) return reply;
    }
    const std::string header = buffer_.substr(0, end);
    buffer_.erase(0, end + 4);
    const size_t space = header.find(' ');
    if (space == std::string::npos ||
        !absl::SimpleAtoi(header.substr(space + 1, 3), &reply.status)) {
      return reply;
    }
    size_t pos = header.find("\r\n");
    while (pos != std::string::npos) {
      const size_t next = header.find("\r\n", pos + 2);
      const std::string line =
          header.substr(pos + 2, next == std::string::npos ? std::string::npos
                                                           : next - pos - 2);
      const size_t colon = line.find(':');
      if (colon != std::string::npos) {
        reply.headers[absl::AsciiStrToLower(line.substr(0, colon))] =
            std::string(absl::StripAsciiWhitespace(line.substr(colon + 1)));
      }
      pos = next;
    }
    if (reply.status == 100) return reply;
    auto length = reply.headers.find("content-length");
    if (head) return reply;
    if (length == reply.headers.end()) {
      while (Fill()) {
      }
      reply.body = std::move(buffer_);
      buffer_.clear();
      return reply;
    }
    size_t n = 0;
    if (!absl::SimpleAtoi(length->second, &n)) return reply;
    while (buffer_.size() < n) {
      if (!Fill()) break;
    }
    reply.body = buffer_.substr(0, n);
    buffer_.erase(0, std::min(n, buffer_.size()));
    return reply;
  }

  // Whether the server closed the connection (reads its end within the
  // receive timeout).
  bool ClosedByServer() {
    char c;
    const ssize_t n = recv(fd_, &c, 1, 0);
    return n == 0 || (n < 0 && errno == ECONNRESET);
  }

 private:
  bool Fill() {
    char chunk[16384];
    const ssize_t n = recv(fd_, chunk, sizeof(chunk), 0);
    if (n <= 0) return false;
    buffer_.append(chunk, static_cast<size_t>(n));
    return true;
  }

  int fd_ = -1;
  std::string buffer_;
};

// Exchanges a handler kept, to check what became of them.
struct Held {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::shared_ptr<Exchange>> exchanges;

  void Add(std::shared_ptr<Exchange> x) {
    std::lock_guard<std::mutex> lock(mu);
    exchanges.push_back(std::move(x));
    cv.notify_all();
  }
  std::shared_ptr<Exchange> WaitFor(size_t i) {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait_for(lock, std::chrono::seconds(10),
                [&] { return exchanges.size() > i; });
    return exchanges.size() > i ? exchanges[i] : nullptr;
  }
};

Response Text(std::string body, int status = 200) {
  Response r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

class HttpServerTest : public ::testing::Test {
 protected:
  void Start(ServerOptions options = {}) {
    options.listen = "127.0.0.1:0";
    Router router;
    router.Add("GET", "/hello",
               [](std::shared_ptr<Exchange> x) { x->Respond(Text("hello")); });
    router.Add("POST", "/echo", [](std::shared_ptr<Exchange> x) {
      x->Respond(Text(x->request().body));
    });
    // Answers after `ms` (the query), from another thread.
    router.Add("GET", "/later", [](std::shared_ptr<Exchange> x) {
      int ms = 0;
      (void)absl::SimpleAtoi(x->request().query, &ms);
      std::thread([x, ms] {
        std::this_thread::sleep_for(std::chrono::milliseconds(ms));
        x->Respond(Text(absl::StrCat("later ", ms)));
      }).detach();
    });
    router.Add("POST", "/hold", [this](std::shared_ptr<Exchange> x) {
      held_.Add(std::move(x));
    });
    router.Add("GET", "/items/*", [](std::shared_ptr<Exchange> x) {
      x->Respond(Text("item " + x->request().path_param));
    });
    router.Add("GET", "/big", [](std::shared_ptr<Exchange> x) {
      std::string body;
      for (int i = 0; i < 2000; ++i) absl::StrAppend(&body, "0.", i, ", ");
      Response r = Text(std::move(body));
      r.content_type = "application/json";
      x->Respond(std::move(r));
    });
    auto started = HttpServer::Start(options, std::move(router));
    ASSERT_TRUE(started.ok()) << started.status();
    server_ = std::move(*started);
  }

  int port() const { return server_->port(); }

  Held held_;
  std::unique_ptr<HttpServer> server_;
};

constexpr char kHost[] = "Host: t\r\n";

TEST_F(HttpServerTest, PipelinedRequestsAreAnsweredInOrder) {
  Start();
  Client c(port());
  ASSERT_TRUE(c.ok());
  // The first answer comes late, from another thread; the others at once.
  ASSERT_TRUE(c.Send(absl::StrCat(
      "GET /later?300 HTTP/1.1\r\n", kHost, "\r\n", "POST /echo HTTP/1.1\r\n",
      kHost, "Content-Length: 5\r\n\r\nfirst", "GET /hello HTTP/1.1\r\n", kHost,
      "\r\n", "POST /echo HTTP/1.1\r\n", kHost,
      "Transfer-Encoding: chunked\r\n\r\n3\r\nlas\r\n1\r\nt\r\n0\r\n\r\n")));
  const std::vector<std::string> expected = {"later 300", "first", "hello",
                                             "last"};
  for (const std::string& body : expected) {
    const Client::Reply r = c.Read();
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(r.body, body);
  }
  // The connection stays open for more.
  ASSERT_TRUE(c.Send(absl::StrCat("GET /hello HTTP/1.1\r\n", kHost, "\r\n")));
  EXPECT_EQ(c.Read().body, "hello");
  EXPECT_EQ(server_->stats().requests, 5);
}

TEST_F(HttpServerTest, ConflictingContentLengthsAre400AndClose) {
  Start();
  {
    Client c(port());
    ASSERT_TRUE(c.Send(absl::StrCat("POST /echo HTTP/1.1\r\n", kHost,
                                    "Content-Length: 3\r\n"
                                    "Content-Length: 5\r\n\r\nabcde")));
    Client::Reply r = c.Read();
    EXPECT_EQ(r.status, 400);
    EXPECT_NE(r.body.find("Content-Length"), std::string::npos) << r.body;
    EXPECT_EQ(r.headers["connection"], "close");
    EXPECT_TRUE(c.ClosedByServer());
  }
  {
    // The same value twice is one length (RFC 9112, 6.3).
    Client c(port());
    ASSERT_TRUE(c.Send(absl::StrCat("POST /echo HTTP/1.1\r\n", kHost,
                                    "Content-Length: 3\r\n"
                                    "Content-Length: 3\r\n\r\nabc")));
    const Client::Reply r = c.Read();
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(r.body, "abc");
  }
  {
    Client c(port());
    ASSERT_TRUE(c.Send(absl::StrCat("POST /echo HTTP/1.1\r\n", kHost,
                                    "Content-Length: 3\r\n"
                                    "Transfer-Encoding: chunked\r\n\r\n"
                                    "3\r\nabc\r\n0\r\n\r\n")));
    EXPECT_EQ(c.Read().status, 400);
    EXPECT_TRUE(c.ClosedByServer());
  }
}

TEST_F(HttpServerTest, TransferCodingsOtherThanChunkedAreRefused) {
  Start();
  {
    Client c(port());
    ASSERT_TRUE(c.Send(absl::StrCat("POST /echo HTTP/1.1\r\n", kHost,
                                    "Transfer-Encoding: gzip\r\n\r\nxx")));
    EXPECT_EQ(c.Read().status, 400);
    EXPECT_TRUE(c.ClosedByServer());
  }
  {
    Client c(port());
    ASSERT_TRUE(c.Send(
        absl::StrCat("POST /echo HTTP/1.1\r\n", kHost,
                     "Transfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n")));
    EXPECT_EQ(c.Read().status, 501);
  }
}

TEST_F(HttpServerTest, ChunkedBodyOverTheLimitStopsWhileArriving) {
  ServerOptions options;
  options.max_body_bytes = 64 << 10;
  Start(options);
  Client c(port(), 20);
  ASSERT_TRUE(c.Send(absl::StrCat("POST /echo HTTP/1.1\r\n", kHost,
                                  "Transfer-Encoding: chunked\r\n\r\n")));
  // 64 MiB in 4 KiB chunks, sent until the server stops taking them.
  const std::string chunk = "1000\r\n" + std::string(4096, 'x') + "\r\n";
  std::atomic<int64_t> sent{0};
  std::thread sender([&] {
    for (int i = 0; i < (64 << 20) / 4096; ++i) {
      if (!c.Send(chunk)) break;
      sent += 4096;
    }
  });
  const Client::Reply r = c.Read();
  sender.join();
  EXPECT_EQ(r.status, 413);
  EXPECT_NE(r.body.find("--http-max-body-bytes"), std::string::npos);
  // The server read a little past its limit, not the whole upload.
  EXPECT_LT(sent.load(), int64_t{16} << 20);
  EXPECT_EQ(server_->stats().rejected_framing, 1);
}

TEST_F(HttpServerTest, ChunkedBodiesOfManyBlocksArriveWhole) {
  ServerOptions options;
  options.max_body_bytes = 8 << 20;
  Start(options);
  Client c(port(), 30);
  // 2.5 MiB in chunks of odd sizes: the body spans several 1 MiB blocks.
  std::string expected;
  std::string request = absl::StrCat("POST /echo HTTP/1.1\r\n", kHost,
                                     "Transfer-Encoding: chunked\r\n\r\n");
  for (int i = 0; expected.size() < (5u << 19); ++i) {
    std::string chunk(7919 + i % 13, static_cast<char>('a' + i % 26));
    absl::StrAppend(&request, absl::Hex(chunk.size()), "\r\n", chunk, "\r\n");
    expected += chunk;
  }
  request += "0\r\n\r\n";
  std::thread sender([&] { c.Send(request); });
  const Client::Reply r = c.Read();
  sender.join();
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body.size(), expected.size());
  EXPECT_TRUE(r.body == expected);
}

TEST_F(HttpServerTest, DeclaredLengthOverTheLimitIs413BeforeTheBody) {
  ServerOptions options;
  options.max_body_bytes = 1000;
  Start(options);
  Client c(port());
  ASSERT_TRUE(c.Send(absl::StrCat("POST /echo HTTP/1.1\r\n", kHost,
                                  "Content-Length: 1000000\r\n\r\n")));
  EXPECT_EQ(c.Read().status, 413);
  EXPECT_TRUE(c.ClosedByServer());
}

TEST_F(HttpServerTest, ExpectContinueGetsAnInterimAnswer) {
  Start();
  Client c(port());
  ASSERT_TRUE(c.Send(absl::StrCat("POST /echo HTTP/1.1\r\n", kHost,
                                  "Content-Length: 4\r\n"
                                  "Expect: 100-continue\r\n\r\n")));
  EXPECT_EQ(c.Read().status, 100);
  ASSERT_TRUE(c.Send("body"));
  const Client::Reply r = c.Read();
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "body");
}

TEST_F(HttpServerTest, WrongMethodIs405WithAllowAndUnknownPathIs404) {
  Start();
  for (const char* method : {"PUT", "DELETE", "GET"}) {
    Client c(port());
    ASSERT_TRUE(c.Send(absl::StrCat(method, " /echo HTTP/1.1\r\n", kHost,
                                    "Content-Length: 0\r\n\r\n")));
    Client::Reply r = c.Read();
    EXPECT_EQ(r.status, 405) << method;
    EXPECT_EQ(r.headers["allow"], "POST") << method;
  }
  Client c(port());
  ASSERT_TRUE(c.Send(absl::StrCat("POST /hello HTTP/1.1\r\n", kHost,
                                  "Content-Length: 0\r\n\r\n")));
  Client::Reply r = c.Read();
  EXPECT_EQ(r.status, 405);
  EXPECT_EQ(r.headers["allow"], "GET, HEAD");
  ASSERT_TRUE(c.Send(absl::StrCat("GET /nowhere HTTP/1.1\r\n", kHost, "\r\n")));
  EXPECT_EQ(c.Read().status, 404);
}

TEST_F(HttpServerTest, PatternRoutesDecodeTheirCapture) {
  Start();
  Client c(port());
  ASSERT_TRUE(
      c.Send(absl::StrCat("GET /items/a%20b HTTP/1.1\r\n", kHost, "\r\n")));
  EXPECT_EQ(c.Read().body, "item a b");
  ASSERT_TRUE(c.Send(absl::StrCat("GET /items/ HTTP/1.1\r\n", kHost, "\r\n")));
  EXPECT_EQ(c.Read().status, 404);
  ASSERT_TRUE(
      c.Send(absl::StrCat("GET /items/%zz HTTP/1.1\r\n", kHost, "\r\n")));
  EXPECT_EQ(c.Read().status, 400);
}

TEST_F(HttpServerTest, HeadAnswersTheGetsLengthWithoutABody) {
  Start();
  Client c(port());
  ASSERT_TRUE(c.Send(absl::StrCat("HEAD /hello HTTP/1.1\r\n", kHost, "\r\n")));
  Client::Reply r = c.Read(/*head=*/true);
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.headers["content-length"], "5");
  // Nothing follows the header: the next answer is the next request's.
  ASSERT_TRUE(c.Send(absl::StrCat("GET /hello HTTP/1.1\r\n", kHost, "\r\n")));
  EXPECT_EQ(c.Read().body, "hello");
}

TEST_F(HttpServerTest, AClientThatLeavesCancelsItsRequest) {
  Start();
  Client c(port());
  ASSERT_TRUE(c.Send(absl::StrCat("POST /hold HTTP/1.1\r\n", kHost,
                                  "Content-Length: 2\r\n\r\nhi")));
  std::shared_ptr<Exchange> x = held_.WaitFor(0);
  ASSERT_NE(x, nullptr);
  EXPECT_FALSE(x->cancelled());
  const auto left = Clock::now();
  c.Close();
  while (!x->cancelled() && SecondsSince(left) < 5) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_TRUE(x->cancelled());
  EXPECT_EQ(x->cancel_reason(), Exchange::CancelReason::kClientClosed);
  EXPECT_LT(SecondsSince(left), 1.0);
  x->Respond(Text("too late"));  // dropped, harmlessly
  EXPECT_EQ(server_->stats().client_closed, 1);
}

TEST_F(HttpServerTest, AClientThatLeavesAfterConnectionCloseCancelsToo) {
  Start();
  Client c(port());
  ASSERT_TRUE(c.Send(absl::StrCat("POST /hold HTTP/1.1\r\n", kHost,
                                  "Connection: close\r\n"
                                  "Content-Length: 2\r\n\r\nhi")));
  std::shared_ptr<Exchange> x = held_.WaitFor(0);
  ASSERT_NE(x, nullptr);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(x->cancelled());
  const auto left = Clock::now();
  c.Close();
  while (!x->cancelled() && SecondsSince(left) < 5) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(x->cancel_reason(), Exchange::CancelReason::kClientClosed);
  EXPECT_LT(SecondsSince(left), 1.0);
}

TEST_F(HttpServerTest, RequestTimeoutAnswers504AndTheConnectionGoesOn) {
  ServerOptions options;
  options.request_timeout = absl::Milliseconds(300);
  Start(options);
  Client c(port());
  const auto start = Clock::now();
  ASSERT_TRUE(c.Send(absl::StrCat("POST /hold HTTP/1.1\r\n", kHost,
                                  "Content-Length: 0\r\n\r\n")));
  const Client::Reply r = c.Read();
  EXPECT_EQ(r.status, 504);
  EXPECT_GE(SecondsSince(start), 0.29);
  EXPECT_LT(SecondsSince(start), 1.5);
  std::shared_ptr<Exchange> x = held_.WaitFor(0);
  ASSERT_NE(x, nullptr);
  EXPECT_EQ(x->cancel_reason(), Exchange::CancelReason::kTimeout);
  EXPECT_LE(x->deadline(), absl::Now());
  x->Respond(Text("late"));  // dropped: the client already has its 504
  ASSERT_TRUE(c.Send(absl::StrCat("GET /hello HTTP/1.1\r\n", kHost, "\r\n")));
  EXPECT_EQ(c.Read().body, "hello");
  EXPECT_EQ(server_->stats().timed_out, 1);
}

TEST_F(HttpServerTest, SlowHeadersGet408AndIdleConnectionsClose) {
  ServerOptions options;
  options.io_timeout = absl::Milliseconds(600);
  options.keep_alive_timeout = absl::Milliseconds(300);
  Start(options);
  {
    Client c(port());
    const auto start = Clock::now();
    EXPECT_TRUE(c.ClosedByServer());
    EXPECT_LT(SecondsSince(start), 1.5);
  }
  Client c(port());
  const auto start = Clock::now();
  // One byte every 100 ms: the header never completes in time.
  const std::string request = "GET /hello HTTP/1.1\r\nX-Slow: aaaaaaaaaaaaaaaa";
  for (char ch : request) {
    if (SecondsSince(start) > 1.0 || !c.Send(std::string(1, ch))) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  const Client::Reply r = c.Read();
  EXPECT_EQ(r.status, 408);
  EXPECT_LT(SecondsSince(start), 2.0);
}

TEST_F(HttpServerTest, OversizedHeadersAre431) {
  ServerOptions options;
  options.max_header_bytes = 1024;
  Start(options);
  Client c(port());
  ASSERT_TRUE(c.Send(absl::StrCat("GET /hello HTTP/1.1\r\n", kHost, "X-Big: ",
                                  std::string(4000, 'a'), "\r\n\r\n")));
  EXPECT_EQ(c.Read().status, 431);
}

TEST_F(HttpServerTest, MalformedRequestLineIs400) {
  Start();
  Client c(port());
  ASSERT_TRUE(c.Send("NOT AN HTTP REQUEST\r\n\r\n"));
  EXPECT_EQ(c.Read().status, 400);
  EXPECT_TRUE(c.ClosedByServer());
  Client d(port());
  ASSERT_TRUE(d.Send("GET /hello HTTP/2.0\r\n\r\n"));
  EXPECT_EQ(d.Read().status, 400);
}

TEST_F(HttpServerTest, ConnectionsBeyondTheLimitWaitForASlot) {
  ServerOptions options;
  options.max_connections = 2;
  options.keep_alive_timeout = absl::Seconds(30);
  Start(options);
  auto a = std::make_unique<Client>(port());
  Client b(port());
  ASSERT_TRUE(a->Send(absl::StrCat("GET /hello HTTP/1.1\r\n", kHost, "\r\n")));
  ASSERT_TRUE(b.Send(absl::StrCat("GET /hello HTTP/1.1\r\n", kHost, "\r\n")));
  EXPECT_EQ(a->Read().status, 200);
  EXPECT_EQ(b.Read().status, 200);
  Client third(port(), 0.5);
  ASSERT_TRUE(
      third.Send(absl::StrCat("GET /hello HTTP/1.1\r\n", kHost, "\r\n")));
  EXPECT_EQ(third.Read().status, 0);  // not accepted yet
  a.reset();                          // frees a slot
  const auto start = Clock::now();
  Client::Reply r;
  while (r.status == 0 && SecondsSince(start) < 5) r = third.Read();
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "hello");
}

TEST_F(HttpServerTest, GzipWhenAskedFor) {
  Start();
  Client c(port());
  ASSERT_TRUE(
      c.Send(absl::StrCat("GET /big HTTP/1.1\r\n", kHost,
                          "Accept-Encoding: br;q=1, gzip;q=0.5\r\n\r\n")));
  Client::Reply r = c.Read();
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.headers["content-encoding"], "gzip");
  ASSERT_GE(r.body.size(), 2u);
  EXPECT_EQ(static_cast<unsigned char>(r.body[0]), 0x1f);
  EXPECT_EQ(static_cast<unsigned char>(r.body[1]), 0x8b);
  ASSERT_TRUE(c.Send(absl::StrCat("GET /big HTTP/1.1\r\n", kHost,
                                  "Accept-Encoding: gzip;q=0, *\r\n\r\n")));
  r = c.Read();
  EXPECT_EQ(r.headers.count("content-encoding"), 0u);
  EXPECT_EQ(r.body.substr(0, 4), "0.0,");
}

TEST_F(HttpServerTest, StoppingCancelsHeldRequests) {
  Start();
  Client c(port());
  ASSERT_TRUE(c.Send(absl::StrCat("POST /hold HTTP/1.1\r\n", kHost,
                                  "Content-Length: 0\r\n\r\n")));
  std::shared_ptr<Exchange> x = held_.WaitFor(0);
  ASSERT_NE(x, nullptr);
  server_.reset();
  EXPECT_TRUE(x->cancelled());
  x->Respond(Text("after the server"));  // must not touch it
  x->Post([] { FAIL() << "ran after the server stopped"; });
}

TEST(AcceptsGzipTest, ReadsQValues) {
  EXPECT_TRUE(AcceptsGzip("gzip"));
  EXPECT_TRUE(AcceptsGzip("deflate, GZIP;q=0.1"));
  EXPECT_TRUE(AcceptsGzip("*"));
  EXPECT_FALSE(AcceptsGzip(""));
  EXPECT_FALSE(AcceptsGzip("identity"));
  EXPECT_FALSE(AcceptsGzip("gzip;q=0"));
  EXPECT_FALSE(AcceptsGzip("gzip;q=0, *"));
}

TEST(HttpServerStartTest, RejectsBadOptions) {
  ServerOptions options;
  options.listen = "127.0.0.1";
  EXPECT_EQ(HttpServer::Start(options, Router()).status().code(),
            absl::StatusCode::kInvalidArgument);
  options.listen = "127.0.0.1:0";
  options.max_body_bytes = 0;
  EXPECT_EQ(HttpServer::Start(options, Router()).status().code(),
            absl::StatusCode::kInvalidArgument);
  options.max_body_bytes = 10;
  options.tls_cert_file = "/nonexistent/cert.pem";
  EXPECT_EQ(HttpServer::Start(options, Router()).status().code(),
            absl::StatusCode::kInvalidArgument);  // a cert without a key
  options.tls_key_file = "/nonexistent/key.pem";
  EXPECT_EQ(HttpServer::Start(options, Router()).status().code(),
            absl::StatusCode::kNotFound);
  ServerOptions plain;
  plain.listen = "127.0.0.1:0";
  auto first = HttpServer::Start(plain, Router());
  ASSERT_TRUE(first.ok());
  plain.listen = absl::StrCat("127.0.0.1:", (*first)->port());
  EXPECT_EQ(HttpServer::Start(plain, Router()).status().code(),
            absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace encoder::http
