// EmbedStream ordering and errors, 64 concurrent callers of mixed lengths,
// and drain under load, on a real loopback server.
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <random>
#include <thread>

#include "tests/service/test_server.h"

namespace encoder::testing {
namespace {

double MaxDiff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double d = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    d = std::max(d, static_cast<double>(std::abs(a[i] - b[i])));
  }
  return d;
}

std::vector<int64_t> RandomIds(std::mt19937& rng, int64_t length) {
  std::uniform_int_distribution<int64_t> id(0, 299);
  std::vector<int64_t> ids(length);
  for (auto& v : ids) v = id(rng);
  return ids;
}

TEST(EmbedStream, ResponsesComeInOrderAndABadRequestDoesNotEndTheStream) {
  TestServer server;
  std::mt19937 rng(7);
  std::vector<v1::EmbedRequest> requests;
  for (int i = 0; i < 100; ++i) {
    v1::EmbedRequest r = IdsRequest(
        i % 2 ? "rope" : "relative",
        {RandomIds(rng, 1 + i % 37), RandomIds(rng, 1 + (i * 7) % 23)});
    r.set_request_id("req-" + std::to_string(i));
    if (i == 7) r.mutable_inputs(1)->mutable_token_ids()->set_ids(0, 300);
    if (i == 50) r.set_model("missing");
    requests.push_back(r);
  }
  grpc::ClientContext context;
  auto stream = server.stub().EmbedStream(&context);
  // Write everything first (more than the server's per-stream window),
  // then read: flow control must not deadlock.
  for (const auto& r : requests) ASSERT_TRUE(stream->Write(r));
  ASSERT_TRUE(stream->WritesDone());
  std::vector<v1::EmbedStreamResponse> responses;
  v1::EmbedStreamResponse response;
  while (stream->Read(&response)) responses.push_back(response);
  ASSERT_TRUE(stream->Finish().ok());
  ASSERT_EQ(responses.size(), requests.size());
  for (int i = 0; i < 100; ++i) {
    const auto& got = responses[i];
    EXPECT_EQ(got.request_id(), "req-" + std::to_string(i));
    if (i == 7) {
      ASSERT_TRUE(got.has_error());
      EXPECT_EQ(got.error().code(), grpc::StatusCode::INVALID_ARGUMENT);
      EXPECT_NE(got.error().message().find("inputs[1]"), std::string::npos);
      continue;
    }
    if (i == 50) {
      ASSERT_TRUE(got.has_error());
      EXPECT_EQ(got.error().code(), grpc::StatusCode::NOT_FOUND);
      continue;
    }
    ASSERT_TRUE(got.has_response()) << i;
    ASSERT_EQ(got.response().results_size(), 2);
    // Same numbers as a unary call of the same request.
    v1::EmbedResponse unary;
    ASSERT_TRUE(Call(server.stub(), requests[i], &unary).ok());
    for (int k = 0; k < 2; ++k) {
      EXPECT_LT(MaxDiff(Floats(got.response().results(k).pooled()),
                        Floats(unary.results(k).pooled())),
                1e-5);
    }
  }
}

TEST(Load, SixtyFourConcurrentCallersGetTheirSingleCallOutputs) {
  TestServerOptions options;
  options.batching.max_batch_sequences = 16;
  TestServer server(options);
  constexpr int kCallers = 64;
  std::vector<v1::EmbedRequest> requests(kCallers);
  std::mt19937 rng(11);
  for (int i = 0; i < kCallers; ++i) {
    const std::string& model = SchemeNames()[i % 6];
    // The small learned model holds 24 positions; the others take more.
    const int64_t max_len = model == "learned" ? 24 : 60;
    requests[i] = IdsRequest(model, {RandomIds(rng, 1 + (i * 13) % max_len)});
    requests[i].set_return_token_embeddings(true);
  }
  std::vector<v1::EmbedResponse> responses(kCallers);
  std::vector<grpc::Status> statuses(kCallers);
  std::vector<std::thread> threads;
  std::atomic<int> ready{0};
  for (int i = 0; i < kCallers; ++i) {
    threads.emplace_back([&, i] {
      ready.fetch_add(1);
      while (ready.load() < kCallers) std::this_thread::yield();
      statuses[i] = Call(server.stub(), requests[i], &responses[i]);
    });
  }
  for (auto& t : threads) t.join();
  int batched = 0;
  for (int i = 0; i < kCallers; ++i) {
    ASSERT_TRUE(statuses[i].ok()) << statuses[i].error_message();
    batched += responses[i].results(0).batch().batch_size() > 1;
    v1::EmbedResponse alone;
    ASSERT_TRUE(Call(server.stub(), requests[i], &alone).ok());
    EXPECT_EQ(alone.results(0).batch().batch_size(), 1);
    EXPECT_LT(MaxDiff(Floats(responses[i].results(0).pooled()),
                      Floats(alone.results(0).pooled())),
              1e-5)
        << i;
    EXPECT_LT(MaxDiff(Floats(responses[i].results(0).token_embeddings()),
                      Floats(alone.results(0).token_embeddings())),
              1e-5)
        << i;
  }
  EXPECT_GT(batched, 0) << "no request shared a batch";
}

TEST(Drain, EveryAcceptedCallCompletesAndNewCallsAreRefused) {
  TestServerOptions options;
  model::Repository builtin = model::BuiltinRepository();
  options.repository.models = {builtin.models[1]};  // 512 wide, 4 layers
  options.repository.default_model = builtin.models[1].name;
  options.batching.max_batch_sequences = 4;
  TestServer server(options);
  constexpr int kCalls = 24;
  std::mutex mu;
  std::condition_variable cv;
  int finished = 0;
  std::vector<grpc::Status> statuses(kCalls);
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  std::vector<v1::EmbedResponse> responses(kCalls);
  v1::EmbedRequest request = IdsRequest("", {std::vector<int64_t>(128, 9)});
  for (int i = 0; i < kCalls; ++i) {
    contexts.push_back(std::make_unique<grpc::ClientContext>());
    server.stub().async()->Embed(contexts[i].get(), &request, &responses[i],
                                 [&, i](grpc::Status s) {
                                   std::lock_guard<std::mutex> lock(mu);
                                   statuses[i] = s;
                                   ++finished;
                                   cv.notify_one();
                                 });
  }
  const batching::Batcher& batcher = *server.host().FindHosted("")->batcher;
  const absl::Time until = absl::Now() + absl::Seconds(30);
  while (batcher.queued_sequences() < 8 && absl::Now() < until) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  const int64_t queued_at_drain = batcher.queued_sequences();
  ASSERT_GE(queued_at_drain, 8);
  EXPECT_TRUE(server.Drain(absl::Seconds(60)));
  {
    std::unique_lock<std::mutex> lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(60),
                            [&] { return finished == kCalls; }));
  }
  int ok = 0;
  for (const grpc::Status& s : statuses) {
    EXPECT_TRUE(s.ok() || s.error_code() == grpc::StatusCode::UNAVAILABLE)
        << s.error_code() << " " << s.error_message();
    ok += s.ok();
  }
  EXPECT_GE(ok, queued_at_drain);
  v1::EmbedResponse late;
  EXPECT_EQ(Call(server.stub(), request, &late, 5000).error_code(),
            grpc::StatusCode::UNAVAILABLE);
}

}  // namespace
}  // namespace encoder::testing
