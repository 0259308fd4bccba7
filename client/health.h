// The `health` subcommand: grpc.health.v1.Health/Check without generated
// stubs. The request and response are two one-field messages, so they are
// encoded here by hand and sent through a generic stub.
#ifndef ENCODER_CLIENT_HEALTH_H_
#define ENCODER_CLIENT_HEALTH_H_

#include <optional>
#include <string>

#include "client/connection.h"

namespace encoder_client {

// grpc.health.v1.HealthCheckResponse.ServingStatus values.
enum class ServingStatus {
  kUnknown = 0,
  kServing = 1,
  kNotServing = 2,
  kServiceUnknown = 3,
};

// "UNKNOWN", "SERVING", "NOT_SERVING", "SERVICE_UNKNOWN", or
// "STATUS_<n>" for values this client does not know.
std::string ServingStatusName(int status);

// Wire bytes of HealthCheckRequest{service: `service`}.
std::string EncodeHealthCheckRequest(const std::string& service);

// The `status` field (number 1) of wire-format HealthCheckResponse bytes,
// 0 (UNKNOWN) when absent. nullopt when the bytes are not a valid message.
std::optional<int> DecodeHealthCheckStatus(const std::string& bytes);

// Checks `service` ("" is the whole server). Prints the status name on
// stdout; returns kExitOk only when it is SERVING.
int RunHealth(const ConnectionOptions& connection, const std::string& service);

}  // namespace encoder_client

#endif  // ENCODER_CLIENT_HEALTH_H_
