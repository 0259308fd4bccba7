// Cost-based admission and fair interleaving on a real loopback server: an
// input that cannot run within the batch memory budget is refused before
// any compute, naming its cost and the limit; a small call overtakes a
// large request queued before it.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "server/service/tokenize_rpc.h"
#include "tests/service/test_server.h"

namespace encoder::testing {
namespace {

using grpc::StatusCode;

constexpr int64_t kBudget = 5 << 20;  // 5 MiB

TestServerOptions SmallBudget() {
  TestServerOptions o;
  o.batch_memory_budget_bytes = kBudget;
  o.batching.max_batch_sequences = 2;
  return o;
}

std::vector<int64_t> Ids(int n) {
  std::vector<int64_t> ids(n);
  for (int i = 0; i < n; ++i) ids[i] = 1 + i % 250;
  return ids;
}

// An Embed of 256 inputs of 190 tokens with statistics on "relative" (256
// batches at one sequence per batch), called on a thread of its own.
class LargeRequest {
 public:
  explicit LargeRequest(TestServer* server)
      : model_(server->host().Find("relative")) {
    v1::EmbedRequest large = IdsRequest(
        "relative", std::vector<std::vector<int64_t>>(256, Ids(190)));
    large.set_return_attention_stats(true);
    caller_ = std::thread([this, server, large] {
      v1::EmbedResponse response;
      grpc::Status s = Call(server->stub(), large, &response, 120000);
      EXPECT_TRUE(s.ok()) << s.error_message();
      done_ = true;
    });
  }
  ~LargeRequest() { Join(); }

