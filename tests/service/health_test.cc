// grpc.health.v1 Check and Watch through generated stubs on a real loopback
// server: statuses follow the models and the drain, unknown services, and a
// closed health service refusing callers without a token (Watch included).
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <thread>

#include "grpc/health/v1/health.grpc.pb.h"
#include "server/auth/token_auth.h"
#include "tests/service/test_server.h"

namespace encoder::testing {
namespace {

using grpc::StatusCode;
using grpc::health::v1::Health;
using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;

constexpr char kToken[] = "health-test-token";

HealthCheckRequest For(const std::string& service) {
  HealthCheckRequest r;
  r.set_service(service);
  return r;
}

void WithDeadline(grpc::ClientContext* context) {
  context->set_deadline(std::chrono::system_clock::now() +
                        std::chrono::seconds(20));
}

TEST(HealthTest, CheckFollowsTheModelsAndNamesUnknownServices) {
  TestServerOptions options;
  options.set_models = false;
  TestServer server(options);
  auto stub = Health::NewStub(server.channel());
  auto check = [&](const std::string& service, HealthCheckResponse* out) {
    grpc::ClientContext context;
    WithDeadline(&context);
    return stub->Check(&context, For(service), out);
  };
  HealthCheckResponse out;
  ASSERT_TRUE(check("", &out).ok());
  EXPECT_EQ(out.status(), HealthCheckResponse::NOT_SERVING);
  server.SetModels();
  ASSERT_TRUE(check("", &out).ok());
  EXPECT_EQ(out.status(), HealthCheckResponse::SERVING);
  ASSERT_TRUE(check("encoder.v1.EncoderService", &out).ok());
  EXPECT_EQ(out.status(), HealthCheckResponse::SERVING);
  grpc::Status s = check("no.such.Service", &out);
  EXPECT_EQ(s.error_code(), StatusCode::NOT_FOUND);
  EXPECT_NE(s.error_message().find("no.such.Service"), std::string::npos);
}

TEST(HealthTest, WatchSendsEachChangeAndEndsWithTheDrain) {
  TestServerOptions options;
  options.set_models = false;
  TestServer server(options);
  auto stub = Health::NewStub(server.channel());
  grpc::ClientContext context;
  WithDeadline(&context);
  auto reader = stub->Watch(&context, For(""));
  HealthCheckResponse update;
  ASSERT_TRUE(reader->Read(&update));
  EXPECT_EQ(update.status(), HealthCheckResponse::NOT_SERVING);
  server.SetModels();
  ASSERT_TRUE(reader->Read(&update));
  EXPECT_EQ(update.status(), HealthCheckResponse::SERVING);

  // An unknown service is watched as SERVICE_UNKNOWN (the protocol's rule
  // for Watch), not refused.
  grpc::ClientContext unknown_context;
  WithDeadline(&unknown_context);
  auto unknown = stub->Watch(&unknown_context, For("no.such.Service"));
  ASSERT_TRUE(unknown->Read(&update));
  EXPECT_EQ(update.status(), HealthCheckResponse::SERVICE_UNKNOWN);
  unknown_context.TryCancel();
  EXPECT_EQ(unknown->Finish().error_code(), StatusCode::CANCELLED);

  // The drain turns the watcher NOT_SERVING and ends its call cleanly.
  std::thread drain([&] { server.Drain(absl::Seconds(5)); });
  ASSERT_TRUE(reader->Read(&update));
  EXPECT_EQ(update.status(), HealthCheckResponse::NOT_SERVING);
  EXPECT_FALSE(reader->Read(&update));
  grpc::Status end = reader->Finish();
  drain.join();
  EXPECT_TRUE(end.ok()) << end.error_code() << " " << end.error_message();
}

TEST(HealthTest, ClosedHealthRefusesCheckAndWatchWithoutAToken) {
  auth::TokenAuthenticator tokens({kToken});
  TestServerOptions options;
  options.tokens = &tokens;
  options.auth_health = true;
  TestServer server(options);
  auto stub = Health::NewStub(server.channel());
  auto add_token = [](grpc::ClientContext* context, const std::string& t) {
    context->AddMetadata("authorization", "Bearer " + t);
  };
  for (const std::string token : {"", "wrong-token"}) {
    grpc::ClientContext check_context;
    WithDeadline(&check_context);
    if (!token.empty()) add_token(&check_context, token);
    HealthCheckResponse out;
    EXPECT_EQ(stub->Check(&check_context, For(""), &out).error_code(),
              StatusCode::UNAUTHENTICATED);

    // Watch is refused at once: no update, the status, and the call ends
    // (it used to stay open streaming emptied messages).
    grpc::ClientContext watch_context;
    WithDeadline(&watch_context);
    if (!token.empty()) add_token(&watch_context, token);
    auto reader = stub->Watch(&watch_context, For(""));
    HealthCheckResponse update;
    EXPECT_FALSE(reader->Read(&update));
    EXPECT_EQ(reader->Finish().error_code(), StatusCode::UNAUTHENTICATED);
  }
  grpc::ClientContext context;
  WithDeadline(&context);
  add_token(&context, kToken);
  auto reader = stub->Watch(&context, For(""));
  HealthCheckResponse update;
  ASSERT_TRUE(reader->Read(&update));
  EXPECT_EQ(update.status(), HealthCheckResponse::SERVING);
  context.TryCancel();
  reader->Finish();
}

TEST(HealthTest, OpenHealthNeedsNoTokenWhileTheServiceDoes) {
  auth::TokenAuthenticator tokens({kToken});
  TestServerOptions options;
  options.tokens = &tokens;
  TestServer server(options);
  auto stub = Health::NewStub(server.channel());
  grpc::ClientContext context;
  WithDeadline(&context);
  auto reader = stub->Watch(&context, For("encoder.v1.EncoderService"));
  HealthCheckResponse update;
  ASSERT_TRUE(reader->Read(&update));
  EXPECT_EQ(update.status(), HealthCheckResponse::SERVING);
  context.TryCancel();
  reader->Finish();
  v1::EmbedResponse response;
  EXPECT_EQ(
      Call(server.stub(), IdsRequest("", {{1, 2}}), &response).error_code(),
      StatusCode::UNAUTHENTICATED);
}

}  // namespace
}  // namespace encoder::testing
