// Diagnose's extrapolation probe through the service: the grid, its limit
// (flag and per-model, shown in ListModels), the learned table's refusal,
// and cost admission of the longest run.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/service/test_server.h"

namespace encoder::testing {
namespace {

constexpr int kFlagLimit = 150;
constexpr int kRopeLimit = 40;

v1::DiagnoseRequest Probe(const std::string& model,
                          const std::vector<int>& lengths) {
  v1::DiagnoseRequest r;
  r.set_model(model);
  for (int id : {5, 17, 42}) r.mutable_token_ids()->add_ids(id);
  r.set_extrapolation(true);
  for (int l : lengths) r.mutable_extrapolation_options()->add_lengths(l);
  return r;
}

grpc::Status Diagnose(TestServer& server, const v1::DiagnoseRequest& request,
                      v1::DiagnoseResponse* response) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(60));
  return server.stub().Diagnose(&context, request, response);
}

std::vector<int> Lengths(const v1::ExtrapolationProbe& probe, bool ran) {
  std::vector<int> out;
  for (const auto& p : probe.points()) {
    if (p.ran() == ran) out.push_back(p.length());
  }
  return out;
}

class ExtrapolationServiceTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    TestServerOptions options;
    options.diagnose.max_extrapolation_tokens = kFlagLimit;
    for (auto& spec : options.repository.models) {
      if (spec.name == "rope") spec.max_extrapolation_tokens = kRopeLimit;
    }
    server_ = new TestServer(options);
  }
  static void TearDownTestSuite() { delete server_; }
  static TestServer* server_;
};

TestServer* ExtrapolationServiceTest::server_ = nullptr;

TEST_F(ExtrapolationServiceTest, ListModelsShowsTheLimit) {
  grpc::ClientContext context;
  v1::ListModelsResponse r;
  ASSERT_TRUE(
      server_->stub().ListModels(&context, v1::ListModelsRequest(), &r).ok());
  ASSERT_EQ(r.models_size(), 6);
  for (const auto& m : r.models()) {
    EXPECT_EQ(m.max_extrapolation_tokens(),
              m.name() == "rope" ? kRopeLimit : kFlagLimit)
        << m.name();
  }
}

TEST_F(ExtrapolationServiceTest, DefaultGridReachesTwiceTheTrainedLength) {
  // Trained length 24: six lengths 3 * 16^(k/5), k = 0..5, rounded.
  v1::DiagnoseResponse r;
  ASSERT_TRUE(Diagnose(*server_, Probe("learned", {}), &r).ok());
  const v1::ExtrapolationProbe& e = r.extrapolation();
  EXPECT_EQ(e.trained_length(), 24);
  EXPECT_EQ(e.max_length(), 24);
  EXPECT_EQ(Lengths(e, true), (std::vector<int>{3, 5, 9, 16}));
  EXPECT_EQ(Lengths(e, false), (std::vector<int>{28, 48}));
  EXPECT_NE(e.points(4).skipped_reason().find("24 positions"),
            std::string::npos);
  EXPECT_EQ(e.prefix_length(), 3);  // min(8, shortest)
  EXPECT_EQ(e.max_tokens(), kFlagLimit);
  // Only the requested probe ran.
  EXPECT_FALSE(r.has_permutation());
  EXPECT_EQ(r.attention_stats_size(), 0);

  // The rope model's own limit of 40 replaces 48.
  ASSERT_TRUE(Diagnose(*server_, Probe("rope", {}), &r).ok());
  EXPECT_EQ(Lengths(r.extrapolation(), true),
            (std::vector<int>{3, 5, 9, 16, 28, 40}));
  EXPECT_EQ(r.extrapolation().points(5).entropy_size(), 2);
  EXPECT_EQ(r.extrapolation().wavelengths_size(), 4);
}

TEST_F(ExtrapolationServiceTest, RandomSourceExtendsTheBaseInput) {
  v1::DiagnoseRequest request = Probe("alibi", {8, 100});
  request.mutable_random()->set_length(6);
  request.mutable_random()->set_seed(9);
  v1::DiagnoseResponse r;
  ASSERT_TRUE(Diagnose(*server_, request, &r).ok());
  const v1::ExtrapolationProbe& e = r.extrapolation();
  ASSERT_EQ(e.source_ids_size(), 100);
  ASSERT_EQ(r.token_ids_size(), 6);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(e.source_ids(i), r.token_ids(i));
  EXPECT_EQ(e.alibi_windows_size(), 4);
  EXPECT_GT(e.points(1).pooled_drift(), 0);
}

TEST_F(ExtrapolationServiceTest, BadGridsAreInvalidArgument) {
  auto expect = [](const v1::DiagnoseRequest& request,
                   const std::string& needle) {
    v1::DiagnoseResponse r;
    grpc::Status s = Diagnose(*server_, request, &r);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
        << s.error_message();
    EXPECT_NE(s.error_message().find(needle), std::string::npos)
        << s.error_message();
  };
  expect(Probe("rope", {8, kRopeLimit + 1}), "limit of 40 tokens");
  expect(Probe("sinusoidal", {8, kFlagLimit + 1}), "limit of 150 tokens");
  expect(Probe("rope", {8, 8}), "strictly increasing");
  v1::DiagnoseRequest prefix = Probe("rope", {4, 8});
  prefix.mutable_extrapolation_options()->set_prefix_length(5);
  expect(prefix, "prefix_length");
  v1::DiagnoseRequest points = Probe("rope", {});
  points.mutable_extrapolation_options()->set_points(33);
  expect(points, "points");
  v1::DiagnoseRequest multiple = Probe("rope", {});
  multiple.mutable_extrapolation_options()->set_max_multiple(-1);
  expect(multiple, "max_multiple");
}

// The budget admits a short Diagnose but not the probe's longest run, whose
// attention is quadratic in its length.
TEST(ExtrapolationAdmission, LongestRunIsPriced) {
  TestServerOptions options;
  options.diagnose.max_extrapolation_tokens = 200;
  options.batch_memory_budget_bytes = 1 << 20;
  TestServer server(options);
  v1::DiagnoseResponse r;
  grpc::Status s = Diagnose(server, Probe("alibi", {8, 200}), &r);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
      << s.error_message();
  EXPECT_NE(s.error_message().find("extrapolation probe's longest run (200 "
                                   "tokens)"),
            std::string::npos)
      << s.error_message();
  EXPECT_TRUE(Diagnose(server, Probe("alibi", {8, 16}), &r).ok());
  // A learned table's run stops at its 24 rows, so it is priced at 24.
  EXPECT_TRUE(Diagnose(server, Probe("learned", {8, 200}), &r).ok());
}

}  // namespace
}  // namespace encoder::testing
