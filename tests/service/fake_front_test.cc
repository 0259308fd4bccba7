// Both fronts call one core: a third front, written here in a few lines
// with no RPC library, gets what gRPC Embed gets from the same server (the
// same vectors, the same refusals in the same words) and is counted under
// its own label.
#include <gtest/gtest.h>

#include <future>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "server/core/inference.h"
#include "server/core/status.h"
#include "tests/service/test_server.h"

namespace encoder::testing {
namespace {

// The whole front: "MODEL ID ID ..." in; the pooled vector, or the status
// code and message, out. (It waits for the answer; the real fronts do not.)
struct LineFront {
  core::Inference* core;

  absl::StatusOr<std::vector<float>> Handle(const std::string& line) {
    std::vector<std::string> words = absl::StrSplit(line, ' ');
    core::EmbedQuery query;
    query.model = words[0];
    std::vector<int64_t> ids(words.size() - 1);
    for (size_t i = 1; i < words.size(); ++i) {
      if (!absl::SimpleAtoi(words[i], &ids[i - 1])) {
        return absl::InvalidArgumentError("not an id: " + words[i]);
      }
    }
    query.inputs.push_back(core::EmbedInput::Ids(std::move(ids)));
    core::Call call;
    call.rpc = "line";
    call.peer = "line:1";
    std::promise<absl::StatusOr<std::vector<float>>> out;
    core->Embed(call, std::move(query),
                [&out](absl::StatusOr<core::EmbedAnswer> answer) {
                  if (!answer.ok()) return out.set_value(answer.status());
                  out.set_value(answer->inputs[0].result.pooled);
                });
    return out.get_future().get();
  }
};

// Records each finished call as (rpc, model, code).
class RecordingMetrics : public metrics::NoopMetrics {
 public:
  void RequestDone(const std::string& rpc, const std::string& model,
                   const std::string& code, double) override {
    absl::MutexLock lock(&mu_);
    calls_.emplace_back(rpc, model, code);
  }
  std::vector<std::tuple<std::string, std::string, std::string>> calls() {
    absl::MutexLock lock(&mu_);
    return calls_;
  }

 private:
  absl::Mutex mu_;
  std::vector<std::tuple<std::string, std::string, std::string>> calls_;
};

TEST(FakeFront, GetsTheVectorsGrpcEmbedGets) {
  RecordingMetrics metrics;
  TestServerOptions options;
  options.metrics = &metrics;
  TestServer server(options);
  LineFront front{server.core()};
  for (const std::string model : {"rope", "alibi", "learned"}) {
    auto line = front.Handle(model + " 5 17 42 99 3");
    ASSERT_TRUE(line.ok()) << line.status();
    v1::EmbedResponse response;
    ASSERT_TRUE(
        Call(server.stub(), IdsRequest(model, {{5, 17, 42, 99, 3}}), &response)
            .ok());
    const std::vector<float> grpc = Floats(response.results(0).pooled());
    ASSERT_EQ(line->size(), grpc.size()) << model;
    EXPECT_EQ(*line, grpc) << model;
  }
  int line_calls = 0, grpc_calls = 0;
  for (const auto& [rpc, model, code] : metrics.calls()) {
    EXPECT_EQ(code, "OK");
    if (rpc == "line") ++line_calls;
    if (rpc == "Embed") ++grpc_calls;
  }
  EXPECT_EQ(line_calls, 3);
  EXPECT_EQ(grpc_calls, 3);
}

TEST(FakeFront, IsRefusedAsGrpcIs) {
  TestServer server;
  LineFront front{server.core()};
  // An unknown model, an id outside the vocabulary: the core's words.
  for (const auto& [line, model, ids] :
       std::vector<std::tuple<std::string, std::string, std::vector<int64_t>>>{
           {"nope 1 2", "nope", {1, 2}}, {"rope 1 300", "rope", {1, 300}}}) {
    auto refused = front.Handle(line);
    v1::EmbedResponse response;
    const grpc::Status grpc =
        Call(server.stub(), IdsRequest(model, {ids}), &response);
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(static_cast<int>(refused.status().code()),
              static_cast<int>(grpc.error_code()));
    EXPECT_EQ(std::string(refused.status().message()), grpc.error_message());
  }
  // Draining is the core's state: every front refuses from then on.
  server.core()->StartDraining();
  auto refused = front.Handle("rope 1 2");
  v1::EmbedResponse response;
  const grpc::Status grpc =
      Call(server.stub(), IdsRequest("rope", {{1, 2}}), &response);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(grpc.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(std::string(refused.status().message()), grpc.error_message());
}

}  // namespace
}  // namespace encoder::testing
