// The HTTP endpoint Prometheus scrapes: GET /metrics answered with the
// text exposition format.
//
// Why not prometheus::Exposer: it serves through civetweb, whose Debian
// build starts its threads with a fixed 100 KiB stack. glibc places a
// process's static TLS on every thread's stack, and a server that loads
// LibTorch (OpenBLAS, glog) has more than 100 KiB of it, so civetweb's
// pthread_create fails with EINVAL. This server runs one std::thread with
// the default stack.
#ifndef ENCODER_SERVER_METRICS_METRICS_HTTP_SERVER_H_
#define ENCODER_SERVER_METRICS_METRICS_HTTP_SERVER_H_

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"

namespace encoder::metrics {

// Serves one connection at a time on one thread: scrapes are rare and
// cheap. Each connection gets one response and is closed; a client that
// sends nothing for kIoTimeoutSeconds is dropped, so a stalled client
// delays other scrapes by at most that long.
class MetricsHttpServer {
 public:
  // Returns the body of GET /metrics. Called on the server thread; must be
  // thread-safe with respect to the rest of the program.
  using Render = std::function<std::string()>;

  static constexpr int kIoTimeoutSeconds = 5;

  // Binds HOST:PORT ("0.0.0.0:9090", "127.0.0.1:0", "[::]:9090", ":9090"
  // for every interface; port 0 picks a free port) and starts serving.
  // InvalidArgument for a malformed address, Unavailable when it cannot be
  // bound.
  static absl::StatusOr<std::unique_ptr<MetricsHttpServer>> Start(
      const std::string& listen_address, Render render);

  // Stops accepting, finishes the connection in progress and joins.
  ~MetricsHttpServer();

  MetricsHttpServer(const MetricsHttpServer&) = delete;
  MetricsHttpServer& operator=(const MetricsHttpServer&) = delete;

  // The bound TCP port.
  int port() const { return port_; }

 private:
  MetricsHttpServer(int listen_fd, int wake_read_fd, int wake_write_fd,
                    int port, Render render);

  void Serve();
  void HandleConnection(int fd) const;

  const int listen_fd_;
  // A pipe: the destructor writes to it to wake the poll in Serve.
  const int wake_read_fd_;
  const int wake_write_fd_;
  const int port_;
  const Render render_;
  std::thread thread_;
};

}  // namespace encoder::metrics

#endif  // ENCODER_SERVER_METRICS_METRICS_HTTP_SERVER_H_
