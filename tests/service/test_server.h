// A real EncoderServer on a loopback port (port 0, read back) over its own
// core, hosting small models of every scheme, and a generated stub
// connected to it: the gRPC half of what server/app builds.
#ifndef ENCODER_TESTS_SERVICE_TEST_SERVER_H_
#define ENCODER_TESTS_SERVICE_TEST_SERVER_H_

#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "encoder/v1/encoder.grpc.pb.h"
#include "server/app/drain.h"
#include "server/core/inference.h"
#include "server/model/weights/model_repository.h"
#include "server/runner/model_host.h"
#include "server/service/server.h"

namespace encoder::testing {

inline const std::vector<std::string>& SchemeNames() {
  static const std::vector<std::string> names = {
      "none", "sinusoidal", "learned", "rope", "alibi", "relative"};
  return names;
}

// Six small models named after their schemes (vocab 300, width 32, 4 heads,
// 2 layers, learned table of 24 positions).
inline model::Repository SmallRepository() {
  model::Repository repo;
  uint64_t seed = 100;
  for (const std::string& name : SchemeNames()) {
    model::ModelSpec spec;
    spec.name = name;
    spec.config.vocab_size = 300;
    spec.config.d_model = 32;
    spec.config.num_heads = 4;
    spec.config.num_layers = 2;
    spec.config.d_ff = 64;
    spec.config.max_positions = 24;
    spec.config.max_input_tokens = 200;
    spec.config.positional.type = *model::ParseSchemeName(name);
    spec.seed = seed++;
    repo.models.push_back(spec);
  }
  repo.default_model = "sinusoidal";
  return repo;
}

struct TestServerOptions {
  service::ServerOptions server;
  core::ServiceLimits limits;
  core::DiagnoseLimits diagnose;
  // Null: no authentication. Must outlive the server.
  const auth::TokenAuthenticator* tokens = nullptr;
  bool auth_health = false;  // grpc.health.v1 needs a token too
  batching::BatchOptions batching;
  model::Repository repository = SmallRepository();
  bool set_models = true;
  int64_t batch_memory_budget_bytes = 0;  // 0: derived from the machine
  // --long-input-drift: auto's measured reach (0: not measured).
  double long_input_drift = kDefaultLongInputDrift;
  // Null: metrics are dropped. Must outlive the server.
  metrics::Metrics* metrics = nullptr;
};

class TestServer {
 public:
  explicit TestServer(TestServerOptions options = {}) {
    options.server.listen = "127.0.0.1:0";
    runner::HostOptions host_options;
    host_options.batching = options.batching;
    host_options.batch_memory_budget_bytes = options.batch_memory_budget_bytes;
    host_options.long_input = options.limits.long_input;
    host_options.max_extrapolation_tokens =
        options.diagnose.max_extrapolation_tokens;
    host_options.long_input_drift = options.long_input_drift;
    auto host = runner::ModelHost::Create(options.repository, host_options);
    EXPECT_TRUE(host.ok()) << host.status();
    host_ = std::move(host).value();
    metrics::Metrics* metrics = options.metrics ? options.metrics : &metrics_;
    options.server.max_send_message_bytes =
        options.limits.max_send_message_bytes;
    core_ = std::make_unique<core::Inference>(metrics, options.limits,
                                              options.diagnose);
    auth_ = core::EdgeAuth{options.tokens, options.auth_health, metrics};
    auto server =
        service::EncoderServer::Start(options.server, core_.get(), auth_);
    EXPECT_TRUE(server.ok()) << server.status();
    server_ = std::move(server).value();
    if (options.set_models) SetModels();
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(256 << 20);
    channel_ =
        grpc::CreateCustomChannel(absl::StrCat("127.0.0.1:", server_->port()),
                                  grpc::InsecureChannelCredentials(), args);
    stub_ = v1::EncoderService::NewStub(channel_);
  }

  ~TestServer() {
    server_.reset();
    host_.reset();
  }

  // What the app does once the models are loaded: the core gets them and
  // gRPC health turns SERVING.
  void SetModels() { app::Serve({core_.get(), host_.get(), server_.get()}); }

  // The app's drain sequence (server/app/drain.h) over this server.
  bool Drain(absl::Duration grace) {
    return app::Drain({core_.get(), host_.get(), server_.get()}, grace);
  }

  v1::EncoderService::Stub& stub() { return *stub_; }
  std::shared_ptr<grpc::Channel> channel() { return channel_; }
  service::EncoderServer& server() { return *server_; }
  core::Inference* core() { return core_.get(); }
  runner::ModelHost& host() { return *host_; }

 private:
  metrics::NoopMetrics metrics_;
  std::unique_ptr<core::Inference> core_;
  core::EdgeAuth auth_;
  std::unique_ptr<runner::ModelHost> host_;
  std::unique_ptr<service::EncoderServer> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::EncoderService::Stub> stub_;
};

inline v1::EmbedRequest IdsRequest(
    const std::string& model, const std::vector<std::vector<int64_t>>& inputs) {
  v1::EmbedRequest r;
  r.set_model(model);
  for (const auto& ids : inputs) {
    auto* t = r.add_inputs()->mutable_token_ids();
    for (int64_t id : ids) t->add_ids(id);
  }
  return r;
}

inline std::vector<float> Floats(const v1::Tensor& t) {
  EXPECT_EQ(t.dtype(), v1::DTYPE_FLOAT32);
  std::vector<float> v(t.data().size() / 4);
  std::memcpy(v.data(), t.data().data(), v.size() * 4);
  return v;
}

inline grpc::Status Call(v1::EncoderService::Stub& stub,
                         const v1::EmbedRequest& request,
                         v1::EmbedResponse* response, int timeout_ms = 30000) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::milliseconds(timeout_ms));
  return stub.Embed(&context, request, response);
}

}  // namespace encoder::testing

#endif  // ENCODER_TESTS_SERVICE_TEST_SERVER_H_
