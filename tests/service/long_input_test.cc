// Long inputs in windows (EmbedRequest.long_input): the windows a too-long
// input becomes, their aggregation, and the requests chunking refuses. The
// vectors themselves are checked against transformers on real weights in
// tests/conformance/chunking.py.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "tests/service/test_server.h"

namespace encoder::testing {
namespace {

using grpc::StatusCode;

std::vector<int64_t> Ids(int64_t n) {
  std::vector<int64_t> ids(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) ids[i] = 1 + (i * 37) % 290;
  return ids;
}

v1::EmbedRequest Chunked(const std::vector<std::vector<int64_t>>& inputs,
                         int32_t overlap = 0, bool max = false) {
  v1::EmbedRequest r = IdsRequest("rope", inputs);
  r.mutable_long_input()->set_policy(v1::LongInput::POLICY_CHUNK);
  r.mutable_long_input()->set_overlap_tokens(overlap);
  r.mutable_long_input()->set_aggregation(
      max ? v1::LongInput::AGGREGATION_MAX : v1::LongInput::AGGREGATION_MEAN);
  return r;
}

// The same input in another batch: equal up to float32 rounding (the
// batch's padding and kernels may differ).
void ExpectClose(const std::vector<float>& got, const std::vector<float>& want,
                 const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t d = 0; d < got.size(); ++d) {
    EXPECT_NEAR(got[d], want[d], 1e-5) << what << " value " << d;
  }
}

class LongInputTest : public ::testing::Test {
 protected:
  void SetUp() override {
    TestServerOptions options;
    options.server.max_chunks_per_input = 4;
    options.server.diagnose.max_extrapolation_tokens = 500;
    server_ = std::make_unique<TestServer>(options);
  }
  std::vector<float> Pooled(const std::vector<int64_t>& ids) {
    v1::EmbedResponse out;
    EXPECT_TRUE(Call(server_->stub(), IdsRequest("rope", {ids}), &out).ok());
    return Floats(out.results(0).pooled());
  }
  std::unique_ptr<TestServer> server_;
};

// "rope" accepts 200 tokens: 450 ids are windows [0, 200), [200, 400) and
// [400, 450); with 50 tokens of overlap, [0, 200), [150, 350), [300, 450).
TEST_F(LongInputTest, WindowsAreAggregatedByTheirTokens) {
  const std::vector<int64_t> ids = Ids(450);
  struct Case {
    int32_t overlap;
    bool max;
    std::vector<std::pair<int64_t, int64_t>> windows;
  };
  for (const Case& c : {Case{0, false, {{0, 200}, {200, 400}, {400, 450}}},
                        Case{50, false, {{0, 200}, {150, 350}, {300, 450}}},
                        Case{0, true, {{0, 200}, {200, 400}, {400, 450}}}}) {
    v1::EmbedResponse out;
    ASSERT_TRUE(
        Call(server_->stub(), Chunked({ids, Ids(30)}, c.overlap, c.max), &out)
            .ok());
    EXPECT_EQ(out.results(0).chunks(), 3);
    EXPECT_EQ(out.results(1).chunks(), 1);
    ExpectClose(Floats(out.results(1).pooled()), Pooled(Ids(30)),
                "a short input beside windows");
    std::vector<double> want;
    double weights = 0;
    for (const auto& [a, b] : c.windows) {
      const std::vector<float> v =
          Pooled(std::vector<int64_t>(ids.begin() + a, ids.begin() + b));
      if (want.empty()) want.assign(v.size(), c.max ? -1e30 : 0.0);
      for (size_t d = 0; d < v.size(); ++d) {
        want[d] = c.max ? std::max(want[d], double{v[d]})
                        : want[d] + double(b - a) * v[d];
      }
      weights += double(b - a);
    }
    const std::vector<float> got = Floats(out.results(0).pooled());
    ASSERT_EQ(got.size(), want.size());
    for (size_t d = 0; d < got.size(); ++d) {
      EXPECT_NEAR(got[d], c.max ? want[d] : want[d] / weights, 1e-5)
          << "overlap " << c.overlap << " max " << c.max << " value " << d;
    }
  }
  // Normalization comes after the aggregation.
  v1::EmbedRequest normalized = Chunked({ids});
  normalized.set_normalize(true);
  v1::EmbedResponse out;
  ASSERT_TRUE(Call(server_->stub(), normalized, &out).ok());
  const std::vector<float> v = Floats(out.results(0).pooled());
  double norm = 0;
  for (float x : v) norm += double{x} * x;
  EXPECT_NEAR(std::sqrt(norm), 1.0, 1e-5);
}

TEST_F(LongInputTest, RefusalsNameWhatToChange) {
  struct Case {
    v1::EmbedRequest request;
    StatusCode code;
    std::string says;
  };
  std::vector<Case> cases;
  cases.push_back({Chunked({Ids(900)}), StatusCode::INVALID_ARGUMENT,
                   "--max-chunks-per-input"});
  cases.push_back({Chunked({Ids(450)}, 101), StatusCode::INVALID_ARGUMENT,
                   "must be 0 to 100"});
  v1::EmbedRequest both = Chunked({Ids(450)});
  both.set_truncate(true);
  cases.push_back({both, StatusCode::INVALID_ARGUMENT, "not both"});
  v1::EmbedRequest tokens = Chunked({Ids(450)});
  tokens.set_return_token_embeddings(true);
  cases.push_back({tokens, StatusCode::INVALID_ARGUMENT, "pooled embeddings"});
  v1::EmbedRequest bad = Chunked({Ids(450)});
  bad.mutable_long_input()->set_policy(static_cast<v1::LongInput::Policy>(7));
  cases.push_back({bad, StatusCode::INVALID_ARGUMENT, "long_input.policy 7"});
  v1::EmbedRequest refused = IdsRequest("rope", {Ids(450)});
  cases.push_back(
      {refused, StatusCode::INVALID_ARGUMENT, "chunk it (long_input)"});
  for (const Case& c : cases) {
    v1::EmbedResponse out;
    const grpc::Status s = Call(server_->stub(), c.request, &out);
    EXPECT_EQ(s.error_code(), c.code) << s.error_message();
    EXPECT_NE(s.error_message().find(c.says), std::string::npos)
        << s.error_message();
  }
  // Truncation as a policy is the truncate flag.
  v1::EmbedRequest cut = IdsRequest("rope", {Ids(450)});
  cut.mutable_long_input()->set_policy(v1::LongInput::POLICY_TRUNCATE);
  v1::EmbedResponse out;
  ASSERT_TRUE(Call(server_->stub(), cut, &out).ok());
  EXPECT_TRUE(out.results(0).truncated());
  EXPECT_EQ(out.results(0).num_tokens(), 200);
}

// Extrapolating runs the whole input where the scheme allows, up to the
// extrapolation limit (here 500), and refuses a learned position table.
TEST_F(LongInputTest, ExtrapolationRunsTheWholeInputWhereTheSchemeAllows) {
  auto extrapolated = [](const std::string& model, int64_t n) {
    v1::EmbedRequest r = IdsRequest(model, {Ids(n)});
    r.mutable_long_input()->set_policy(v1::LongInput::POLICY_EXTRAPOLATE);
    return r;
  };
  for (const std::string model : {"rope", "alibi", "relative", "none"}) {
    v1::EmbedResponse out;
    const grpc::Status s =
        Call(server_->stub(), extrapolated(model, 450), &out);
    ASSERT_TRUE(s.ok()) << model << ": " << s.error_message();
    EXPECT_EQ(out.results(0).num_tokens(), 450) << model;
    EXPECT_FALSE(out.results(0).truncated()) << model;
    EXPECT_EQ(out.results(0).chunks(), 1) << model;
  }
  // An input within the length is embedded as ever.
  v1::EmbedResponse short_out;
  ASSERT_TRUE(Call(server_->stub(), extrapolated("rope", 30), &short_out).ok());
  ExpectClose(Floats(short_out.results(0).pooled()), Pooled(Ids(30)),
              "a short input, extrapolating");

  v1::EmbedResponse out;
  grpc::Status s = Call(server_->stub(), extrapolated("rope", 501), &out);
  EXPECT_EQ(s.error_code(), StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("extrapolates to at most 500"),
            std::string::npos)
      << s.error_message();
  s = Call(server_->stub(), extrapolated("learned", 30), &out);
  EXPECT_EQ(s.error_code(), StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(s.error_message().find("learned position table ends at 24"),
            std::string::npos)
      << s.error_message();
}

}  // namespace
}  // namespace encoder::testing
