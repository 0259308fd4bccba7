// Long inputs in windows (EmbedRequest.long_input): the windows a too-long
// input becomes, their aggregation, and the requests chunking refuses. The
// vectors themselves are checked against transformers on real weights in
// tests/conformance/chunking.py.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
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
    options.limits.max_chunks_per_input = 4;
    options.diagnose.max_extrapolation_tokens = 500;
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
  cases.push_back({both, StatusCode::INVALID_ARGUMENT, "one way"});
  v1::EmbedRequest tokens = Chunked({Ids(450)});
  tokens.set_return_token_embeddings(true);
  cases.push_back({tokens, StatusCode::INVALID_ARGUMENT, "pooled embeddings"});
  v1::EmbedRequest bad = Chunked({Ids(450)});
  bad.mutable_long_input()->set_policy(static_cast<v1::LongInput::Policy>(7));
  cases.push_back({bad, StatusCode::INVALID_ARGUMENT, "long_input.policy 7"});
  v1::EmbedRequest refused = IdsRequest("rope", {Ids(450)});
  refused.set_truncate(false);
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

// As text-embeddings-inference's --auto-truncate: a request that names no
// policy has inputs past the model's length cut to it (the server's
// default long_input), each result counting the tokens dropped; truncate
// false refuses them.
TEST_F(LongInputTest, TruncationIsTheDefaultAndCountsWhatItDrops) {
  v1::EmbedResponse out;
  ASSERT_TRUE(
      Call(server_->stub(), IdsRequest("rope", {Ids(450), Ids(30)}), &out)
          .ok());
  ASSERT_EQ(out.results_size(), 2);
  EXPECT_TRUE(out.results(0).truncated());
  EXPECT_EQ(out.results(0).num_tokens(), 200);
  EXPECT_EQ(out.results(0).truncated_tokens(), 250);
  EXPECT_FALSE(out.results(1).truncated());
  EXPECT_EQ(out.results(1).truncated_tokens(), 0);
  // Cut on the right: the first 200 ids' vector.
  ExpectClose(Floats(out.results(0).pooled()), Pooled(Ids(200)),
              "the default's cut");
  v1::EmbedRequest refused = IdsRequest("rope", {Ids(450)});
  refused.set_truncate(false);
  const grpc::Status s = Call(server_->stub(), refused, &out);
  EXPECT_EQ(s.error_code(), StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("accepts at most 200"), std::string::npos)
      << s.error_message();
  // truncate false beside a named policy leaves that policy in charge.
  v1::EmbedRequest chunked = Chunked({Ids(450)});
  chunked.set_truncate(false);
  ASSERT_TRUE(Call(server_->stub(), chunked, &out).ok());
  EXPECT_EQ(out.results(0).chunks(), 3);
  EXPECT_EQ(out.results(0).truncated_tokens(), 0);
}

