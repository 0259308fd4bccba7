#include "client/health.h"

#include <iostream>

#include "client/errors.h"
#include "grpc/health/v1/health.grpc.pb.h"

namespace encoder_client {

using grpc::health::v1::HealthCheckResponse;

std::string ServingStatusName(int status) {
  if (!HealthCheckResponse::ServingStatus_IsValid(status)) {
    return "STATUS_" + std::to_string(status);
  }
  return HealthCheckResponse::ServingStatus_Name(
      static_cast<HealthCheckResponse::ServingStatus>(status));
}

int RunHealth(const ConnectionOptions& connection, const std::string& service) {
  auto stub = grpc::health::v1::Health::NewStub(CreateChannel(connection));
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(service);
  HealthCheckResponse response;
  grpc::ClientContext context;
  SetDeadline(connection.deadline_ms, &context);
  const grpc::Status status = stub->Check(&context, request, &response);
  if (!status.ok()) {
    PrintRpcError(status);
    return kExitRpcError;
  }
  std::cout << ServingStatusName(response.status()) << std::endl;
  return response.status() == HealthCheckResponse::SERVING ? kExitOk
                                                           : kExitRpcError;
}

}  // namespace encoder_client
