// The Diagnose RPC on a real loopback server: verdicts, matrices, limits.
#include <gtest/gtest.h>

#include "tests/service/test_server.h"

namespace encoder::testing {
namespace {

class DiagnoseTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    TestServerOptions options;
    options.diagnose.max_tokens = 64;
    options.diagnose.max_structure_positions = 48;
    server_ = new TestServer(options);
  }
  static void TearDownTestSuite() { delete server_; }

  static grpc::Status Diagnose(const v1::DiagnoseRequest& request,
                               v1::DiagnoseResponse* response) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::seconds(60));
    return server_->stub().Diagnose(&context, request, response);
  }

  static v1::DiagnoseRequest Random(const std::string& model, int length) {
    v1::DiagnoseRequest r;
    r.set_model(model);
    r.mutable_random()->set_length(length);
    r.mutable_random()->set_seed(3);
    return r;
  }

  static TestServer* server_;
};

TestServer* DiagnoseTest::server_ = nullptr;

TEST_F(DiagnoseTest, VerdictsFollowTheTheoryForEveryScheme) {
  for (const std::string& name : SchemeNames()) {
    v1::DiagnoseResponse r;
    ASSERT_TRUE(Diagnose(Random(name, 12), &r).ok()) << name;
    EXPECT_EQ(r.scheme(), name);
    EXPECT_EQ(r.token_ids_size(), 12);
    EXPECT_EQ(r.token_labels_size(), 12);
    EXPECT_EQ(r.permutation().order_size(), 12);
    if (name == "none") {
      EXPECT_TRUE(r.permutation().equivariant());
      EXPECT_LT(r.permutation().max_token_error(), 1e-5);
    } else {
      EXPECT_FALSE(r.permutation().equivariant()) << name;
      EXPECT_GT(r.permutation().max_token_error(), 1e-3) << name;
    }
    const bool relative = name == "none" || name == "rope" || name == "alibi" ||
                          name == "relative";
    EXPECT_EQ(r.shift().relative_only(), relative) << name;
    EXPECT_FALSE(r.shift().verdict().empty());
    // 2 layers x 4 heads of statistics, entropy at most ln 12.
    ASSERT_EQ(r.attention_stats_size(), 8);
    EXPECT_NEAR(r.uniform_entropy(), std::log(12.0), 1e-12);
    for (const auto& s : r.attention_stats()) {
      EXPECT_LE(s.entropy(), r.uniform_entropy() + 1e-9);
    }
  }
}

TEST_F(DiagnoseTest, StructureMatricesHaveTheirShapes) {
  v1::DiagnoseRequest request = Random("alibi", 6);
  request.set_structure(true);
  request.set_structure_positions(16);
  v1::DiagnoseResponse r;
  ASSERT_TRUE(Diagnose(request, &r).ok());
  EXPECT_FALSE(r.has_permutation());
  EXPECT_EQ(r.structure().kind(), "bias");
  ASSERT_EQ(r.structure().bias().shape_size(), 3);
  EXPECT_EQ(r.structure().bias().shape(0), 4);
  EXPECT_EQ(r.structure().bias().shape(1), 16);
  EXPECT_EQ(r.structure().bias().dtype(), v1::DTYPE_FLOAT64);
  EXPECT_EQ(r.structure().bias().data().size(), 4u * 16 * 16 * 8);
  EXPECT_TRUE(r.structure().symmetric());
  EXPECT_TRUE(r.structure().toeplitz());
  ASSERT_EQ(r.structure().slopes_size(), 4);
  EXPECT_DOUBLE_EQ(r.structure().slopes(0), 0.25);

  request.set_model("sinusoidal");
  ASSERT_TRUE(Diagnose(request, &r).ok());
  EXPECT_EQ(r.structure().kind(), "additive");
  EXPECT_EQ(r.structure().gram().shape(0), 16);
  EXPECT_LT(r.structure().toeplitz_deviation(), 1e-5);

  request.set_model("relative");
  ASSERT_TRUE(Diagnose(request, &r).ok());
  EXPECT_TRUE(r.structure().toeplitz());
  EXPECT_FALSE(r.structure().symmetric());
}

TEST_F(DiagnoseTest, AttentionMapsOnRequest) {
  v1::DiagnoseRequest request;
  request.set_model("rope");
  request.set_text("abc");
  request.set_attention_stats(true);
  request.set_return_attention_maps(true);
  v1::DiagnoseResponse r;
  ASSERT_TRUE(Diagnose(request, &r).ok());
  ASSERT_EQ(r.attention_maps().shape_size(), 4);
  EXPECT_EQ(r.attention_maps().shape(0), 2);
  EXPECT_EQ(r.attention_maps().shape(1), 4);
  EXPECT_EQ(r.attention_maps().shape(2), 5);
  EXPECT_EQ(r.token_labels(0), "[CLS]");
  EXPECT_EQ(r.token_labels(1), "a");
}

TEST_F(DiagnoseTest, LimitsAndBadInputsAreNamed) {
  auto expect = [](const v1::DiagnoseRequest& request, grpc::StatusCode code,
                   const std::string& needle) {
    v1::DiagnoseResponse r;
    grpc::Status s = Diagnose(request, &r);
    EXPECT_EQ(s.error_code(), code) << s.error_message();
    EXPECT_NE(s.error_message().find(needle), std::string::npos)
        << s.error_message();
  };
  expect(Random("nope", 4), grpc::StatusCode::NOT_FOUND, "\"nope\"");
  expect(Random("rope", 65), grpc::StatusCode::INVALID_ARGUMENT,
         "--max-diagnose-tokens=64");
  expect(Random("learned", 30), grpc::StatusCode::INVALID_ARGUMENT,
         "model limit 24");
  v1::DiagnoseRequest big = Random("rope", 4);
  big.set_structure_positions(49);
  expect(big, grpc::StatusCode::INVALID_ARGUMENT,
         "[2, 48] (--max-structure-positions)");
  v1::DiagnoseRequest none;
  none.set_model("rope");
  expect(none, grpc::StatusCode::INVALID_ARGUMENT, "no input");
  v1::DiagnoseRequest perm = Random("rope", 4);
  perm.add_permutation_order(0);
  expect(perm, grpc::StatusCode::INVALID_ARGUMENT, "permutation_order");
  v1::DiagnoseRequest not_perm = Random("rope", 3);
  for (int i : {0, 0, 1}) not_perm.add_permutation_order(i);
  expect(not_perm, grpc::StatusCode::INVALID_ARGUMENT, "permutation");
  v1::DiagnoseRequest vocab;
  vocab.set_model("rope");
  vocab.mutable_token_ids()->add_ids(300);
  expect(vocab, grpc::StatusCode::INVALID_ARGUMENT, "[0, 300)");
}

}  // namespace
}  // namespace encoder::testing