// A server started with --long-input=refuse refuses what a request does
// not ask to cut; truncate true still cuts.
TEST(LongInputRefuseTest, TheServerDefaultCanRefuse) {
  TestServerOptions options;
  options.limits.long_input = LongInputPolicy::kRefuse;
  TestServer server(options);
  v1::EmbedResponse out;
  const grpc::Status s =
      Call(server.stub(), IdsRequest("rope", {Ids(450)}), &out);
  EXPECT_EQ(s.error_code(), StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("accepts at most 200"), std::string::npos)
      << s.error_message();
  v1::EmbedRequest cut = IdsRequest("rope", {Ids(450)});
  cut.set_truncate(true);
  ASSERT_TRUE(Call(server.stub(), cut, &out).ok());
  EXPECT_EQ(out.results(0).truncated_tokens(), 250);
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
  EXPECT_NE(s.error_message().find("runs at most 500 tokens whole"),
            std::string::npos)
      << s.error_message();
  s = Call(server_->stub(), extrapolated("learned", 30), &out);
  EXPECT_EQ(s.error_code(), StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(s.error_message().find("learned position table ends at 24"),
            std::string::npos)
      << s.error_message();
}

v1::EmbedRequest Windowed(const std::vector<int64_t>& ids,
                          v1::LongInput::Policy policy, int32_t chunk_tokens,
                          int32_t overlap = 0) {
  v1::EmbedRequest r = IdsRequest("rope", {ids});
  r.set_pooling(v1::POOLING_MEAN);
  r.set_normalize(false);
  v1::LongInput* l = r.mutable_long_input();
  l->set_policy(policy);
  l->set_chunk_tokens(chunk_tokens);
  l->set_overlap_tokens(overlap);
  l->set_return_chunks(true);
  return r;
}

// Late chunking runs the input once (past the model's 200 tokens here) and
// pools each window from that run: every window's vector is the mean of
// the whole run's token embeddings over it, and without overlap the
// token-weighted aggregate is the mean over all tokens.
TEST_F(LongInputTest, LateChunksPoolWindowsOfOneWholeRun) {
  const std::vector<int64_t> ids = Ids(450);
  v1::EmbedRequest whole = IdsRequest("rope", {ids});
  whole.set_pooling(v1::POOLING_MEAN);
  whole.set_normalize(false);
  whole.set_return_token_embeddings(true);
  whole.mutable_long_input()->set_policy(v1::LongInput::POLICY_EXTRAPOLATE);
  v1::EmbedResponse ran;
  ASSERT_TRUE(Call(server_->stub(), whole, &ran).ok());
  const std::vector<float> tokens = Floats(ran.results(0).token_embeddings());
  const size_t dim = tokens.size() / ids.size();

  for (const int32_t overlap : {0, 20}) {
    v1::EmbedResponse out;
    const grpc::Status s = Call(
        server_->stub(),
        Windowed(ids, v1::LongInput::POLICY_LATE_CHUNK, 150, overlap), &out);
    ASSERT_TRUE(s.ok()) << s.error_message();
    const v1::EmbedResult& r = out.results(0);
    EXPECT_EQ(r.num_tokens(), 450);
    std::vector<std::pair<int, int>> want_spans;
    for (int start = 0;; start += 150 - overlap) {
      const int end = std::min(start + 150, 450);
      want_spans.emplace_back(start, end);
      if (end == 450) break;
    }
    ASSERT_EQ(r.chunk_vectors_size(), static_cast<int>(want_spans.size()));
    EXPECT_EQ(r.chunks(), r.chunk_vectors_size());
    for (int k = 0; k < r.chunk_vectors_size(); ++k) {
      const v1::ChunkVector& c = r.chunk_vectors(k);
      const auto [b, e] = want_spans[static_cast<size_t>(k)];
      EXPECT_EQ(c.token_begin(), b);
      EXPECT_EQ(c.token_end(), e);
      EXPECT_EQ(c.char_begin(), -1) << "token ids have no characters";
      std::vector<float> mean(dim, 0.0f);
      for (size_t d = 0; d < dim; ++d) {
        double sum = 0;
        for (int t = b; t < e; ++t) sum += tokens[t * dim + d];
        mean[d] = static_cast<float>(sum / (e - b));
      }
      ExpectClose(Floats(c.embedding()), mean,
                  "window " + std::to_string(k) + " overlap " +
                      std::to_string(overlap));
    }
    if (overlap == 0) {
      ExpectClose(Floats(r.pooled()), Floats(ran.results(0).pooled()),
                  "the aggregate of windows that do not overlap");
    }
  }
}

// chunk_tokens cuts an input that fits into smaller windows, each embedded
// alone; return_chunks gives each one's vector.
TEST_F(LongInputTest, SmallerWindowsOnRequest) {
  const std::vector<int64_t> ids = Ids(120);
  v1::EmbedResponse out;
  ASSERT_TRUE(Call(server_->stub(),
                   Windowed(ids, v1::LongInput::POLICY_CHUNK, 50), &out)
                  .ok());
  const v1::EmbedResult& r = out.results(0);
  ASSERT_EQ(r.chunk_vectors_size(), 3);
  const std::pair<int, int> spans[] = {{0, 50}, {50, 100}, {100, 120}};
  for (int k = 0; k < 3; ++k) {
    const auto [b, e] = spans[k];
    EXPECT_EQ(r.chunk_vectors(k).token_begin(), b);
    EXPECT_EQ(r.chunk_vectors(k).token_end(), e);
    v1::EmbedRequest alone = IdsRequest(
        "rope", {std::vector<int64_t>(ids.begin() + b, ids.begin() + e)});
    alone.set_pooling(v1::POOLING_MEAN);
    alone.set_normalize(false);
    v1::EmbedResponse one;
    ASSERT_TRUE(Call(server_->stub(), alone, &one).ok());
    ExpectClose(Floats(r.chunk_vectors(k).embedding()),
                Floats(one.results(0).pooled()), "window " + std::to_string(k));
  }
}

TEST_F(LongInputTest, LateChunkingRefusals) {
  struct Case {
    v1::EmbedRequest request;
    StatusCode code;
    std::string says;
  };
  std::vector<Case> cases;
  v1::EmbedRequest first =
      Windowed(Ids(300), v1::LongInput::POLICY_LATE_CHUNK, 50);
  first.set_pooling(v1::POOLING_FIRST);
  cases.push_back({first, StatusCode::INVALID_ARGUMENT, "pools each window"});
  v1::EmbedRequest plain = IdsRequest("rope", {Ids(30)});
  plain.mutable_long_input()->set_chunk_tokens(10);
  cases.push_back({plain, StatusCode::INVALID_ARGUMENT,
                   "apply to the chunk and late_chunk"});
  v1::EmbedRequest learned =
      Windowed(Ids(30), v1::LongInput::POLICY_LATE_CHUNK, 10);
  learned.set_model("learned");
  cases.push_back({learned, StatusCode::FAILED_PRECONDITION,
                   "learned position table ends at 24"});
  cases.push_back({Windowed(Ids(501), v1::LongInput::POLICY_LATE_CHUNK, 100),
                   StatusCode::INVALID_ARGUMENT, "chunk it instead"});
  cases.push_back({Windowed(Ids(450), v1::LongInput::POLICY_LATE_CHUNK, 50),
                   StatusCode::INVALID_ARGUMENT, "--max-chunks-per-input"});
  cases.push_back({Windowed(Ids(100), v1::LongInput::POLICY_CHUNK, 1),
                   StatusCode::INVALID_ARGUMENT, "at least 2"});
  for (const Case& c : cases) {
    v1::EmbedResponse out;
    const grpc::Status s = Call(server_->stub(), c.request, &out);
    EXPECT_EQ(s.error_code(), c.code) << s.error_message();
    EXPECT_NE(s.error_message().find(c.says), std::string::npos)
        << s.error_message();
  }
}

// A request that names no policy gets the model's default for the inputs
// past its length only; with --long-input auto and --long-input-drift 0
// (decided by the scheme's parameters) that is extrapolation for ALiBi and
// relative buckets (windows past the extrapolation limit) and windows for
// the rest. ListModels says which and why.
class LongInputDefaultTest : public LongInputTest {
 protected:
  void SetUp() override {
    TestServerOptions options;
    options.limits.max_chunks_per_input = 4;
    options.diagnose.max_extrapolation_tokens = 500;
    options.limits.long_input = LongInputPolicy::kAuto;
    options.long_input_drift = 0;
    server_ = std::make_unique<TestServer>(options);
  }
  v1::EmbedResponse Embed(v1::EmbedRequest r) {
    v1::EmbedResponse out;
    const grpc::Status s = Call(server_->stub(), r, &out);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return out;
  }
};

TEST_F(LongInputDefaultTest, AutoPicksByTheSchemeAndSaysWhy) {
  {
    grpc::ClientContext context;
    v1::ListModelsResponse models;
    ASSERT_TRUE(server_->stub().ListModels(&context, {}, &models).ok());
    for (const v1::ModelInfo& m : models.models()) {
      EXPECT_FALSE(m.has_measured_reach()) << m.name();
    }
  }
  grpc::ClientContext context;
  v1::ListModelsResponse models;
  ASSERT_TRUE(server_->stub().ListModels(&context, {}, &models).ok());
  std::map<std::string, std::pair<std::string, std::string>> got;
  for (const v1::ModelInfo& m : models.models()) {
    got[m.name()] = {m.long_input_policy(), m.long_input_reason()};
  }
  const std::pair<const char*, const char*> want[] = {
      {"alibi", "extrapolate"}, {"relative", "extrapolate"}, {"rope", "chunk"},
      {"learned", "chunk"},     {"sinusoidal", "chunk"},     {"none", "chunk"}};
  for (const auto& [model, policy] : want) {
    ASSERT_EQ(got.count(model), 1u) << model;
    EXPECT_EQ(got[model].first, policy) << model;
    EXPECT_NE(got[model].second.find("auto"), std::string::npos)
        << got[model].second;
  }
  EXPECT_NE(got["learned"].second.find("learned position table ends at"),
            std::string::npos)
      << got["learned"].second;
  EXPECT_NE(got["alibi"].second.find("up to 500 tokens"), std::string::npos)
      << got["alibi"].second;
}

TEST_F(LongInputDefaultTest, TheDefaultAppliesToLongInputsAsIfNamed) {
  auto named = [](const std::string& model, int64_t n,
                  v1::LongInput::Policy policy) {
    v1::EmbedRequest r = IdsRequest(model, {Ids(n)});
    r.mutable_long_input()->set_policy(policy);
    return r;
  };
  struct Case {
    std::string model;
    int64_t n;
    v1::LongInput::Policy as;
    int chunks;
  };
  for (const Case& c :
       {Case{"rope", 450, v1::LongInput::POLICY_CHUNK, 3},
        Case{"alibi", 450, v1::LongInput::POLICY_EXTRAPOLATE, 1},
        Case{"alibi", 600, v1::LongInput::POLICY_CHUNK, 3},
        Case{"rope", 30, v1::LongInput::POLICY_CHUNK, 1}}) {
    const v1::EmbedResponse plain = Embed(IdsRequest(c.model, {Ids(c.n)}));
    const v1::EmbedResponse as = Embed(named(c.model, c.n, c.as));
    const std::string what = c.model + " " + std::to_string(c.n);
    ASSERT_EQ(plain.results_size(), 1) << what;
    EXPECT_EQ(plain.results(0).chunks(), c.chunks) << what;
    ExpectClose(Floats(plain.results(0).pooled()),
                Floats(as.results(0).pooled()), what);
  }
  // Short inputs keep everything a call may ask for; a long one that the
  // default would chunk is refused with the reason and the way out.
  v1::EmbedRequest tokens = IdsRequest("rope", {Ids(30)});
  tokens.set_return_token_embeddings(true);
  EXPECT_EQ(Embed(tokens).results(0).token_embeddings().shape(0), 30);
  v1::EmbedRequest long_tokens = IdsRequest("rope", {Ids(450)});
  long_tokens.set_return_token_embeddings(true);
  v1::EmbedResponse out;
  const grpc::Status s = Call(server_->stub(), long_tokens, &out);
  EXPECT_EQ(s.error_code(), StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("long-input default"), std::string::npos)
      << s.error_message();
  EXPECT_NE(s.error_message().find("pooled embeddings only"), std::string::npos)
      << s.error_message();
}

// --long-input auto as measured at load (the default --long-input-drift):
// each model whose scheme can run past its 200 tokens runs the repeated
// period at 250 .. 500 tokens; whole up to the longest that held.
class LongInputMeasuredTest : public LongInputTest {
 protected:
  void SetUp() override { server_ = Start(kDefaultLongInputDrift); }
  static std::unique_ptr<TestServer> Start(double drift) {
    TestServerOptions options;
    options.limits.max_chunks_per_input = 4;
    options.diagnose.max_extrapolation_tokens = 500;
    options.limits.long_input = LongInputPolicy::kAuto;
    options.long_input_drift = drift;
    return std::make_unique<TestServer>(options);
  }
  static std::map<std::string, v1::ModelInfo> Models(TestServer& server) {
    grpc::ClientContext context;
    v1::ListModelsResponse models;
    EXPECT_TRUE(server.stub().ListModels(&context, {}, &models).ok());
    std::map<std::string, v1::ModelInfo> out;
    for (const v1::ModelInfo& m : models.models()) out[m.name()] = m;
    return out;
  }
  // The model's pooled vector of `length` tokens of the period, run whole,
  // as the measurement runs it (not normalized).
  std::vector<double> Whole(const std::string& model,
                            const v1::MeasuredReach& m, int64_t length) {
    std::vector<int64_t> ids;
    for (int64_t i = 0; i < length; ++i) {
      ids.push_back(m.source_ids(static_cast<int>(i % m.source_ids_size())));
    }
    v1::EmbedRequest r = IdsRequest(model, {ids});
    r.set_normalize(false);
    r.mutable_long_input()->set_policy(v1::LongInput::POLICY_EXTRAPOLATE);
    v1::EmbedResponse out;
    const grpc::Status s = Call(server_->stub(), r, &out);
    EXPECT_TRUE(s.ok()) << s.error_message();
    if (!s.ok()) return {};
    const std::vector<float> f = Floats(out.results(0).pooled());
    return std::vector<double>(f.begin(), f.end());
  }
};

double RelativeDrift(const std::vector<double>& now,
                     const std::vector<double>& ref) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    diff += (now[i] - ref[i]) * (now[i] - ref[i]);
    scale += ref[i] * ref[i];
  }
  return std::sqrt(diff / scale);
}

