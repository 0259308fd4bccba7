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
    const ServerOptions& options, core::Inference* core, const EdgeAuth& auth) {
  // grpc.health.v1 is the project's own HealthService (health_service.h).
  grpc::EnableDefaultHealthCheckService(false);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  std::unique_ptr<EncoderServer> s(new EncoderServer());
  s->service_ = std::make_unique<EncoderServiceImpl>(core);
  s->service_->SetAuth(&auth);
  grpc::ServerBuilder builder;
  builder.AddListeningPort(options.listen,
                           options.credentials
                               ? options.credentials
                               : grpc::InsecureServerCredentials(),
                           &s->port_);
  if (!options.reflection) {
    builder.SetOption(std::make_unique<WithoutReflection>());
  }
  if (auth.tokens != nullptr) {
    std::vector<
        std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>>
        interceptors;
    interceptors.push_back(std::make_unique<AuthInterceptorFactory>(auth));
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
  s->health_ = std::make_unique<HealthService>(&s->health_state_, &auth);
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
  s->SetServing(false);
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

void EncoderServer::SetServing(bool serving) {
  serving = serving && !unhealthy_.load();
  health_state_.Set("", serving);
  health_state_.Set(v1::EncoderService::service_full_name(), serving);
}

void EncoderServer::MarkUnhealthy() {
  unhealthy_.store(true);
  SetServing(false);
}

void EncoderServer::Shutdown(absl::Time deadline) {
  health_state_.Shutdown();  // Watch calls end with NOT_SERVING
  if (server_) {
    server_->Shutdown(absl::ToChronoTime(std::max(deadline, absl::Now())));
    server_->Wait();
    server_.reset();
  }
  if (health_server_) {
    health_server_->Shutdown(std::chrono::system_clock::now());
    health_server_->Wait();
    health_server_.reset();
  }
}

}  // namespace encoder::service
