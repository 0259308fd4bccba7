// The gRPC front: EncoderService, grpc.health.v1 and reflection on one
// port, with message size limits. Owns the service and the port's health;
// not the core, the bearer tokens or the models (the composition root,
// server/app, builds those and hands them to every front).
#ifndef ENCODER_SERVER_SERVICE_SERVER_H_
#define ENCODER_SERVER_SERVICE_SERVER_H_

#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server.h>

#include <atomic>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/auth/token_auth.h"
#include "server/service/auth_interceptor.h"
#include "server/service/encoder_service.h"
#include "server/service/health_service.h"

namespace encoder::service {

// The default of --max-receive-message-bytes.
inline constexpr int64_t kDefaultMaxReceiveMessageBytes = int64_t{16} << 20;

struct ServerOptions {
  // Port 0: pick a free port. The app starts no gRPC front for "off".
  std::string listen = "127.0.0.1:50051";
  int64_t max_receive_message_bytes = kDefaultMaxReceiveMessageBytes;
  // The transport's bound on one response; the app sets it to the core's
  // ServiceLimits::max_send_message_bytes.
  int64_t max_send_message_bytes = core::kDefaultMaxSendMessageBytes;
  // gRPC's resource quota: memory for every connection's buffers.
  int64_t memory_quota_bytes = int64_t{1} << 30;
  // HTTP/2 streams (calls, health Watch streams included) in flight per
  // connection; further calls wait in the client.
  int max_concurrent_streams = 1024;
  // grpc.health.v1 Watch calls open at once, every port and connection
  // together; more are refused with RESOURCE_EXHAUSTED (0: no limit).
  int64_t max_health_watchers = 4096;
  // Null: plaintext (see tls_credentials.h).
  std::shared_ptr<grpc::ServerCredentials> credentials;
  bool reflection = true;  // grpc.reflection.v1alpha on the port
  // HOST:PORT of a second, plaintext port that serves grpc.health.v1 only
  // (for probes that cannot speak TLS, such as the kubelet's); empty: none.
  std::string health_listen;
};

class EncoderServer {
 public:
  // Binds and starts serving calls into `core` (calls are UNAVAILABLE
  // until the core has its models); health is NOT_SERVING until
  // SetServing(true). `core` and `auth` (the bearer tokens, checked when
  // auth.tokens is set) must outlive the server.
  static absl::StatusOr<std::unique_ptr<EncoderServer>> Start(
      const ServerOptions& options, core::Inference* core,
      const EdgeAuth& auth);
  ~EncoderServer();

  int port() const { return port_; }
  // The health-only port (0 without ServerOptions::health_listen).
  int health_port() const { return health_port_; }

  // grpc.health.v1 SERVING or NOT_SERVING on every port; SERVING is
  // ignored once MarkUnhealthy has run. Thread-safe.
  void SetServing(bool serving);

  // For good: health NOT_SERVING on every port, while calls on open
  // connections go on, so that an orchestrator restarts the process (a
  // listener stopped accepting). Thread-safe.
  void MarkUnhealthy();

  // The end of a drain (server/app/drain.h): ends every health Watch call
  // with NOT_SERVING, then shuts the transport down, letting calls still
  // running finish until `deadline` and cancelling the rest.
  void Shutdown(absl::Time deadline);

 private:
  EncoderServer() = default;

  std::unique_ptr<EncoderServiceImpl> service_;
  // grpc.health.v1 on the main port (closed with auth_health) and on the
  // health port (always open), over one state.
  HealthState health_state_;
  std::unique_ptr<HealthService> health_;
  std::unique_ptr<HealthService> health_port_service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<grpc::Server> health_server_;
  // Answers UNIMPLEMENTED for everything but health on the health port (a
  // gRPC server needs one callback service to start).
  grpc::CallbackGenericService health_port_fallback_;
  int health_port_ = 0;
  std::atomic<bool> unhealthy_{false};
  int port_ = 0;
};

}  // namespace encoder::service

#endif  // ENCODER_SERVER_SERVICE_SERVER_H_
