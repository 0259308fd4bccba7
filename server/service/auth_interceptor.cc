#include "server/service/auth_interceptor.h"

#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/slice.h>

#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/string_view.h"

namespace encoder::service {
namespace {

using grpc::experimental::InterceptionHookPoints;

class AuthInterceptor : public grpc::experimental::Interceptor {
 public:
  explicit AuthInterceptor(const EdgeAuth* auth) : auth_(auth) {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* m) override {
    if (m->QueryInterceptionHookPoint(
            InterceptionHookPoints::POST_RECV_INITIAL_METADATA)) {
      refusal_ = CheckCallToken(*auth_, *m->GetRecvInitialMetadata());
    }
    if (!refusal_.ok()) {
      if (m->QueryInterceptionHookPoint(
              InterceptionHookPoints::PRE_SEND_MESSAGE)) {
        grpc::ByteBuffer* message = m->GetSerializedSendMessage();
        // An empty message: a default instance of any response type.
        grpc::Slice empty;
        if (message != nullptr) *message = grpc::ByteBuffer(&empty, 1);
      }
      if (m->QueryInterceptionHookPoint(
              InterceptionHookPoints::PRE_SEND_STATUS)) {
        m->ModifySendStatus(refusal_);
      }
    }
    m->Proceed();
  }

 private:
  const EdgeAuth* auth_;
  grpc::Status refusal_;
};

}  // namespace

grpc::Status CheckCallToken(
    const EdgeAuth& edge,
    const std::multimap<grpc::string_ref, grpc::string_ref>& metadata) {
  if (edge.tokens == nullptr) return grpc::Status::OK;
  std::vector<absl::string_view> values;
  auto [begin, end] = metadata.equal_range("authorization");
  for (auto it = begin; it != end; ++it) {
    values.emplace_back(it->second.data(), it->second.size());
  }
  const absl::Status checked = core::CheckBearer(
      edge, values, "\"authorization: Bearer <token>\" metadata");
  if (checked.ok()) return grpc::Status::OK;
  return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                      std::string(checked.message()));
}

grpc::experimental::Interceptor*
AuthInterceptorFactory::CreateServerInterceptor(
    grpc::experimental::ServerRpcInfo* info) {
  if (auth_.tokens == nullptr) return nullptr;
  const absl::string_view method = info->method();
  if (absl::StartsWith(method, "/encoder.v1.EncoderService/")) return nullptr;
  // grpc.health.v1 is the project's HealthService, which checks on entry
  // too (and can then refuse Watch at once).
  if (absl::StartsWith(method, "/grpc.health.v1.Health/")) return nullptr;
  return new AuthInterceptor(&auth_);
}

}  // namespace encoder::service
