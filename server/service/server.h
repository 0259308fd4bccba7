// The gRPC server: EncoderService, grpc.health.v1 and reflection on one
// port, with message size limits. Owns the service; not the models.
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
  std::string listen = "127.0.0.1:50051";  // port 0: pick a free port
  int64_t max_receive_message_bytes = kDefaultMaxReceiveMessageBytes;
  int64_t max_send_message_bytes = core::kDefaultMaxSendMessageBytes;
  int64_t max_inputs_per_request = core::kDefaultMaxInputsPerRequest;
  // Windows one chunked input may become (EmbedRequest.long_input).
  int64_t max_chunks_per_input = 64;
  // What inputs past a model's length get when a request names no policy
  // and the model's repository entry none either (core::DefaultLongInput).
  std::string long_input = "truncate";
  // gRPC's resource quota: memory for every connection's buffers.
  int64_t memory_quota_bytes = int64_t{1} << 30;
  // HTTP/2 streams (calls, health Watch streams included) in flight per
  // connection; further calls wait in the client.
  int max_concurrent_streams = 1024;
  // grpc.health.v1 Watch calls open at once, every port and connection
  // together; more are refused with RESOURCE_EXHAUSTED (0: no limit).
  int64_t max_health_watchers = 4096;
  // Responses produced and not yet read by their clients.
  UnreadLimits unread;
  DiagnoseLimits diagnose;
  // Null: plaintext (see tls_credentials.h).
  std::shared_ptr<grpc::ServerCredentials> credentials;
  // Null: no authentication. Must outlive the server.
  const auth::TokenAuthenticator* tokens = nullptr;
  bool auth_health = false;  // grpc.health.v1 needs a token too
  bool reflection = true;    // grpc.reflection.v1alpha on the port
  // HOST:PORT of a second, plaintext port that serves grpc.health.v1 only
  // (for probes that cannot speak TLS, such as the kubelet's); empty: none.
  std::string health_listen;
};

class EncoderServer {
 public:
  // Binds and starts serving; health is NOT_SERVING and calls are
  // UNAVAILABLE until SetModels.
  static absl::StatusOr<std::unique_ptr<EncoderServer>> Start(
      const ServerOptions& options, metrics::Metrics* metrics);
  ~EncoderServer();

  int port() const { return port_; }
  // The core behind the port, for other fronts (the HTTP front).
  core::Inference* core() const { return core_.get(); }
  // The bearer-token check the port applies.
  const EdgeAuth& edge_auth() const { return edge_auth_; }
  // The health-only port (0 without ServerOptions::health_listen).
  int health_port() const { return health_port_; }

  // Makes the models callable and health SERVING. `host` must outlive the
  // server.
  void SetModels(runner::ModelCatalog* host);

  // For good: health NOT_SERVING (on every port) and the HTTP probes 503,
  // while calls on open connections go on, so that an orchestrator
  // restarts the process (a listener stopped accepting). Thread-safe.
  void MarkUnhealthy(const std::string& reason);

  // The drain sequence: health NOT_SERVING, new calls UNAVAILABLE, wait for
  // accepted work up to `grace` and, counted from the start, at least
  // `unready` (bounded by `grace`), then shut down the transport (calls
  // still running at the deadline are cancelled). Returns whether every
  // accepted call completed in time.
  bool Drain(absl::Duration grace,
             absl::Duration unready = absl::ZeroDuration());

 private:
  EncoderServer() = default;
  void SetHealth(bool serving);

  std::unique_ptr<core::Inference> core_;
  std::unique_ptr<EncoderServiceImpl> service_;
  EdgeAuth edge_auth_;
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
  runner::ModelCatalog* host_ = nullptr;
  std::atomic<bool> unhealthy_{false};
  int port_ = 0;
};

}  // namespace encoder::service

#endif  // ENCODER_SERVER_SERVICE_SERVER_H_
