// Requests a hostile or careless client sends: text that is not UTF-8,
// bytes that are not a message at all, out-of-range numbers and enums, huge
// names. Each gets INVALID_ARGUMENT or NOT_FOUND with a short message that
// says what is wrong, and a stream answers every request it read.
#include <grpcpp/generic/generic_stub.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "server/service/request_parser.h"
#include "server/service/status_util.h"
#include "tests/service/test_server.h"

namespace encoder::testing {
namespace {

using grpc::StatusCode;

class HostileInputTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = new TestServer(); }
  static void TearDownTestSuite() { delete server_; }

  static grpc::Status Diagnose(const v1::DiagnoseRequest& request) {
    grpc::ClientContext context;
    v1::DiagnoseResponse response;
    return server_->stub().Diagnose(&context, request, &response);
  }

  static TestServer* server_;
};

TestServer* HostileInputTest::server_ = nullptr;

// Valid text, then text whose fourth byte starts no UTF-8 sequence.
v1::EmbedRequest RequestWithBadText() {
  v1::EmbedRequest request;
  request.set_model("rope");
  request.add_inputs()->set_text("fine");
  request.add_inputs()->set_text(std::string("abc\xff", 4) + "def");
  return request;
}

TEST(FirstInvalidUtf8Test, FindsTheFirstIllFormedSequence) {
  EXPECT_EQ(service::FirstInvalidUtf8(""), -1);
  EXPECT_EQ(service::FirstInvalidUtf8("plain ascii"), -1);
  EXPECT_EQ(service::FirstInvalidUtf8("caf\xc3\xa9 \xf0\x9f\x98\x80"), -1);
  EXPECT_EQ(service::FirstInvalidUtf8(std::string("a\xff", 2)), 1);
  // Overlong encoding of '/', a UTF-16 surrogate, a cut-off sequence.
  EXPECT_EQ(service::FirstInvalidUtf8("ab\xc0\xaf"), 2);
  EXPECT_EQ(service::FirstInvalidUtf8("\xed\xa0\x80x"), 0);
  EXPECT_EQ(service::FirstInvalidUtf8("xyz\xe2\x82"), 3);
  // Beyond U+10FFFF.
  EXPECT_EQ(service::FirstInvalidUtf8("\xf4\x90\x80\x80"), 0);
}

TEST(QuoteInputTest, CutsLongInputAtACharacterBoundary) {
  EXPECT_EQ(service::QuoteInput("short"), "\"short\"");
  const std::string name(10240, 'n');
  const std::string quoted = service::QuoteInput(name);
  EXPECT_LT(quoted.size(), 100u);
  EXPECT_NE(quoted.find("(10240 bytes)"), std::string::npos);
  // 'é' is two bytes: a cut at byte 5 must not split the last one.
  EXPECT_EQ(service::QuoteInput("\xc3\xa9\xc3\xa9\xc3\xa9", 5),
            "\"\xc3\xa9\xc3\xa9...\" (6 bytes)");
}

TEST_F(HostileInputTest, InvalidUtf8TextIsInvalidArgumentNamingTheByte) {
  v1::EmbedResponse response;
  grpc::Status s = Call(server_->stub(), RequestWithBadText(), &response);
  EXPECT_EQ(s.error_code(), StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message(),
            "inputs[1].text is not valid UTF-8 (byte 3 of the field)");
}

TEST_F(HostileInputTest, BytesThatAreNoMessageAreInvalidArgument) {
  grpc::GenericStub generic(server_->channel());
  const char garbage[] = "\xff\xff\xff\xff\x0f not a protobuf";
  grpc::Slice slice(garbage, sizeof(garbage) - 1);
  grpc::ByteBuffer request(&slice, 1), response;
  for (const char* method : {"/encoder.v1.EncoderService/Embed",
                             "/encoder.v1.EncoderService/Diagnose",
                             "/encoder.v1.EncoderService/ListModels",
                             "/encoder.v1.EncoderService/Tokenize",
                             "/encoder.v1.EncoderService/Decode"}) {
    grpc::ClientContext context;
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    grpc::Status status;
    generic.UnaryCall(&context, method, grpc::StubOptions(), &request,
                      &response, [&](grpc::Status s) {
                        std::lock_guard<std::mutex> lock(mu);
                        status = std::move(s);
                        done = true;
                        cv.notify_one();
                      });
    std::unique_lock<std::mutex> lock(mu);
    ASSERT_TRUE(
        cv.wait_for(lock, std::chrono::seconds(30), [&] { return done; }));
    EXPECT_EQ(status.error_code(), StatusCode::INVALID_ARGUMENT) << method;
    EXPECT_NE(status.error_message().find("is not a valid encoder.v1."),
              std::string::npos)
        << status.error_message();
  }
}

