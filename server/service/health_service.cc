#include "server/service/health_service.h"

#include <atomic>
#include <utility>
#include <vector>

namespace encoder::service {

using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;

void HealthState::Set(const std::string& service, bool serving) {
  const Status status =
      serving ? HealthCheckResponse::SERVING : HealthCheckResponse::NOT_SERVING;
  std::vector<Watcher*> told;
  {
    absl::MutexLock lock(&mu_);
    if (shut_down_) return;
    auto [it, inserted] = status_.try_emplace(service, status);
    if (!inserted) {
      if (it->second == status) return;
      it->second = status;
    }
    auto w = watchers_.find(service);
    if (w == watchers_.end()) return;
    for (Watcher* watcher : w->second) {
      watcher->Ref();
      told.push_back(watcher);
    }
  }
  for (Watcher* watcher : told) {
    watcher->Notify();
    watcher->Unref();
  }
}

HealthState::Status HealthState::Get(const std::string& service) const {
  absl::MutexLock lock(&mu_);
  auto it = status_.find(service);
  return it == status_.end() ? HealthCheckResponse::SERVICE_UNKNOWN
                             : it->second;
}

HealthState::Added HealthState::AddWatcher(const std::string& service,
                                           Watcher* w) {
  absl::MutexLock lock(&mu_);
  if (shut_down_) return Added::kShutDown;
  if (max_watchers_ > 0 && watcher_count_ >= max_watchers_) {
    return Added::kFull;
  }
  if (watchers_[service].insert(w).second) ++watcher_count_;
  return Added::kYes;
}

void HealthState::RemoveWatcher(const std::string& service, Watcher* w) {
  absl::MutexLock lock(&mu_);
  auto it = watchers_.find(service);
  if (it == watchers_.end()) return;
  watcher_count_ -= static_cast<int64_t>(it->second.erase(w));
  if (it->second.empty()) watchers_.erase(it);
}

void HealthState::Shutdown() {
  std::vector<Watcher*> told;
  {
    absl::MutexLock lock(&mu_);
    if (shut_down_) return;
    shut_down_ = true;
    for (auto& [service, status] : status_) {
      status = HealthCheckResponse::NOT_SERVING;
    }
    for (auto& [service, watchers] : watchers_) {
      for (Watcher* w : watchers) {
        w->Ref();
        told.push_back(w);
      }
    }
  }
  for (Watcher* w : told) {
    w->Close();
    w->Unref();
  }
}

grpc::Status HealthService::Admit(grpc::CallbackServerContext* context) const {
  if (auth_ == nullptr || !auth_->protect_health) return grpc::Status::OK;
  return CheckCallToken(*auth_, context->client_metadata());
}

grpc::ServerUnaryReactor* HealthService::Check(
    grpc::CallbackServerContext* context, const HealthCheckRequest* request,
    HealthCheckResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (grpc::Status refused = Admit(context); !refused.ok()) {
    reactor->Finish(refused);
    return reactor;
  }
  const HealthState::Status status = state_->Get(request->service());
  if (status == HealthCheckResponse::SERVICE_UNKNOWN) {
    reactor->Finish(
        grpc::Status(grpc::StatusCode::NOT_FOUND,
                     "unknown service \"" + request->service() + "\""));
    return reactor;
  }
  response->set_status(status);
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

namespace {

// One Watch call: the current status first, then each change, one write in
// flight at a time (changes during a write collapse into the latest). Ends
// on cancellation or when the state shuts down. Reactor methods are never
// called with mu_ held, since gRPC may run a reaction inline.
class WatchReactor : public grpc::ServerWriteReactor<HealthCheckResponse>,
                     public HealthState::Watcher {
 public:
  WatchReactor(HealthState* state, std::string service)
      : state_(state), service_(std::move(service)) {}

  // Called from the handler, before gRPC runs any reaction.
  void Start(const grpc::Status& refused) {
    if (!refused.ok()) {
      {
        absl::MutexLock lock(&mu_);
        finished_ = true;
      }
      Finish(refused);
      return;
    }
    const HealthState::Added added = state_->AddWatcher(service_, this);
    registered_ = added == HealthState::Added::kYes;
    if (added == HealthState::Added::kFull) {
      {
        absl::MutexLock lock(&mu_);
        finished_ = true;
      }
      Finish(grpc::Status(
          grpc::StatusCode::RESOURCE_EXHAUSTED,
          "the server has " + std::to_string(state_->max_watchers()) +
              " health Watch calls open already (--max-health-watchers); "
              "close one or use Check"));
      return;
    }
    {
      absl::MutexLock lock(&mu_);
      closing_ = !registered_;
    }
    Notify();
  }

  // Atomic rather than under mu_: Ref runs under HealthState's lock, which
  // Act takes (Get) with mu_ held.
  void Ref() override { refs_.fetch_add(1, std::memory_order_relaxed); }
  void Unref() override {
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }

  void Notify() override {
    Act([this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { dirty_ = true; });
  }
  void Close() override {
    Act([this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      dirty_ = true;
      closing_ = true;
    });
  }
  void OnWriteDone(bool ok) override {
    Act([this, ok]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      writing_ = false;
      if (!ok) end_ = grpc::Status(grpc::StatusCode::CANCELLED, "cancelled");
    });
  }
  void OnCancel() override {
    Act([this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      end_ = grpc::Status(grpc::StatusCode::CANCELLED, "cancelled");
    });
  }
  void OnDone() override {
    if (registered_) state_->RemoveWatcher(service_, this);
    Unref();
  }

 private:
  enum class Next { kNothing, kWrite, kFinish };

  // Applies `change` under mu_, then starts the write or the finish it
  // calls for, outside mu_.
  template <typename F>
  void Act(F change) {
    Next next = Next::kNothing;
    grpc::Status end;
    {
      absl::MutexLock lock(&mu_);
      change();
      if (finished_ || writing_) return;
      if (!end_.ok()) {
        finished_ = true;
        next = Next::kFinish;
        end = end_;
      } else if (dirty_) {
        dirty_ = false;
        const HealthState::Status status = state_->Get(service_);
        if (!sent_any_ || status != last_sent_) {
          sent_any_ = true;
          last_sent_ = status;
          response_.set_status(status);
          writing_ = true;
          next = Next::kWrite;
        }
      }
      if (next == Next::kNothing && closing_) {
        finished_ = true;
        next = Next::kFinish;
      }
    }
    if (next == Next::kWrite) StartWrite(&response_);
    if (next == Next::kFinish) Finish(end);
  }

  HealthState* const state_;
  const std::string service_;
  bool registered_ = false;  // set in Start, read in OnDone
  absl::Mutex mu_;
  std::atomic<int> refs_{1};      // the last one is released by OnDone
  HealthCheckResponse response_;  // written only while !writing_
  bool dirty_ ABSL_GUARDED_BY(mu_) = false;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool closing_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  bool sent_any_ ABSL_GUARDED_BY(mu_) = false;
  HealthState::Status last_sent_ ABSL_GUARDED_BY(mu_) =
      HealthCheckResponse::UNKNOWN;
  grpc::Status end_ ABSL_GUARDED_BY(mu_);  // not OK: finish with it
};

}  // namespace

grpc::ServerWriteReactor<HealthCheckResponse>* HealthService::Watch(
    grpc::CallbackServerContext* context, const HealthCheckRequest* request) {
  auto* reactor = new WatchReactor(state_, request->service());
  reactor->Start(Admit(context));
  return reactor;
}

}  // namespace encoder::service
