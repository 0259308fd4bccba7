#include "server/service/server.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/resource_quota.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server_builder.h>

#include <chrono>

#include "absl/strings/str_cat.h"

namespace encoder::service {

absl::StatusOr<std::unique_ptr<EncoderServer>> EncoderServer::Start(
    const ServerOptions& options, metrics::Metrics* metrics) {
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  std::unique_ptr<EncoderServer> s(new EncoderServer());
  ServiceLimits limits;
  limits.max_send_message_bytes = options.max_send_message_bytes;
  limits.max_inputs_per_request = options.max_inputs_per_request;
  s->service_ =
      std::make_unique<EncoderServiceImpl>(metrics, limits, options.diagnose);
  grpc::ServerBuilder builder;
  builder.AddListeningPort(options.listen, grpc::InsecureServerCredentials(),
                           &s->port_);
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
  s->server_ = builder.BuildAndStart();
  if (s->server_ == nullptr || s->port_ == 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", options.listen));
  }
  s->SetHealth(false);
  return s;
}

EncoderServer::~EncoderServer() {
  if (server_) {
    server_->Shutdown(std::chrono::system_clock::now());
    server_->Wait();
  }
}

void EncoderServer::SetHealth(bool serving) {
  grpc::HealthCheckServiceInterface* health = server_->GetHealthCheckService();
  if (health == nullptr) return;
  health->SetServingStatus(serving);
  health->SetServingStatus(v1::EncoderService::service_full_name(), serving);
}

void EncoderServer::SetModels(runner::ModelHost* host) {
  host_ = host;
  service_->SetHost(host);
  SetHealth(true);
}

bool EncoderServer::Drain(absl::Duration grace, absl::Duration unready) {
  const absl::Time start = absl::Now();
  const absl::Time deadline = start + grace;
  SetHealth(false);
  service_->StartDraining();
  const bool drained = host_ == nullptr || host_->DrainAll(deadline);
  // Keep answering UNAVAILABLE (and health NOT_SERVING) for a while before
  // the transport closes: calls that reach a closing transport fail with
  // CANCELLED, which load balancers and clients do not retry, while
  // UNAVAILABLE is retried and tells health-checking balancers to move on.
  absl::SleepFor(std::min(start + unready, deadline) - absl::Now());
  // Accepted calls have their results; give the transport the rest of the
  // grace period to send them, then cancel whatever remains.
  server_->Shutdown(absl::ToChronoTime(std::max(deadline, absl::Now())));
  server_->Wait();
  server_.reset();
  return drained;
}

}  // namespace encoder::service
