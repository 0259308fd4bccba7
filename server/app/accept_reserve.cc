#include "server/app/accept_reserve.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <string>

namespace encoder {
namespace {

using Accept4Fn = int (*)(int, sockaddr*, socklen_t*, int);

std::mutex reserve_mu;
int reserve_fd = -1;  // guarded by reserve_mu
std::atomic<int64_t> shed{0};
std::atomic<int64_t> exhausted{0};
constexpr int kCountedFds = 4096;
std::atomic<uint64_t> accept_calls[kCountedFds];

bool ReserveOn() {
  static const bool on = [] {
    const char* v = std::getenv("ENCODER_ACCEPT_RESERVE");
    return v == nullptr || std::string(v) != "off";
  }();
  return on;
}

Accept4Fn RealAccept4() {
  static const Accept4Fn real =
      reinterpret_cast<Accept4Fn>(dlsym(RTLD_NEXT, "accept4"));
  return real;
}

bool OutOfDescriptors(int err) { return err == EMFILE || err == ENFILE; }

// Out of descriptors: frees the reserve, accepts and closes every waiting
// connection on `listener`, and takes the reserve back.
void ShedWaitingConnections(int listener) {
  std::lock_guard<std::mutex> lock(reserve_mu);
  if (reserve_fd < 0) return;  // lost to another thread; nothing to free
  close(reserve_fd);
  reserve_fd = -1;
  for (;;) {
    const int c =
        RealAccept4()(listener, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (c < 0) break;  // EAGAIN (queue empty), or out of descriptors again
    close(c);
    shed.fetch_add(1, std::memory_order_relaxed);
  }
  reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  // One line per 10 s at most: a flood must not flood the log too.
  static std::chrono::steady_clock::time_point last_log;
  const auto now = std::chrono::steady_clock::now();
  if (now - last_log >= std::chrono::seconds(10)) {
    last_log = now;
    spdlog::warn(
        "out of file descriptors: closed incoming connections unaccepted "
        "({} since start); raise the open-file limit",
        shed.load(std::memory_order_relaxed));
  }
}

int AcceptOrShed(int listener, sockaddr* address, socklen_t* length,
                 int flags) {
  const Accept4Fn real = RealAccept4();
  if (real == nullptr) {
    errno = ENOSYS;
    return -1;
  }
  if (listener >= 0 && listener < kCountedFds) {
    accept_calls[listener].fetch_add(1, std::memory_order_relaxed);
  }
  const int fd = real(listener, address, length, flags);
  if (fd >= 0 || !OutOfDescriptors(errno)) return fd;
  exhausted.fetch_add(1, std::memory_order_relaxed);
  if (!ReserveOn()) return fd;
  ShedWaitingConnections(listener);
  errno = EAGAIN;
  return -1;
}

}  // namespace

bool OpenAcceptReserve() {
  std::lock_guard<std::mutex> lock(reserve_mu);
  if (reserve_fd < 0) reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  return reserve_fd >= 0;
}

int64_t ConnectionsShedForDescriptors() {
  return shed.load(std::memory_order_relaxed);
}

int64_t AcceptExhaustionEvents() {
  return exhausted.load(std::memory_order_relaxed);
}

uint64_t AcceptCallsOn(int listener_fd) {
  if (listener_fd < 0 || listener_fd >= kCountedFds) return 0;
  return accept_calls[listener_fd].load(std::memory_order_relaxed);
}

}  // namespace encoder

// The C library's entry points, as gRPC and cpp-httplib call them.
extern "C" int accept4(int fd, sockaddr* address, socklen_t* length,
                       int flags) {
  return encoder::AcceptOrShed(fd, address, length, flags);
}

extern "C" int accept(int fd, sockaddr* address, socklen_t* length) {
  return encoder::AcceptOrShed(fd, address, length, 0);
}
