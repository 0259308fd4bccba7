// grpc.health.v1 served by the project rather than by gRPC's default health
// service, so that a closed health service (--auth-health) refuses Watch
// at once: gRPC's own Watch would stay open and stream emptied messages,
// because an interceptor cannot end a call. One HealthState is shared by
// every port that serves health (the main port and the plaintext health
// port); each port registers its own HealthService over it.
#ifndef ENCODER_SERVER_SERVICE_HEALTH_SERVICE_H_
#define ENCODER_SERVER_SERVICE_HEALTH_SERVICE_H_

#include <map>
#include <set>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "server/service/auth_interceptor.h"

namespace encoder::service {

class HealthState {
 public:
  using Status = grpc::health::v1::HealthCheckResponse::ServingStatus;

  // Told of changes without HealthState's lock held; a watcher reads the
  // status itself (Get), so it always sends the latest one.
  class Watcher {
   public:
    virtual void Ref() = 0;    // taken under HealthState's lock
    virtual void Unref() = 0;  // may delete the watcher
    virtual void Notify() = 0;
    // The server is going away: finish the call after the last status.
    virtual void Close() = 0;

   protected:
    ~Watcher() = default;
  };

  // `service` "" is the whole server.
  void Set(const std::string& service, bool serving) ABSL_LOCKS_EXCLUDED(mu_);
  // The status of `service`; SERVICE_UNKNOWN for a name never set.
  Status Get(const std::string& service) const ABSL_LOCKS_EXCLUDED(mu_);
  enum class Added { kYes, kShutDown, kFull };
  // Adds `w`: kShutDown after Shutdown, kFull when max_watchers are
  // watching (not added either way).
  Added AddWatcher(const std::string& service, Watcher* w)
      ABSL_LOCKS_EXCLUDED(mu_);
  void RemoveWatcher(const std::string& service, Watcher* w)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Every service NOT_SERVING, every watcher told and closed; later Sets
  // are ignored.
  void Shutdown() ABSL_LOCKS_EXCLUDED(mu_);

  // Watch calls open at once, across services and connections (0: no
  // limit; --max-health-watchers). Set before serving.
  void set_max_watchers(int64_t n) { max_watchers_ = n; }
  int64_t max_watchers() const { return max_watchers_; }

 private:
  int64_t max_watchers_ = 0;
  int64_t watcher_count_ ABSL_GUARDED_BY(mu_) = 0;
  mutable absl::Mutex mu_;
  std::map<std::string, Status> status_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::set<Watcher*>> watchers_ ABSL_GUARDED_BY(mu_);
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
};

class HealthService : public grpc::health::v1::Health::CallbackService {
 public:
  // `auth` null or without protect_health: open to every caller. Both must
  // outlive the service.
  HealthService(HealthState* state, const EdgeAuth* auth)
      : state_(state), auth_(auth) {}

  grpc::ServerUnaryReactor* Check(
      grpc::CallbackServerContext* context,
      const grpc::health::v1::HealthCheckRequest* request,
      grpc::health::v1::HealthCheckResponse* response) override;
  grpc::ServerWriteReactor<grpc::health::v1::HealthCheckResponse>* Watch(
      grpc::CallbackServerContext* context,
      const grpc::health::v1::HealthCheckRequest* request) override;

 private:
  grpc::Status Admit(grpc::CallbackServerContext* context) const;

  HealthState* state_;
  const EdgeAuth* auth_;
};

}  // namespace encoder::service

#endif  // ENCODER_SERVER_SERVICE_HEALTH_SERVICE_H_
