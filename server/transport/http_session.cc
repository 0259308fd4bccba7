// One connection of the HTTP server: reads and parses requests (Beast's
// parser, fed by hand so that the first byte of a request, the end of its
// header and every body byte are seen), answers them in order, and notices
// a client that leaves. Everything of a session runs on its strand.
#include <sys/socket.h>

#include <algorithm>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/stream_traits.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/serializer.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <cerrno>
#include <chrono>
#include <deque>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "server/transport/gzip.h"
#include "server/transport/http_internal.h"
#include "server/transport/request_body.h"

namespace encoder::http::detail {
namespace {

namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;
using boost::system::error_code;

Clock::duration ToChrono(absl::Duration d) {
  return std::chrono::duration_cast<Clock::duration>(
      absl::ToChronoNanoseconds(d));
}

// Bytes discarded at most, and for how long, while closing after an error
// answer (so that the client reads the answer instead of a reset).
constexpr size_t kLingerBytes = 4 << 20;
constexpr auto kLingerTime = std::chrono::seconds(2);

bool Sendable(const std::string& s) {
  return s.find_first_of(std::string_view("\r\n\0", 3)) == std::string::npos;
}

bool Compressible(const std::string& content_type) {
  return absl::StartsWithIgnoreCase(content_type, "text/") ||
         absl::StartsWithIgnoreCase(content_type, "application/json");
}

// What a queued request needs besides itself to be answered.
struct Pending {
  Request request;
  bool complete = false;  // a whole request; else only `error` is answered
  int error_status = 0;
  std::string error_message;
  bool keep_alive = true;
  bool head = false;
  bool gzip = false;
};

int StatusOfParseError(const error_code& ec, std::string* message) {
  if (ec == bhttp::error::body_limit) {
    *message = "the request body is over the limit (--http-max-body-bytes)";
    return 413;
  }
  if (ec == bhttp::error::header_limit || ec == bhttp::error::buffer_overflow) {
    *message = "the request header is over the limit";
    return 431;
  }
  if (ec == bhttp::error::bad_content_length) {
    *message =
        "bad Content-Length (conflicting values, or beside "
        "Transfer-Encoding)";
    return 400;
  }
  if (ec == bhttp::error::bad_transfer_encoding) {
    *message = "bad Transfer-Encoding (repeated, or beside Content-Length)";
    return 400;
  }
  *message = absl::StrCat("malformed request: ", ec.message());
  return 400;
}

// Decodes %XX escapes; false for a malformed escape or a NUL.
bool PercentDecode(std::string_view in, std::string* out) {
  out->clear();
  out->reserve(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '%') {
      out->push_back(in[i]);
      continue;
    }
    if (i + 2 >= in.size() || !absl::ascii_isxdigit(in[i + 1]) ||
        !absl::ascii_isxdigit(in[i + 2])) {
      return false;
    }
    auto hex = [](char c) {
      return absl::ascii_isdigit(c) ? c - '0'
                                    : absl::ascii_tolower(c) - 'a' + 10;
    };
    const char c = static_cast<char>(hex(in[i + 1]) * 16 + hex(in[i + 2]));
    if (c == '\0') return false;
    out->push_back(c);
    i += 2;
  }
  return true;
}

template <class Stream>
class Session : public SessionBase,
                public std::enable_shared_from_this<Session<Stream>> {
 public:
  template <class... Args>
  Session(Core* core, Args&&... args)
      : core_(core),
        stream_(std::forward<Args>(args)...),
        buffer_(static_cast<size_t>(core->options.max_header_bytes) +
                (64 << 10)),
        read_timer_(stream_.get_executor()),
        write_timer_(stream_.get_executor()),
        request_timer_(stream_.get_executor()) {
    error_code ec;
    const tcp::endpoint peer = Lowest().remote_endpoint(ec);
    if (!ec) {
      remote_address_ = peer.address().to_string();
      remote_port_ = peer.port();
    }
  }

  ~Session() override {
    if (current_) current_->Cancel(Exchange::CancelReason::kServerStopping);
    core_->open_connections.fetch_sub(1);
    if (core_->on_session_closed) core_->on_session_closed();
  }

  void Start() {
    if constexpr (kTls) {
      ArmTimer(&read_timer_, &read_gen_, Clock::now() + Io(),
               [](Session* s) { s->Close(); });
      stream_.async_handshake(
          asio::ssl::stream_base::server,
          [self = this->shared_from_this()](const error_code& ec) {
            self->read_gen_++;
            self->read_timer_.cancel();
            if (ec || self->closing_) return self->Close();
            self->idle_since_ = Clock::now();
            self->Pump();
          });
    } else {
      asio::dispatch(stream_.get_executor(), [self = this->shared_from_this()] {
        self->idle_since_ = Clock::now();
        self->Pump();
      });
    }
  }

  void Deliver(const Exchange* exchange, Response response) override {
    asio::post(stream_.get_executor(),
               [self = this->shared_from_this(), exchange,
                response = std::move(response)]() mutable {
                 if (self->current_.get() != exchange) return;
                 self->current_.reset();
                 self->request_gen_++;
                 self->request_timer_.cancel();
                 self->Send(std::move(response), self->current_info_);
                 self->Pump();
               });
  }

  void Stop() override {
    asio::post(stream_.get_executor(), [self = this->shared_from_this()] {
      self->CancelAll(Exchange::CancelReason::kServerStopping);
      self->Close();
    });
  }

 private:
  static constexpr bool kTls = !std::is_same_v<Stream, tcp::socket>;

  tcp::socket& Lowest() { return beast::get_lowest_layer(stream_); }
  Clock::duration Io() const { return ToChrono(core_->options.io_timeout); }

  bool Busy() const {
    return current_ != nullptr || writing_ || !queue_.empty();
  }
  bool Partial() const {
    return buffer_.size() > 0 || (parser_ && parser_->got_some());
  }

  // Arms `timer` for `when`; `on_expiry(this)` runs unless the timer is
  // re-armed or its generation moves on first.
  template <class F>
  void ArmTimer(asio::steady_timer* timer, uint64_t* gen,
                Clock::time_point when, F on_expiry) {
    const uint64_t mine = ++*gen;
    timer->expires_at(when);
    timer->async_wait([self = this->shared_from_this(), gen, mine,
                       on_expiry](const error_code& ec) {
      if (ec || *gen != mine || self->closing_) return;
      on_expiry(self.get());
    });
  }

  // The one driver: parse what was read, answer the next request, read on,
  // and set the read deadline for the state that results.
  void Pump() {
    if (closing_) return;
    ParseBuffered();
    DispatchNext();
    StartRead();
    UpdateReadDeadline();
    WatchForClose();
  }

  void StartRead() {
    if (reading_ || read_closed_ || closing_ || lingering_) return;
    if (queue_.size() >=
        static_cast<size_t>(core_->options.max_pipelined_requests)) {
      return;  // read on once the queue shrinks
    }
    const size_t room = buffer_.max_size() - buffer_.size();
    if (room == 0) return;  // the parser takes from the buffer first
    reading_ = true;
    stream_.async_read_some(
        buffer_.prepare(std::min<size_t>(room, 64 << 10)),
        [self = this->shared_from_this()](const error_code& ec, size_t n) {
          self->OnRead(ec, n);
        });
  }

  void OnRead(const error_code& ec, size_t n) {
    reading_ = false;
    if (closing_) return;
    if (lingering_) return Linger(ec, n);
    if (read_closed_) return;  // a read we gave up on (timeout, error)
    if (ec) {
      // The client closed (or reset) the connection: whatever it asked for
      // and has not been answered is no longer wanted.
      CancelAll(Exchange::CancelReason::kClientClosed);
      return Close();
    }
    buffer_.commit(n);
    Pump();
  }

  void ParseBuffered() {
    while (!read_closed_ && buffer_.size() > 0 &&
           queue_.size() <
               static_cast<size_t>(core_->options.max_pipelined_requests)) {
      if (!parser_) {
        parser_.emplace();
        parser_->header_limit(
            static_cast<std::uint32_t>(core_->options.max_header_bytes));
        parser_->body_limit(
            static_cast<std::uint64_t>(core_->options.max_body_bytes));
        header_seen_ = false;
      }
      error_code ec;
      const size_t used = parser_->put(buffer_.data(), ec);
      buffer_.consume(used);
      if (ec == bhttp::error::need_more) {
        if (buffer_.size() == buffer_.max_size()) {
          FailFraming(bhttp::error::header_limit);
        }
        return;
      }
      if (ec) return FailFraming(ec);
      if (parser_->is_header_done() && !header_seen_) {
        header_seen_ = true;
        if (!CheckHeader()) return;
      }
      if (parser_->is_done()) Complete();
    }
  }

  // RFC 9112 checks Beast leaves to the server, and 100-continue.
  bool CheckHeader() {
    const auto& header = parser_->get();
    if (header.version() != 10 && header.version() != 11) {
      FailWith(505, "only HTTP/1.0 and HTTP/1.1 are served here");
      return false;
    }
    const auto te = header.find(bhttp::field::transfer_encoding);
    if (te != header.end()) {
      if (!parser_->chunked()) {
        FailWith(400, "Transfer-Encoding must end in chunked");
        return false;
      }
      for (absl::string_view coding : absl::StrSplit(
               absl::string_view(te->value().data(), te->value().size()),
               ',')) {
        coding = absl::StripAsciiWhitespace(coding);
        if (!absl::EqualsIgnoreCase(coding, "chunked")) {
          FailWith(501, absl::StrCat("transfer coding \"", coding,
                                     "\" is not supported"));
          return false;
        }
      }
    }
    const auto expect = header.find(bhttp::field::expect);
    if (expect != header.end() && !parser_->is_done()) {
      if (!absl::EqualsIgnoreCase(
              absl::string_view(expect->value().data(), expect->value().size()),
              "100-continue")) {
        FailWith(417, "only \"Expect: 100-continue\" is supported");
        return false;
      }
      // Only the request at the head may be told to go on; a pipelined
      // one sends its body when its client stops waiting.
      if (queue_.empty() && current_ == nullptr && !writing_) {
        SendContinue();
      }
    }
    return true;
  }

  void FailFraming(const error_code& ec) {
    std::string message;
    const int status = StatusOfParseError(ec, &message);
    FailWith(status, std::move(message));
  }

  // Queues an error answer for the request being read and reads no more.
  void FailWith(int status, std::string message) {
    Pending p;
    if (parser_ && parser_->is_header_done()) {
      FillRequest(parser_->get(), &p.request);
      p.head = parser_->get().method() == bhttp::verb::head;
      p.request.version = parser_->get().version();
    }
    p.error_status = status;
    p.error_message = std::move(message);
    p.keep_alive = false;
    queue_.push_back(std::move(p));
    parser_.reset();
    read_closed_ = true;
    core_->rejected_framing.fetch_add(1);
  }

  template <class Header>
  void FillRequest(const Header& h, Request* r) {
    r->method = std::string(h.method_string());
    r->target = std::string(h.target());
    r->version = h.version();
    const std::string_view target(r->target);
    const size_t q = target.find('?');
    const std::string_view raw_path = target.substr(0, q);
    if (q != std::string_view::npos)
      r->query = std::string(target.substr(q + 1));
    if (!PercentDecode(raw_path, &r->path)) r->path.clear();
    for (const auto& field : h) {
      r->headers.push_back(
          {std::string(field.name_string()), std::string(field.value())});
    }
    r->remote_address = remote_address_;
    r->remote_port = remote_port_;
  }

  void Complete() {
    Pending p;
    auto message = parser_->release();
    parser_.reset();
    FillRequest(message, &p.request);
    p.request.body = message.body().Take();
    p.complete = true;
    p.keep_alive = message.keep_alive();
    p.head = message.method() == bhttp::verb::head;
    const auto accept = message[bhttp::field::accept_encoding];
    p.gzip = AcceptsGzip(std::string_view(accept.data(), accept.size()));
    if (p.request.path.empty() || p.request.path.front() != '/') {
      p.complete = false;
      p.error_status = 400;
      p.error_message = "the request target is not an absolute path";
      p.keep_alive = false;
    }
    if (!p.keep_alive) read_closed_ = true;
    request_start_.reset();
    queue_.push_back(std::move(p));
  }

  void DispatchNext() {
    if (current_ != nullptr || writing_ || queue_.empty() || lingering_) return;
    Pending p = std::move(queue_.front());
    queue_.pop_front();
    request_start_.reset();
    if (!p.complete) {
      Response r =
          core_->RenderError(p.request.method.empty() ? nullptr : &p.request,
                             p.error_status, p.error_message);
      r.close = true;
      return Send(std::move(r), p);
    }
    core_->requests.fetch_add(1);
    std::string allowed;
    std::string method = p.request.method;
    if (p.head) method = "GET";
    const Handler* handler = core_->router.Find(
        method, p.request.path, &p.request.path_param, &allowed);
    if (handler == nullptr) {
      if (allowed.empty()) {
        Response r = core_->RenderError(
            &p.request, 404,
            absl::StrCat("no route ", p.request.method, " ", p.request.path));
        return Send(std::move(r), p);
      }
      Response r = core_->RenderError(
          &p.request, 405,
          absl::StrCat("use ", allowed, " for ", p.request.path));
      r.headers.push_back({"Allow", allowed});
      return Send(std::move(r), p);
    }
    const absl::Duration timeout = core_->options.request_timeout;
    const absl::Time deadline = timeout > absl::ZeroDuration()
                                    ? absl::Now() + timeout
                                    : absl::InfiniteFuture();
    auto link = std::make_shared<ExchangeLink>();
    link->life = core_->life;
    link->session = this->weak_from_this();
    current_ = std::make_shared<Exchange>(std::move(p.request), deadline, link);
    current_info_ = std::move(p);
    if (timeout > absl::ZeroDuration()) {
      ArmTimer(&request_timer_, &request_gen_, Clock::now() + ToChrono(timeout),
               [](Session* s) { s->RequestTimedOut(); });
    }
    std::shared_ptr<Exchange> exchange = current_;
    try {
      (*handler)(exchange);
    } catch (const std::exception& e) {
      Response r =
          core_->RenderError(&exchange->request(), 500,
                             absl::StrCat("internal error: ", e.what()));
      exchange->Respond(std::move(r));
    }
  }

  void RequestTimedOut() {
    if (current_ == nullptr) return;
    current_->Cancel(Exchange::CancelReason::kTimeout);
    const Request request = current_->request();
    current_.reset();
    core_->timed_out.fetch_add(1);
    Response r = core_->RenderError(
        &request, 504,
        absl::StrCat("the request took longer than the server's limit "
                     "(--http-request-timeout, ",
                     absl::FormatDuration(core_->options.request_timeout),
                     ")"));
    Send(std::move(r), current_info_);
    Pump();
  }

  void CancelAll(Exchange::CancelReason reason) {
    if (current_ != nullptr) {
      current_->Cancel(reason);
      if (reason == Exchange::CancelReason::kClientClosed) {
        core_->client_closed.fetch_add(1);
      }
      current_.reset();
    }
    queue_.clear();
  }

  void SendContinue() {
    static const std::string kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
    writing_ = true;
    ArmTimer(&write_timer_, &write_gen_, Clock::now() + Io(),
             [](Session* s) { s->Close(); });
    asio::async_write(
        stream_, asio::buffer(kContinue),
        [self = this->shared_from_this()](const error_code& ec, size_t) {
          self->write_gen_++;
          self->write_timer_.cancel();
          self->writing_ = false;
          if (ec) return self->Close();
          self->Pump();
        });
  }

  struct Outgoing {
    bhttp::response<bhttp::string_body> message;
    std::optional<bhttp::response_serializer<bhttp::string_body>> serializer;
    bool keep_alive = true;
  };

  void Send(Response response, const Pending& info) {
    if (closing_) return;
    auto out = std::make_shared<Outgoing>();
    auto& m = out->message;
    m.version(info.request.version == 10 ? 10 : 11);
    m.result(static_cast<unsigned>(response.status));
    if (response.status == 499) m.reason("Client Closed Request");
    for (const Header& h : response.headers) {
      if (Sendable(h.name) && Sendable(h.value) && !h.name.empty()) {
        m.insert(h.name, h.value);
      }
    }
    const bool compressible = Compressible(response.content_type);
    if (compressible) m.set(bhttp::field::vary, "Accept-Encoding");
    if (!response.body.empty() || info.head) {
      if (Sendable(response.content_type)) {
        m.set(bhttp::field::content_type, response.content_type);
      }
      if (info.gzip && compressible && !response.body.empty()) {
        response.body = Gzip(response.body);
        m.set(bhttp::field::content_encoding, "gzip");
      }
    }
    // Every way reading ends (Connection: close, a framing error, a read
    // timeout) queues a last answer with keep_alive false.
    out->keep_alive = info.keep_alive && !response.close;
    m.keep_alive(out->keep_alive);
    m.body() = std::move(response.body);
    m.prepare_payload();
    if (info.head) m.body().clear();  // Content-Length stays the GET's
    out->serializer.emplace(m);
    out_ = std::move(out);
    writing_ = true;
    WriteSome();
  }

  // Writes the answer in steps, each bounded by io_timeout: a client that
  // stops reading loses the connection, one that reads slowly does not.
  void WriteSome() {
    ArmTimer(&write_timer_, &write_gen_, Clock::now() + Io(),
             [](Session* s) { s->Close(); });
    bhttp::async_write_some(
        stream_, *out_->serializer,
        [self = this->shared_from_this()](const error_code& ec, size_t) {
          if (ec || self->closing_) return self->Close();
          if (!self->out_->serializer->is_done()) return self->WriteSome();
          self->OnWritten();
        });
  }

  void OnWritten() {
    write_gen_++;
    write_timer_.cancel();
    writing_ = false;
    const bool keep_alive = out_->keep_alive;
    out_.reset();
    if (!keep_alive) return CloseGracefully();
    idle_since_ = Clock::now();
    Pump();
  }

  // After a last answer: stop sending, then read and drop what the client
  // still sends for a while, so that it reads the answer rather than a
  // reset. TLS connections just close.
  void CloseGracefully() {
    CancelAll(Exchange::CancelReason::kClientClosed);
    if constexpr (kTls) {
      return Close();
    } else {
      error_code ignored;
      Lowest().shutdown(tcp::socket::shutdown_send, ignored);
      lingering_ = true;
      linger_bytes_ = 0;
      read_gen_++;
      ArmTimer(&read_timer_, &read_gen_, Clock::now() + kLingerTime,
               [](Session* s) { s->Close(); });
      if (!reading_) {
        buffer_.consume(buffer_.size());
        reading_ = true;
        stream_.async_read_some(
            buffer_.prepare(16 << 10),
            [self = this->shared_from_this()](const error_code& e, size_t n) {
              self->reading_ = false;
              if (!self->closing_) self->Linger(e, n);
            });
      }
    }
  }

  void Linger(const error_code& ec, size_t n) {
    linger_bytes_ += n;
    if (ec || linger_bytes_ > kLingerBytes) return Close();
    buffer_.consume(buffer_.size());
    reading_ = true;
    stream_.async_read_some(
        buffer_.prepare(16 << 10),
        [self = this->shared_from_this()](const error_code& e, size_t m) {
          self->reading_ = false;
          if (!self->closing_) self->Linger(e, m);
        });
  }

  // The read deadline for the state we are in: none while the client
  // waits for us; keep-alive while idle; io_timeout for a request begun.
  void UpdateReadDeadline() {
    if (closing_ || lingering_) return;
    if (read_closed_ || Busy()) {
      read_gen_++;
      read_timer_.cancel();
      read_timer_armed_ = false;
      request_start_.reset();
      return;
    }
    Clock::time_point when;
    if (Partial()) {
      if (!request_start_) request_start_ = Clock::now();
      when = *request_start_ + Io();
    } else {
      when = idle_since_ + ToChrono(core_->options.keep_alive_timeout);
    }
    if (read_deadline_ == when && read_timer_armed_) return;
    read_deadline_ = when;
    read_timer_armed_ = true;
    ArmTimer(&read_timer_, &read_gen_, when,
             [](Session* s) { s->ReadTimedOut(); });
  }

  void ReadTimedOut() {
    read_timer_armed_ = false;
    if (!Partial()) return Close();  // idle past keep-alive
    parser_.reset();
    FailWith(408, "the request did not arrive in time");
    error_code ignored;
    Lowest().cancel(ignored);  // the pending read ends; the 408 goes out
    Pump();
  }

  // With reading stopped after a last request (Connection: close), a
  // client that leaves is seen by waiting for the socket to turn readable
  // and finding it at its end.
  void WatchForClose() {
    if (!read_closed_ || watching_ || closing_ || lingering_ || reading_ ||
        current_ == nullptr) {
      return;
    }
    watching_ = true;
    Lowest().async_wait(
        tcp::socket::wait_read,
        [self = this->shared_from_this()](const error_code& ec) {
          self->watching_ = false;
          if (ec || self->closing_ || self->lingering_) return;
          char byte;
          const ssize_t n = ::recv(self->Lowest().native_handle(), &byte, 1,
                                   MSG_PEEK | MSG_DONTWAIT);
          if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) {
            self->CancelAll(Exchange::CancelReason::kClientClosed);
            return self->Close();
          }
          // Bytes after a last request: nothing more to learn here.
        });
  }