TEST_F(HostileInputTest, StreamAnswersEveryRequestAroundABadOne) {
  grpc::ClientContext context;
  auto stream = server_->stub().EmbedStream(&context);
  std::vector<v1::EmbedRequest> requests;
  for (int i = 0; i < 5; ++i) {
    v1::EmbedRequest r =
        i == 2 ? RequestWithBadText() : IdsRequest("alibi", {{1, 2, 3, 4 + i}});
    r.set_request_id(absl::StrCat("r", i));
    requests.push_back(r);
  }
  for (const auto& r : requests) ASSERT_TRUE(stream->Write(r));
  ASSERT_TRUE(stream->WritesDone());
  std::vector<v1::EmbedStreamResponse> out;
  v1::EmbedStreamResponse r;
  while (stream->Read(&r)) out.push_back(r);
  grpc::Status status = stream->Finish();
  EXPECT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(out.size(), requests.size());
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(out[i].request_id(), absl::StrCat("r", i));
    if (i == 2) {
      ASSERT_TRUE(out[i].has_error());
      EXPECT_EQ(out[i].error().code(), StatusCode::INVALID_ARGUMENT);
      EXPECT_NE(out[i].error().message().find("not valid UTF-8"),
                std::string::npos);
    } else {
      ASSERT_TRUE(out[i].has_response()) << out[i].error().message();
      EXPECT_EQ(out[i].response().results_size(), 1);
    }
  }
}

TEST_F(HostileInputTest, UnknownPoolingValueIsRejected) {
  v1::EmbedRequest request = IdsRequest("rope", {{1, 2, 3}});
  request.set_pooling(static_cast<v1::Pooling>(7));
  v1::EmbedResponse response;
  grpc::Status s = Call(server_->stub(), request, &response);
  EXPECT_EQ(s.error_code(), StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("pooling 7 is not a Pooling value"),
            std::string::npos)
      << s.error_message();
}

TEST_F(HostileInputTest, HugeModelNameIsNotFoundWithAShortQuote) {
  for (bool diagnose : {false, true}) {
    const std::string name(10240, 'x');
    grpc::Status s;
    if (diagnose) {
      v1::DiagnoseRequest request;
      request.set_model(name);
      request.mutable_random()->set_length(4);
      s = Diagnose(request);
    } else {
      v1::EmbedResponse response;
      s = Call(server_->stub(), IdsRequest(name, {{1}}), &response);
    }
    EXPECT_EQ(s.error_code(), StatusCode::NOT_FOUND) << s.error_message();
    EXPECT_LT(s.error_message().size(), 300u);
    EXPECT_NE(s.error_message().find("(10240 bytes) not found; available: "
                                     "none, sinusoidal, learned"),
              std::string::npos)
        << s.error_message();
  }
}

TEST_F(HostileInputTest, DiagnoseRangeChecksItsNumbers) {
  auto base = [] {
    v1::DiagnoseRequest r;
    r.set_model("alibi");
    r.mutable_random()->set_length(8);
    r.set_shift(true);
    return r;
  };
  v1::DiagnoseRequest r = base();
  r.set_shift_offset(std::numeric_limits<int64_t>::min());
  grpc::Status s = Diagnose(r);
  EXPECT_EQ(s.error_code(), StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("shift_offset -9223372036854775808 is out "
                                   "of range [-1048576, 1048576]"),
            std::string::npos)
      << s.error_message();
  for (double t :
       {std::nan(""), std::numeric_limits<double>::infinity(), -1.0}) {
    r = base();
    r.set_tolerance(t);
    s = Diagnose(r);
    EXPECT_EQ(s.error_code(), StatusCode::INVALID_ARGUMENT) << t;
    EXPECT_NE(s.error_message().find("must be a finite number >= 0"),
              std::string::npos)
        << s.error_message();
  }
  r = base();
  r.set_shift_offset(1 << 20);
  EXPECT_TRUE(Diagnose(r).ok());
}

TEST_F(HostileInputTest, DiagnoseTextFollowsEmbedRules) {
  v1::DiagnoseRequest r;
  r.set_model("rope");
  r.set_text("");
  grpc::Status s = Diagnose(r);
  EXPECT_EQ(s.error_code(), StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message(), "text is empty");
  r.set_text(std::string("ok\xc3", 3));
  s = Diagnose(r);
  EXPECT_EQ(s.error_code(), StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message(), "text is not valid UTF-8 (byte 2 of the field)");
}

}  // namespace
}  // namespace encoder::testing
