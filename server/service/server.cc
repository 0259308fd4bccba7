#include "server/service/server.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/impl/server_builder_option.h>
#include <grpcpp/impl/server_builder_plugin.h>
#include <grpcpp/resource_quota.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server_builder.h>

#include <algorithm>
#include <chrono>
#include <vector>

#include "absl/strings/str_cat.h"

namespace encoder::service {
namespace {

// Removes the reflection plugin (registered process-wide) from one server.
class WithoutReflection : public grpc::ServerBuilderOption {
 public:
  void UpdateArguments(grpc::ChannelArguments*) override {}
  void UpdatePlugins(std::vector<std::unique_ptr<grpc::ServerBuilderPlugin>>*
                         plugins) override {
    plugins->erase(std::remove_if(plugins->begin(), plugins->end(),
                                  [](const auto& p) {
                                    return p->name() ==
                                           "proto_server_reflection";
                                  }),
                   plugins->end());
  }
};

}  // namespace

absl::StatusOr<std::unique_ptr<EncoderServer>> EncoderServer::Start(
    const ServerOptions& options, metrics::Metrics* metrics) {
  // grpc.health.v1 is the project's own HealthService (health_service.h).
  grpc::EnableDefaultHealthCheckService(false);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  std::unique_ptr<EncoderServer> s(new EncoderServer());
  ServiceLimits limits;
  limits.max_send_message_bytes = options.max_send_message_bytes;
  limits.max_inputs_per_request = options.max_inputs_per_request;
  limits.max_chunks_per_input = options.max_chunks_per_input;
  limits.long_input = options.long_input;
  limits.max_extrapolation_tokens = options.diagnose.max_extrapolation_tokens;
  limits.unread = options.unread;
  s->core_ =
      std::make_unique<core::Inference>(metrics, limits, options.diagnose);
  s->service_ = std::make_unique<EncoderServiceImpl>(s->core_.get());
  s->edge_auth_ = EdgeAuth{options.tokens, options.auth_health, metrics};
  s->service_->SetAuth(&s->edge_auth_);
  grpc::ServerBuilder builder;
  builder.AddListeningPort(options.listen,
                           options.credentials
                               ? options.credentials
                               : grpc::InsecureServerCredentials(),
                           &s->port_);
  if (!options.reflection) {
    builder.SetOption(std::make_unique<WithoutReflection>());
  }
  if (options.tokens != nullptr) {
    std::vector<
        std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>>
        interceptors;
    interceptors.push_back(
        std::make_unique<AuthInterceptorFactory>(s->edge_auth_));
    builder.experimental().SetInterceptorCreators(std::move(interceptors));
  }
  builder.SetMaxReceiveMessageSize(
      static_cast<int>(options.max_receive_message_bytes));
  builder.SetMaxSendMessageSize(
      static_cast<int>(options.max_send_message_bytes));
  grpc::ResourceQuota quota("encoder-server");
  quota.Resize(static_cast<size_t>(options.memory_quota_bytes));
  builder.SetResourceQuota(quota);
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS,
                             options.max_concurrent_streams);
  builder.RegisterService(s->service_.get());
  s->health_state_.set_max_watchers(options.max_health_watchers);
  s->health_ =
      std::make_unique<HealthService>(&s->health_state_, &s->edge_auth_);
  builder.RegisterService(s->health_.get());
  s->server_ = builder.BuildAndStart();
  if (s->server_ == nullptr || s->port_ == 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", options.listen));
  }
  if (!options.health_listen.empty()) {
    grpc::ServerBuilder health;
    health.AddListeningPort(options.health_listen,
                            grpc::InsecureServerCredentials(),
                            &s->health_port_);
    health.SetOption(std::make_unique<WithoutReflection>());
    s->health_port_service_ =
        std::make_unique<HealthService>(&s->health_state_, nullptr);
    health.RegisterService(s->health_port_service_.get());
    health.RegisterCallbackGenericService(&s->health_port_fallback_);
    s->health_server_ = health.BuildAndStart();
    if (s->health_server_ == nullptr || s->health_port_ == 0) {
      return absl::UnavailableError(
          absl::StrCat("cannot listen on ", options.health_listen));
    }
  }
  s->SetHealth(false);
  return s;
}

EncoderServer::~EncoderServer() {
  health_state_.Shutdown();  // ends every Watch call
  if (health_server_) {
    health_server_->Shutdown(std::chrono::system_clock::now());
    health_server_->Wait();
  }
  if (server_) {
    server_->Shutdown(std::chrono::system_clock::now());
    server_->Wait();
  }
}

void EncoderServer::SetHealth(bool serving) {
  health_state_.Set("", serving);
  health_state_.Set(v1::EncoderService::service_full_name(), serving);
}

void EncoderServer::SetModels(runner::ModelCatalog* host) {
  host_ = host;
  core_->SetHost(host);
  SetHealth(!unhealthy_.load());
}

void EncoderServer::MarkUnhealthy(const std::string& reason) {
  unhealthy_.store(true);
  core_->MarkUnhealthy(reason);
  SetHealth(false);
}

bool EncoderServer::Drain(absl::Duration grace, absl::Duration unready) {
  const absl::Time start = absl::Now();
  const absl::Time deadline = start + grace;
  SetHealth(false);
  core_->StartDraining();
  const bool drained = host_ == nullptr || host_->DrainAll(deadline);
  // Keep answering UNAVAILABLE (and health NOT_SERVING) for a while before
  // the transport closes: calls that reach a closing transport fail with
  // CANCELLED, which load balancers and clients do not retry, while
  // UNAVAILABLE is retried and tells health-checking balancers to move on.
  absl::SleepFor(std::min(start + unready, deadline) - absl::Now());
  health_state_.Shutdown();  // Watch calls end with NOT_SERVING
  // Accepted calls have their results; give the transport the rest of the
  // grace period to send them, then cancel whatever remains.
  server_->Shutdown(absl::ToChronoTime(std::max(deadline, absl::Now())));
  server_->Wait();
  server_.reset();
  if (health_server_) {
    health_server_->Shutdown(std::chrono::system_clock::now());
    health_server_->Wait();
    health_server_.reset();
  }
  return drained;
}

}  // namespace encoder::service
