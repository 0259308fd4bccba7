#include "server/app/listener_watch.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <utility>

#include "server/app/accept_reserve.h"
#include "server/common/thread_name.h"

namespace encoder {
namespace {

constexpr int kMaxFd = 4096;  // accept calls are counted below this

// The port a socket is bound to, or -1 when it is not a listening TCP
// socket.
int ListeningPort(int fd) {
  int accepting = 0;
  socklen_t len = sizeof(accepting);
  if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &accepting, &len) != 0 ||
      !accepting) {
    return -1;
  }
  sockaddr_storage addr{};
  len = sizeof(addr);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return -1;
  if (addr.ss_family == AF_INET) {
    return ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
  }
  if (addr.ss_family == AF_INET6) {
    return ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port);
  }
  return -1;
}

// The address to reach listener `fd` at: its own, loopback for a wildcard.
bool ProbeAddress(int fd, sockaddr_storage* addr, socklen_t* len) {
  *len = sizeof(*addr);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(addr), len) != 0) {
    return false;
  }
  if (addr->ss_family == AF_INET) {
    auto* in = reinterpret_cast<sockaddr_in*>(addr);
    if (in->sin_addr.s_addr == htonl(INADDR_ANY)) {
      in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    }
    return true;
  }
  if (addr->ss_family == AF_INET6) {
    auto* in6 = reinterpret_cast<sockaddr_in6*>(addr);
    if (std::memcmp(&in6->sin6_addr, &in6addr_any, sizeof(in6addr_any)) == 0) {
      in6->sin6_addr = in6addr_loopback;
    }
    return true;
  }
  return false;
}

}  // namespace

ListenerWatch::ListenerWatch(std::vector<Listener> listeners,
                             ListenerWatchOptions options,
                             std::function<void(const std::string&)> on_dead)
    : options_(options), on_dead_(std::move(on_dead)) {
  for (const Listener& l : listeners) {
    if (l.port <= 0) continue;
    bool found = false;
    for (int fd = 0; fd < kMaxFd; ++fd) {
      if (ListeningPort(fd) != l.port) continue;
      watched_.push_back({l.name, l.port, fd});
      found = true;
    }
    if (!found) {
      spdlog::warn("listener watch: no listening socket found for {} port {}",
                   l.name, l.port);
    }
  }
  thread_ = std::thread([this] {
    NameThisThread("listener-watch");
    Run();
  });
}

ListenerWatch::~ListenerWatch() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

std::vector<ListenerWatch::State> ListenerWatch::states() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<State> out;
  for (const Watched& w : watched_) {
    bool merged = false;
    for (State& s : out) {  // a port with several sockets: up if all are
      if (s.name == w.name && s.port == w.port) {
        s.up = s.up && w.up;
        merged = true;
      }
    }
    if (!merged) out.push_back({w.name, w.port, w.up});
  }
  return out;
}

int ListenerWatch::Probe(const Watched& w) {
  sockaddr_storage addr{};
  socklen_t len = 0;
  if (!ProbeAddress(w.fd, &addr, &len)) return -1;
  const int s =
      socket(addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (s < 0) return -1;  // out of descriptors ourselves: try later
  const uint64_t before = AcceptCallsOn(w.fd);
  const auto give_up = std::chrono::steady_clock::now() +
                       absl::ToChronoNanoseconds(options_.patience);
  int result = 0;
  if (connect(s, reinterpret_cast<sockaddr*>(&addr), len) != 0 &&
      errno != EINPROGRESS) {
    result = errno == ECONNREFUSED ? 0 : -1;
    close(s);
    return result;
  }
  while (std::chrono::steady_clock::now() < give_up) {
    if (AcceptCallsOn(w.fd) != before) {
      result = 1;
      break;
    }
    std::unique_lock<std::mutex> lock(mu_);
    if (cv_.wait_for(lock, std::chrono::milliseconds(10),
                     [this] { return stop_; })) {
      result = -1;
      break;
    }
  }
  close(s);
  return result;
}

void ListenerWatch::Run() {
  int64_t seen_exhaustion = AcceptExhaustionEvents();
  bool probing = false;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      const auto wait = probing
                            ? absl::ToChronoNanoseconds(options_.interval)
                            : std::chrono::nanoseconds(std::chrono::seconds(1));
      if (cv_.wait_for(lock, wait, [this] { return stop_; })) return;
    }
    const int64_t exhaustion = AcceptExhaustionEvents();
    if (exhaustion != seen_exhaustion) {
      seen_exhaustion = exhaustion;
      probing = true;
    }
    if (!probing) continue;
    bool all_answered = true;
    for (size_t i = 0; i < watched_.size(); ++i) {
      Watched copy;
      {
        std::lock_guard<std::mutex> lock(mu_);
        copy = watched_[i];
      }
      if (!copy.up) continue;  // dead stays dead
      const int answered = Probe(copy);
      if (answered < 0) {
        all_answered = false;
        continue;
      }
      bool died = false;
      {
        std::lock_guard<std::mutex> lock(mu_);
        Watched& w = watched_[i];
        w.failed = answered ? 0 : w.failed + 1;
        if (w.failed >= options_.failures) {
          w.up = false;
          died = true;
        }
      }
      if (!answered) all_answered = false;
      if (died) {
        spdlog::error(
            "the {} port {} stopped accepting connections after the process "
            "ran out of file descriptors; health is NOT_SERVING so that the "
            "server is restarted",
            copy.name, copy.port);
        if (on_dead_) on_dead_(copy.name);
      }
    }
    if (all_answered) probing = false;
  }
}

}  // namespace encoder