  // Waits until at least 200 of its sequences wait in the model's queue.
  bool Queued() const {
    for (int i = 0; i < 2000 && model_->queued_sequences() < 200; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return model_->queued_sequences() >= 200;
  }
  bool done() const { return done_.load(); }
  void Join() {
    if (caller_.joinable()) caller_.join();
  }

 private:
  const api::ServedModel* model_;
  std::atomic<bool> done_{false};
  std::thread caller_;
};

TEST(AdmissionTest, ListModelsReportsTheBatchMemoryBudget) {
  TestServer server(SmallBudget());
  grpc::ClientContext context;
  v1::ListModelsResponse response;
  ASSERT_TRUE(server.stub().ListModels(&context, {}, &response).ok());
  for (const auto& m : response.models()) {
    EXPECT_EQ(m.batching().max_batch_memory_bytes(), kBudget) << m.name();
  }
}

TEST(AdmissionTest, ListModelsReportsThePerRequestLimits) {
  TestServerOptions options;
  options.limits.max_inputs_per_request = 3;
  options.limits.max_tokenize_texts_per_request = 2;
  TestServer server(options);
  grpc::ClientContext context;
  v1::ListModelsResponse response;
  ASSERT_TRUE(server.stub().ListModels(&context, {}, &response).ok());
  EXPECT_EQ(response.max_inputs_per_request(), 3);
  EXPECT_EQ(response.max_tokenize_texts_per_request(), 2);
  // The number is the one enforced: 3 inputs pass, 4 are refused.
  v1::EmbedResponse out;
  EXPECT_TRUE(
      Call(server.stub(), IdsRequest("alibi", {Ids(4), Ids(4), Ids(4)}), &out)
          .ok());
  grpc::Status s =
      Call(server.stub(), IdsRequest("alibi", {Ids(4), Ids(4), Ids(4), Ids(4)}),
           &out);
  EXPECT_EQ(s.error_code(), StatusCode::INVALID_ARGUMENT) << s.error_message();
  // Tokenize and Decode obey their own reported limit: 2 texts pass, 3 are
  // refused with the number and the flag.
  v1::TokenizeRequest tokenize;
  tokenize.set_model("alibi");
  tokenize.add_texts("a");
  tokenize.add_texts("b");
  v1::TokenizeResponse tokens;
  grpc::ClientContext ok_context;
  const grpc::Status ok =
      server.stub().Tokenize(&ok_context, tokenize, &tokens);
  EXPECT_TRUE(ok.ok()) << ok.error_message();
  EXPECT_EQ(tokens.encodings_size(), 2);
  tokenize.add_texts_bytes("c");
  grpc::ClientContext over_context;
  s = server.stub().Tokenize(&over_context, tokenize, &tokens);
  EXPECT_EQ(s.error_code(), StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("3 texts in one request; at most 2 "
                                   "(--max-tokenize-texts-per-request)"),
            std::string::npos)
      << s.error_message();
  v1::DecodeRequest decode;
  decode.set_model("alibi");
  for (int i = 0; i < 3; ++i) decode.add_inputs()->add_ids(5);
  v1::DecodeResponse texts;
  grpc::ClientContext decode_context;
  s = server.stub().Decode(&decode_context, decode, &texts);
  EXPECT_EQ(s.error_code(), StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("3 id lists in one request; at most 2"),
            std::string::npos)
      << s.error_message();
}

TEST(AdmissionTest, InputOverTheBudgetIsRefusedWithItsCostAndTheLimit) {
  TestServer server(SmallBudget());
  // 200 tokens with statistics keeps both layers' maps: about 6.5 MiB on
  // these models; without statistics it fits.
  v1::EmbedRequest request = IdsRequest("alibi", {Ids(10), Ids(200)});
  v1::EmbedResponse response;
  ASSERT_TRUE(Call(server.stub(), request, &response).ok());
  request.set_return_attention_stats(true);
  grpc::Status s = Call(server.stub(), request, &response);
  EXPECT_EQ(s.error_code(), StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(s.error_message().find("inputs[1] (200 tokens) needs about "),
            std::string::npos)
      << s.error_message();
  EXPECT_NE(s.error_message().find("over the batch memory budget of 5.0 MiB"),
            std::string::npos)
      << s.error_message();
  // Diagnose passes the same gate.
  v1::DiagnoseRequest diagnose;
  diagnose.set_model("alibi");
  diagnose.mutable_random()->set_length(200);
  grpc::ClientContext context;
  v1::DiagnoseResponse out;
  s = server.stub().Diagnose(&context, diagnose, &out);
  EXPECT_EQ(s.error_code(), StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(s.error_message().find("the Diagnose input (200 tokens)"),
            std::string::npos)
      << s.error_message();
}

TEST(AdmissionTest, ASmallCallOvertakesALargeRequestQueuedBeforeIt) {
  TestServerOptions options;
  options.batching.max_batch_sequences = 1;
  TestServer server(options);
  LargeRequest large(&server);
  ASSERT_TRUE(large.Queued());
  const api::ServedModel* model = server.host().Find("relative");
  v1::EmbedResponse response;
  grpc::Status s =
      Call(server.stub(), IdsRequest("relative", {{1, 2, 3}}), &response);
  ASSERT_TRUE(s.ok()) << s.error_message();
  const bool small_done_first = !large.done();
  // At most a couple of batches ran for the large request meanwhile.
  EXPECT_GT(model->queued_sequences(), 100);
  large.Join();
  EXPECT_TRUE(small_done_first);
}

TEST(AdmissionTest, DiagnoseWaitsInTheModelsQueueAndPendingCallsAreBounded) {
  TestServerOptions options;
  options.batching.max_batch_sequences = 1;
  options.batching.fair_share = false;  // first come, first served
  options.diagnose.max_pending = 1;
  TestServer server(options);
  LargeRequest large(&server);
  ASSERT_TRUE(large.Queued());
  const api::ServedModel* model = server.host().Find("relative");
  // Two calls at once: one waits behind the queued sequences, the other is
  // over --max-pending-diagnose.
  std::atomic<int> ok{0}, refused{0};
  std::atomic<int64_t> queued_after{-1};
  auto diagnose = [&] {
    v1::DiagnoseRequest request;
    request.set_model("relative");
    request.mutable_random()->set_length(16);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::seconds(120));
    v1::DiagnoseResponse response;
    grpc::Status s = server.stub().Diagnose(&context, request, &response);
    if (s.ok()) {
      ++ok;
      queued_after = model->queued_sequences();
      EXPECT_TRUE(response.has_permutation());
    } else {
      ++refused;
      EXPECT_EQ(s.error_code(), StatusCode::RESOURCE_EXHAUSTED);
      EXPECT_NE(s.error_message().find("--max-pending-diagnose=1"),
                std::string::npos)
          << s.error_message();
    }
  };
  std::thread first(diagnose), second(diagnose);
  first.join();
  second.join();
  large.Join();
  EXPECT_EQ(ok.load(), 1);
  EXPECT_EQ(refused.load(), 1);
  // It ran in the model's queue, after every sequence queued before it
  // (outside the queue it would have returned with most of them waiting).
  EXPECT_EQ(queued_after.load(), 0);
}

}  // namespace
}  // namespace encoder::testing