TEST_F(LongInputMeasuredTest, TheDriftDecidesAndTheReasonSaysIt) {
  std::map<std::string, v1::ModelInfo> models = Models(*server_);
  // A learned table cannot run past its rows: nothing to measure.
  EXPECT_FALSE(models["learned"].has_measured_reach());
  EXPECT_EQ(models["learned"].long_input_policy(), "chunk");
  for (const char* name : {"alibi", "relative", "rope", "sinusoidal", "none"}) {
    SCOPED_TRACE(name);
    const v1::ModelInfo& info = models[name];
    ASSERT_TRUE(info.has_measured_reach());
    const v1::MeasuredReach& m = info.measured_reach();
    EXPECT_EQ(m.max_drift(), kDefaultLongInputDrift);
    EXPECT_EQ(m.reference_length(), 200);
    EXPECT_EQ(m.limit(), 500);
    EXPECT_EQ(m.source_ids_size(), 50);
    ASSERT_GT(m.lengths_size(), 0);
    ASSERT_EQ(m.lengths_size(), m.drifts_size());
    // The grid: 1.25, 1.5, 2 times the reference, then the limit; it stops
    // at the first length that breaks.
    const int32_t grid[] = {250, 300, 400, 500};
    for (int k = 0; k < m.lengths_size(); ++k) {
      EXPECT_EQ(m.lengths(k), grid[k]);
    }
    // Each drift, recomputed here from the model's own vectors.
    const std::vector<double> ref = Whole(name, m, 200);
    for (int k = 0; k < m.lengths_size(); ++k) {
      const double drift = RelativeDrift(Whole(name, m, m.lengths(k)), ref);
      EXPECT_NEAR(m.drifts(k), drift, 1e-4 + 1e-3 * drift) << m.lengths(k);
    }
    // The lengths up to holds_up_to held; breaks_at (if any) is the last
    // one run and over the bound.
    for (int k = 0; k < m.lengths_size(); ++k) {
      if (m.lengths(k) <= m.holds_up_to()) {
        EXPECT_LE(m.drifts(k), m.max_drift());
      }
    }
    if (m.breaks_at() > 0) {
      EXPECT_EQ(m.breaks_at(), m.lengths(m.lengths_size() - 1));
      EXPECT_GT(m.drifts(m.lengths_size() - 1), m.max_drift());
    } else {
      EXPECT_EQ(m.holds_up_to(), 500);
    }
    const bool whole = m.holds_up_to() > 200;
    EXPECT_EQ(info.long_input_policy(), whole ? "extrapolate" : "chunk");
    EXPECT_NE(info.long_input_reason().find("measured at load"),
              std::string::npos)
        << info.long_input_reason();
    EXPECT_NE(info.long_input_reason().find("--long-input-drift 0.05"),
              std::string::npos)
        << info.long_input_reason();
    if (whole) {
      EXPECT_NE(info.long_input_reason().find(absl::StrCat(
                    "run whole up to ", m.holds_up_to(), " tokens")),
                std::string::npos)
          << info.long_input_reason();
    }
    // The default as served: whole up to holds_up_to, windows past it.
    v1::EmbedResponse out;
    ASSERT_TRUE(Call(server_->stub(),
                     IdsRequest(name, {Ids(std::max(m.holds_up_to(), 201))}),
                     &out)
                    .ok());
    EXPECT_EQ(out.results(0).chunks(), whole ? 1 : 2);
    if (whole && m.holds_up_to() < 500) {
      ASSERT_TRUE(Call(server_->stub(),
                       IdsRequest(name, {Ids(m.holds_up_to() + 1)}), &out)
                      .ok());
      EXPECT_GT(out.results(0).chunks(), 1);
    }
  }
  // Without positions, attention over k copies of the period is attention
  // over one: every token's state, and so the mean, is the same at every
  // length (up to float32 rounding).
  const v1::MeasuredReach& none = models["none"].measured_reach();
  for (double drift : none.drifts()) EXPECT_LT(drift, 1e-5);
}

// The bound is the user's: at the range's top every measured model runs
// whole up to the limit.
TEST_F(LongInputMeasuredTest, ALooserBoundRunsWholeFurther) {
  std::unique_ptr<TestServer> loose = Start(10);
  for (auto& [name, info] : Models(*loose)) {
    if (name == "learned") continue;
    SCOPED_TRACE(name);
    ASSERT_TRUE(info.has_measured_reach());
    EXPECT_EQ(info.measured_reach().holds_up_to(), 500);
    EXPECT_EQ(info.long_input_policy(), "extrapolate");
  }
}

}  // namespace
}  // namespace encoder::testing
