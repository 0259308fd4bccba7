// Notices a listening port that has stopped accepting connections.
//
// gRPC 1.51 stops polling a listener for good after one accept fails for
// lack of file descriptors. accept_reserve.h keeps that from happening;
// this is the check that it did not: after the process has run out of
// descriptors (AcceptExhaustionEvents moves), each watched listener is
// probed every `interval` with a loopback connection, which an alive
// listener's owner accepts (AcceptCallsOn moves) within `patience`. A
// listener that fails `failures` probes in a row is dead: `on_dead` runs
// once for it (the server then turns NOT_SERVING so that an orchestrator
// restarts it) and the watch reports it. Probing stops once every listener
// has answered a probe after the last exhaustion; in normal operation no
// probe is made.
#ifndef ENCODER_SERVER_APP_LISTENER_WATCH_H_
#define ENCODER_SERVER_APP_LISTENER_WATCH_H_

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/time.h"

namespace encoder {

struct ListenerWatchOptions {
  absl::Duration interval = absl::Seconds(2);
  absl::Duration patience = absl::Seconds(2);
  int failures = 2;
};

class ListenerWatch {
 public:
  struct Listener {
    std::string name;  // "grpc", "http", "health"
    int port = 0;
  };
  struct State {
    std::string name;
    int port = 0;
    bool up = true;
  };

  // Finds the listening sockets of `listeners` (by port) and starts the
  // watch thread. A port with no listening socket found is not watched
  // (logged).
  ListenerWatch(std::vector<Listener> listeners, ListenerWatchOptions options,
                std::function<void(const std::string& name)> on_dead);
  ~ListenerWatch();

  ListenerWatch(const ListenerWatch&) = delete;
  ListenerWatch& operator=(const ListenerWatch&) = delete;

  // Every watched listener and whether it is up. Thread-safe.
  std::vector<State> states() const;

 private:
  struct Watched {
    std::string name;
    int port = 0;
    int fd = -1;
    bool up = true;
    int failed = 0;
  };

  void Run();
  // 1: the listener took a loopback connection within the patience; 0: it
  // did not (or refused it); -1: no probe could be made (no descriptor
  // left, or stopping).
  int Probe(const Watched& w);

  const ListenerWatchOptions options_;
  const std::function<void(const std::string&)> on_dead_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::vector<Watched> watched_;  // guarded by mu_ (up, failed)
  std::thread thread_;
};

}  // namespace encoder

#endif  // ENCODER_SERVER_APP_LISTENER_WATCH_H_
