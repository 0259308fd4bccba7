// The `health` subcommand: grpc.health.v1.Health/Check through the stubs
// generated from grpc/health/v1/health.proto.
#ifndef ENCODER_CLIENT_HEALTH_H_
#define ENCODER_CLIENT_HEALTH_H_

#include <string>

#include "client/connection.h"

namespace encoder_client {

// The HealthCheckResponse.ServingStatus name of `status` ("SERVING", ...),
// or "STATUS_<n>" for values this client does not know.
std::string ServingStatusName(int status);

// Checks `service` ("" is the whole server). Prints the status name on
// stdout; returns kExitOk only when it is SERVING.
int RunHealth(const ConnectionOptions& connection, const std::string& service);

}  // namespace encoder_client

#endif  // ENCODER_CLIENT_HEALTH_H_
