// Token authentication at the gRPC edge. EncoderService checks each call
// on entry (CheckCallToken), before any work. The other services on the port
// (grpc.health.v1 when closed, server reflection) are the library's own, so
// a server interceptor guards them: a call without an accepted token gets
// UNAUTHENTICATED and every message it would have received is emptied.
// gRPC 1.51 offers no earlier hook for plaintext ports: an
// AuthMetadataProcessor is refused by InsecureServerCredentials, and server
// interceptors cannot end a call before its handler runs.
#ifndef ENCODER_SERVER_SERVICE_AUTH_INTERCEPTOR_H_
#define ENCODER_SERVER_SERVICE_AUTH_INTERCEPTOR_H_

#include <grpcpp/support/server_interceptor.h>
#include <grpcpp/support/status.h>
#include <grpcpp/support/string_ref.h>

#include <map>
#include <string>

#include "server/core/edge_auth.h"

namespace encoder::service {

using core::EdgeAuth;

// OK when `edge` has no tokens or `metadata` carries an accepted bearer
// token; else UNAUTHENTICATED (counted under encoder_auth_failures_total).
grpc::Status CheckCallToken(
    const EdgeAuth& edge,
    const std::multimap<grpc::string_ref, grpc::string_ref>& metadata);

class AuthInterceptorFactory
    : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  // `auth` is copied; its pointers must outlive the server.
  explicit AuthInterceptorFactory(EdgeAuth auth) : auth_(auth) {}

  // Null (no interception) for EncoderService, which checks on entry, and
  // for health unless protect_health.
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override;

 private:
  const EdgeAuth auth_;
};

}  // namespace encoder::service

#endif  // ENCODER_SERVER_SERVICE_AUTH_INTERCEPTOR_H_