  void Close() {
    if (closing_) return;
    closing_ = true;
    read_gen_++;
    write_gen_++;
    request_gen_++;
    error_code ignored;
    read_timer_.cancel();
    write_timer_.cancel();
    request_timer_.cancel();
    Lowest().close(ignored);
  }

  Core* const core_;
  Stream stream_;
  beast::flat_buffer buffer_;
  std::optional<bhttp::request_parser<RequestBody>> parser_;
  bool header_seen_ = false;
  std::deque<Pending> queue_;
  std::shared_ptr<Exchange> current_;
  Pending current_info_;
  std::shared_ptr<Outgoing> out_;

  asio::steady_timer read_timer_;
  asio::steady_timer write_timer_;
  asio::steady_timer request_timer_;
  uint64_t read_gen_ = 0;
  uint64_t write_gen_ = 0;
  uint64_t request_gen_ = 0;
  Clock::time_point read_deadline_{};
  bool read_timer_armed_ = false;
  Clock::time_point idle_since_ = Clock::now();
  std::optional<Clock::time_point> request_start_;

  bool reading_ = false;
  bool writing_ = false;
  bool read_closed_ = false;
  bool watching_ = false;
  bool lingering_ = false;
  size_t linger_bytes_ = 0;
  bool closing_ = false;

  std::string remote_address_;
  int remote_port_ = 0;
};

template <class Stream, class... Args>
void Launch(Core* core, Args&&... args) {
  auto session =
      std::make_shared<Session<Stream>>(core, std::forward<Args>(args)...);
  {
    absl::MutexLock lock(&core->sessions_mu);
    auto& all = core->sessions;
    // Forget sessions that have ended before remembering one more.
    all.erase(std::remove_if(all.begin(), all.end(),
                             [](const std::weak_ptr<SessionBase>& s) {
                               return s.expired();
                             }),
              all.end());
    all.push_back(session);
  }
  session->Start();
}

}  // namespace

void StartSession(Core* core, asio::ip::tcp::socket socket) {
  core->open_connections.fetch_add(1);
  core->accepted_connections.fetch_add(1);
  error_code ignored;
  socket.set_option(tcp::no_delay(true), ignored);
  if (core->tls) {
    Launch<asio::ssl::stream<tcp::socket>>(core, std::move(socket), *core->tls);
  } else {
    Launch<tcp::socket>(core, std::move(socket));
  }
}

}  // namespace encoder::http::detail
