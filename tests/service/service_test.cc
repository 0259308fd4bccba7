// Unary RPCs, health and reflection on a real loopback server.
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/health_check_service_interface.h>
#include <gtest/gtest.h>

#include <cmath>
#include <condition_variable>
#include <mutex>

#include "server/model/encoder.h"
#include "server/tokenizer/byte_tokenizer.h"
#include "tests/service/test_server.h"

namespace encoder::testing {
namespace {

using grpc::StatusCode;

class ServiceTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = new TestServer(); }
  static void TearDownTestSuite() { delete server_; }

  // The status of an Embed call; the message must contain `needle`.
  static void ExpectError(const v1::EmbedRequest& request, StatusCode code,
                          const std::string& needle) {
    v1::EmbedResponse response;
    grpc::Status s = Call(server_->stub(), request, &response);
    EXPECT_EQ(s.error_code(), code) << s.error_message();
    EXPECT_NE(s.error_message().find(needle), std::string::npos)
        << "message: " << s.error_message() << "\nwanted: " << needle;
  }

  static TestServer* server_;
};

TestServer* ServiceTest::server_ = nullptr;

TEST_F(ServiceTest, ListModelsDescribesEverySchemeAndItsParameters) {
  grpc::ClientContext context;
  v1::ListModelsResponse response;
  ASSERT_TRUE(server_->stub().ListModels(&context, {}, &response).ok());
  ASSERT_EQ(response.models_size(), 6);
  EXPECT_EQ(response.default_model(), "sinusoidal");
  for (int i = 0; i < 6; ++i) {
    const v1::ModelInfo& m = response.models(i);
    EXPECT_EQ(m.name(), SchemeNames()[i]);
    EXPECT_EQ(m.positional().scheme(), SchemeNames()[i]);
    EXPECT_EQ(m.is_default(), m.name() == "sinusoidal");
    EXPECT_EQ(m.d_model(), 32);
    EXPECT_EQ(m.num_heads(), 4);
    EXPECT_EQ(m.num_layers(), 2);
    EXPECT_EQ(m.vocab_size(), 300);
    EXPECT_EQ(m.device(), "cpu");
    EXPECT_EQ(m.dtype(), v1::DTYPE_FLOAT32);
    EXPECT_GT(m.parameter_count(), 300 * 32);
    EXPECT_EQ(m.positional().extrapolates(), m.name() != "learned");
    EXPECT_EQ(m.max_input_tokens(), m.name() == "learned" ? 24 : 200);
  }
  const auto& alibi = response.models(4).positional();
  ASSERT_EQ(alibi.alibi_slopes_size(), 4);
  EXPECT_DOUBLE_EQ(alibi.alibi_slopes(0), 0.25);
  EXPECT_DOUBLE_EQ(alibi.alibi_slopes(3), std::pow(2.0, -8));
  EXPECT_EQ(response.models(3).positional().params().at("layout"),
            "interleaved");
  EXPECT_EQ(response.models(3).positional().params().at("base"), "10000");
  EXPECT_EQ(response.models(5).positional().params().at("num_buckets"), "32");
  EXPECT_EQ(response.models(5).positional().params().at("max_distance"), "128");
  EXPECT_EQ(response.models(1).positional().params().at("layout"),
            "interleaved");
}

TEST_F(ServiceTest, EmbedEqualsTheInProcessModel) {
  const std::vector<int64_t> ids = {1, 17, 42, 99, 7, 2};
  for (const std::string& name : SchemeNames()) {
    v1::EmbedRequest request = IdsRequest(name, {ids});
    request.set_return_token_embeddings(true);
    v1::EmbedResponse response;
    ASSERT_TRUE(Call(server_->stub(), request, &response).ok()) << name;
    ASSERT_EQ(response.results_size(), 1);
    const v1::EmbedResult& r = response.results(0);
    EXPECT_EQ(response.model(), name);
    EXPECT_EQ(r.num_tokens(), 6);
    EXPECT_EQ(r.batch().batch_size(), 1);

    const model::Encoder& enc = *server_->host().FindHosted(name)->encoder;
    model::EncoderInput in;
    in.ids = at::tensor(ids, at::kLong).view({1, -1});
    in.mask = at::ones_like(in.ids, at::kBool);
    auto out = enc.Forward(in, {});
    ASSERT_TRUE(out.ok());
    at::Tensor pooled =
        model::Pool(out->tokens, in.mask, model::Pooling::kMean, false)[0];
    std::vector<float> got = Floats(r.pooled());
    ASSERT_EQ(got.size(), 32u);
    ASSERT_EQ(r.pooled().shape_size(), 1);
    for (int i = 0; i < 32; ++i) {
      EXPECT_NEAR(got[i], pooled[i].item<float>(), 1e-6) << name;
    }
    std::vector<float> tokens = Floats(r.token_embeddings());
    ASSERT_EQ(tokens.size(), 6u * 32u);
    EXPECT_EQ(r.token_embeddings().shape(0), 6);
    EXPECT_EQ(r.token_embeddings().shape(1), 32);
    at::Tensor want = out->tokens[0].contiguous();
    for (int i = 0; i < 6 * 32; ++i) {
      EXPECT_NEAR(tokens[i], want.data_ptr<float>()[i], 1e-6);
    }
  }
}

TEST_F(ServiceTest, TextPoolingAndNormalize) {
  v1::EmbedRequest request;
  request.set_model("rope");
  request.add_inputs()->set_text("héllo");
  request.set_pooling(v1::POOLING_FIRST);
  request.set_normalize(true);
  v1::EmbedResponse response;
  ASSERT_TRUE(Call(server_->stub(), request, &response).ok());
  // 6 UTF-8 bytes + [CLS] + [SEP].
  EXPECT_EQ(response.results(0).num_tokens(), 8);
  double norm = 0;
  for (float v : Floats(response.results(0).pooled())) norm += v * v;
  EXPECT_NEAR(std::sqrt(norm), 1.0, 1e-5);
}

TEST_F(ServiceTest, AttentionMapsHaveTheirShapeAndRowsSumToOne) {
  v1::EmbedRequest request =
      IdsRequest("alibi", {{1, 5, 6, 7, 8, 2}, {1, 9, 2}});
  request.mutable_attention()->add_layers(1);
  request.mutable_attention()->add_layers(0);
  request.mutable_attention()->add_heads(3);
  request.mutable_attention()->add_heads(1);
  v1::EmbedResponse response;
  ASSERT_TRUE(Call(server_->stub(), request, &response).ok());
  for (int i = 0; i < 2; ++i) {
    const v1::EmbedResult& r = response.results(i);
    const int64_t s = i == 0 ? 6 : 3;
    ASSERT_EQ(r.attention().shape_size(), 4);
    EXPECT_EQ(r.attention().shape(0), 2);
    EXPECT_EQ(r.attention().shape(1), 2);
    EXPECT_EQ(r.attention().shape(2), s);
    EXPECT_EQ(r.attention().shape(3), s);
    EXPECT_EQ(r.attention_layers(0), 1);
    EXPECT_EQ(r.attention_heads(0), 3);
    std::vector<float> maps = Floats(r.attention());
    for (int64_t row = 0; row < 2 * 2 * s; ++row) {
      double sum = 0;
      for (int64_t j = 0; j < s; ++j) sum += maps[row * s + j];
      EXPECT_NEAR(sum, 1.0, 1e-5);
    }
  }
  request.mutable_attention()->set_average_heads(true);
  ASSERT_TRUE(Call(server_->stub(), request, &response).ok());
  EXPECT_EQ(response.results(1).attention().shape_size(), 3);
  EXPECT_EQ(response.results(1).attention_heads_size(), 0);
}

TEST_F(ServiceTest, AttentionStatsCoverEveryLayerAndHead) {
  v1::EmbedRequest request = IdsRequest("relative", {{1, 5, 6, 7, 2}});
  request.set_return_attention_stats(true);
  v1::EmbedResponse response;
  ASSERT_TRUE(Call(server_->stub(), request, &response).ok());
  const auto& stats = response.results(0).attention_stats();
  ASSERT_EQ(stats.size(), 2 * 4);
  for (const auto& s : stats) {
    EXPECT_GE(s.entropy(), 0);
    EXPECT_LE(s.entropy(), std::log(5.0) + 1e-9);
    EXPECT_GE(s.self_mass(), 0);
    EXPECT_LE(s.self_mass() + s.prev_mass() + s.next_mass(), 1 + 1e-6);
  }
  EXPECT_FALSE(response.results(0).has_attention());
}

TEST_F(ServiceTest, HiddenStatesAreTheResidualStreamBetweenLayers) {
  // "none" is post-norm with no positions and no embedding scale: hidden
  // state 0 is each token's embedding row, the last one the output.
  const std::vector<std::vector<int64_t>> ids = {{1, 17, 42, 99, 2}, {1, 5, 2}};
  v1::EmbedRequest request = IdsRequest("none", ids);
  request.set_return_token_embeddings(true);
  for (int layer : {0, -1, 1})
    request.mutable_hidden_states()->add_layers(layer);
  v1::EmbedResponse response;
  ASSERT_TRUE(Call(server_->stub(), request, &response).ok());
  const model::ModelSpec& spec = server_->host().FindHosted("none")->spec;
  const at::Tensor table =
      model::Encoder::RandomStateDict(spec.config, spec.seed)
          .at("embedding.weight");
  for (size_t i = 0; i < ids.size(); ++i) {
    const v1::EmbedResult& r = response.results(i);
    const int64_t s = static_cast<int64_t>(ids[i].size());
    ASSERT_EQ(r.hidden_states().shape_size(), 3);
    EXPECT_EQ(r.hidden_states().shape(0), 3);
    EXPECT_EQ(r.hidden_states().shape(1), s);
    EXPECT_EQ(r.hidden_states().shape(2), 32);
    EXPECT_EQ(std::vector<int>(r.hidden_state_layers().begin(),
                               r.hidden_state_layers().end()),
              (std::vector<int>{0, 2, 1}));
    const std::vector<float> states = Floats(r.hidden_states());
    const std::vector<float> tokens = Floats(r.token_embeddings());
    for (int64_t t = 0; t < s; ++t) {
      for (int64_t d = 0; d < 32; ++d) {
        EXPECT_FLOAT_EQ(states[t * 32 + d], table[ids[i][t]][d].item<float>());
        EXPECT_FLOAT_EQ(states[(s + t) * 32 + d], tokens[t * 32 + d]);
      }
    }
    // The middle state is neither end.
    double differs = 0;
    for (int64_t k = 0; k < s * 32; ++k) {
      differs += std::abs(states[2 * s * 32 + k] - states[s * 32 + k]);
    }
    EXPECT_GT(differs, 1e-3);
  }
  // Pooled: the request's pooling over each state's rows.
  request.set_pooling(v1::POOLING_MEAN);
  request.mutable_hidden_states()->set_pooled(true);
  v1::EmbedResponse pooled;
  ASSERT_TRUE(Call(server_->stub(), request, &pooled).ok());
  for (size_t i = 0; i < ids.size(); ++i) {
    const int64_t s = static_cast<int64_t>(ids[i].size());
    const v1::Tensor& t = pooled.results(i).hidden_states();
    ASSERT_EQ(t.shape_size(), 2);
    EXPECT_EQ(t.shape(0), 3);
    EXPECT_EQ(t.shape(1), 32);
    const std::vector<float> got = Floats(t);
    const std::vector<float> full = Floats(response.results(i).hidden_states());
    for (int64_t l = 0; l < 3; ++l) {
      for (int64_t d = 0; d < 32; ++d) {
        double mean = 0;
        for (int64_t k = 0; k < s; ++k) mean += full[(l * s + k) * 32 + d];
        EXPECT_NEAR(got[l * 32 + d], mean / s, 1e-5);
      }
    }
  }
}

TEST_F(ServiceTest, EveryDocumentedErrorHasItsCodeAndNamesTheLimit) {
  ExpectError(IdsRequest("wavelet", {{1, 2}}), StatusCode::NOT_FOUND,
              "model \"wavelet\" not found; available: none, sinusoidal");
  ExpectError(IdsRequest("rope", {}), StatusCode::INVALID_ARGUMENT,
              "no inputs");
  v1::EmbedRequest empty_input = IdsRequest("rope", {{1, 2}});
  empty_input.add_inputs();
  ExpectError(empty_input, StatusCode::INVALID_ARGUMENT, "inputs[1] is empty");
  ExpectError(IdsRequest("rope", {{1, 2}, {}}), StatusCode::INVALID_ARGUMENT,
              "inputs[1] has no token ids");
  v1::EmbedRequest empty_text;
  empty_text.add_inputs()->set_text("");
  ExpectError(empty_text, StatusCode::INVALID_ARGUMENT, "empty text");
  ExpectError(IdsRequest("rope", {{1, 300}}), StatusCode::INVALID_ARGUMENT,
              "id 300, outside the vocabulary [0, 300)");
  ExpectError(IdsRequest("rope", {{-4}}), StatusCode::INVALID_ARGUMENT,
              "id -4");
  v1::EmbedRequest layer = IdsRequest("rope", {{1, 2}});
  layer.mutable_attention()->add_layers(2);
  ExpectError(layer, StatusCode::INVALID_ARGUMENT,
              "attention layer index 2 is out of range");
  v1::EmbedRequest head = IdsRequest("rope", {{1, 2}});
  head.mutable_attention()->add_layers(0);
  head.mutable_attention()->add_heads(4);
  ExpectError(head, StatusCode::INVALID_ARGUMENT, "has 4 heads [0, 4)");
  v1::EmbedRequest hidden = IdsRequest("rope", {{1, 2}});
  hidden.mutable_hidden_states()->add_layers(3);
  ExpectError(hidden, StatusCode::INVALID_ARGUMENT,
              "hidden state index 3 is out of range: model \"rope\" has 2 "
              "layers, so hidden states 0 (the embedding output) to 2, or -3 "
              "to -1");
  hidden.mutable_hidden_states()->set_layers(0, -4);
  ExpectError(hidden, StatusCode::INVALID_ARGUMENT, "hidden state index -4");
  hidden.mutable_hidden_states()->set_layers(0, 2);
  hidden.mutable_hidden_states()->add_layers(-1);
  ExpectError(hidden, StatusCode::INVALID_ARGUMENT,
              "hidden state index -1 repeats layer 2");
  v1::EmbedRequest pooled_only = IdsRequest("rope", {{1, 2}});
  pooled_only.mutable_hidden_states()->set_pooled(true);
  ExpectError(pooled_only, StatusCode::INVALID_ARGUMENT,
              "hidden_states.pooled given without hidden_states.layers");
  // Past the length with truncate false (unset truncates).
  auto refusing = [](v1::EmbedRequest r) {
    r.set_truncate(false);
    return r;
  };
  ExpectError(refusing(IdsRequest("learned", {std::vector<int64_t>(25, 7)})),
              StatusCode::INVALID_ARGUMENT,
              "25 tokens; model \"learned\" accepts at most 24 (its learned "
              "position table has 24 positions)");
  ExpectError(refusing(IdsRequest("rope", {std::vector<int64_t>(201, 7)})),
              StatusCode::INVALID_ARGUMENT, "max_input_tokens is 200");
}

TEST_F(ServiceTest, TruncateCutsToTheLearnedTable) {
  v1::EmbedRequest request =
      IdsRequest("learned", {std::vector<int64_t>(30, 7)});
  request.set_truncate(true);
  v1::EmbedResponse response;
  ASSERT_TRUE(Call(server_->stub(), request, &response).ok());
  EXPECT_EQ(response.results(0).num_tokens(), 24);
  EXPECT_TRUE(response.results(0).truncated());
}

// Speaks grpc.reflection.v1alpha by hand (no reflection protos ship here):
// writes each request, reads one response per request.
class ReflectionCall
    : public grpc::ClientBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  ReflectionCall(grpc::GenericStub& stub, std::vector<std::string> requests)
      : requests_(std::move(requests)) {
    stub.PrepareBidiStreamingCall(&context_,
                                  "/grpc.reflection.v1alpha.ServerReflection/"
                                  "ServerReflectionInfo",
                                  {}, this);
    WriteNext();
    StartRead(&in_);
    StartCall();
  }

  // Responses as raw bytes once the call is done.
  std::vector<std::string> Wait(grpc::Status* status) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return done_; });
    *status = status_;
    return responses_;
  }

  void OnWriteDone(bool ok) override {
    if (ok) WriteNext();
  }
  void OnReadDone(bool ok) override {
    if (!ok) return;
    std::vector<grpc::Slice> slices;
    in_.Dump(&slices);
    std::string bytes;
    for (const auto& sl : slices) {
      bytes.append(reinterpret_cast<const char*>(sl.begin()), sl.size());
    }
    responses_.push_back(bytes);
    StartRead(&in_);
  }
  void OnDone(const grpc::Status& s) override {
    std::lock_guard<std::mutex> lock(mu_);
    status_ = s;
    done_ = true;
    cv_.notify_one();
  }

 private:
  void WriteNext() {
    if (next_ == requests_.size()) {
      StartWritesDone();
      return;
    }
    grpc::Slice slice(requests_[next_++]);
    out_ = grpc::ByteBuffer(&slice, 1);
    StartWrite(&out_);
  }

  grpc::ClientContext context_;
  std::vector<std::string> requests_;
  size_t next_ = 0;
  grpc::ByteBuffer out_, in_;
  std::vector<std::string> responses_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  grpc::Status status_;
};

// A length-delimited protobuf field (tag byte, one-byte length, bytes).
std::string Field(char tag, const std::string& value) {
  return std::string(1, tag) + std::string(1, char(value.size())) + value;
}

TEST_F(ServiceTest, ReflectionListsTheServicesAndServesTheSchema) {
  grpc::GenericStub stub(server_->channel());
  // list_services = field 7; file_containing_symbol = field 4.
  ReflectionCall call(
      stub, {Field(0x3a, "*"), Field(0x22, "encoder.v1.EncoderService")});
  grpc::Status status;
  std::vector<std::string> responses = call.Wait(&status);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(responses.size(), 2u);
  EXPECT_NE(responses[0].find("encoder.v1.EncoderService"), std::string::npos);
  EXPECT_NE(responses[0].find("grpc.health.v1.Health"), std::string::npos);
  EXPECT_NE(responses[1].find("encoder/v1/encoder.proto"), std::string::npos);
  EXPECT_NE(responses[1].find("EmbedStream"), std::string::npos);
  EXPECT_NE(responses[1].find("DiagnoseRequest"), std::string::npos);
}

TEST(ServiceLimits, OversizedResponseIsRefusedBeforeCompute) {
  TestServerOptions options;
  options.limits.max_send_message_bytes = 64 << 10;
  TestServer server(options);
  // 2 layers x 4 heads x 100^2 floats = 320 kB of maps > 64 kB.
  v1::EmbedRequest request = IdsRequest("rope", {std::vector<int64_t>(100, 7)});
  request.mutable_attention()->add_layers(0);
  request.mutable_attention()->add_layers(1);
  v1::EmbedResponse response;
  grpc::Status s = Call(server.stub(), request, &response);
  EXPECT_EQ(s.error_code(), StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(s.error_message().find("--max-send-message-bytes"),
            std::string::npos)
      << s.error_message();
  EXPECT_NE(s.error_message().find("average_heads"), std::string::npos);
  // The averaged maps of one layer fit.
  request.mutable_attention()->clear_layers();
  request.mutable_attention()->add_layers(0);
  request.mutable_attention()->set_average_heads(true);
  EXPECT_TRUE(Call(server.stub(), request, &response).ok());
  // Hidden states count too: 3 x 100 tokens x 32 x 4 bytes = 38 kB fit,
  // with 300 tokens 115 kB do not; pooled, they fit again.
  v1::EmbedRequest states = IdsRequest("rope", {std::vector<int64_t>(100, 7)});
  for (int layer : {0, 1, 2}) states.mutable_hidden_states()->add_layers(layer);
  EXPECT_TRUE(Call(server.stub(), states, &response).ok());
  states.add_inputs()->CopyFrom(states.inputs(0));
  states.add_inputs()->CopyFrom(states.inputs(0));
  s = Call(server.stub(), states, &response);
  EXPECT_EQ(s.error_code(), StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(s.error_message().find("pooled hidden states"), std::string::npos)
      << s.error_message();
  states.mutable_hidden_states()->set_pooled(true);
  EXPECT_TRUE(Call(server.stub(), states, &response).ok());
}

TEST(ServiceLimits, FullQueueFailsAtOnceWithTheLimit) {
  TestServerOptions options;
  options.batching.max_queued_sequences = 2;
  TestServer server(options);
  v1::EmbedResponse response;
  grpc::Status s =
      Call(server.stub(), IdsRequest("none", {{1}, {2}, {3}}), &response);
  EXPECT_EQ(s.error_code(), StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(s.error_message().find("3 requested > --max-queued-sequences=2"),
            std::string::npos)
      << s.error_message();
  EXPECT_TRUE(
      Call(server.stub(), IdsRequest("none", {{1}, {2}}), &response).ok());
}

TEST(ServiceHealth, NotServingAndUnavailableUntilModelsAreSet) {
  TestServerOptions options;
  options.set_models = false;
  TestServer server(options);
  auto health_of = [&](const std::string& service) {
    // grpc.health.v1.HealthCheckRequest{service} by hand: field 1, string.
    std::string request =
        "\x0a" + std::string(1, char(service.size())) + service;
    grpc::GenericStub generic(server.channel());
    grpc::ClientContext context;
    grpc::ByteBuffer out, in;
    grpc::Slice slice(request);
    out = grpc::ByteBuffer(&slice, 1);
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    grpc::Status status;
    generic.UnaryCall(&context, "/grpc.health.v1.Health/Check", {}, &out, &in,
                      [&](grpc::Status s) {
                        std::lock_guard<std::mutex> lock(mu);
                        status = s;
                        done = true;
                        cv.notify_one();
                      });
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return done; });
    EXPECT_TRUE(status.ok()) << status.error_message();
    std::vector<grpc::Slice> slices;
    in.Dump(&slices);
    std::string bytes;
    for (const auto& sl : slices) {
      bytes.append(reinterpret_cast<const char*>(sl.begin()), sl.size());
    }
    // HealthCheckResponse{status = 1 SERVING | 2 NOT_SERVING}: 08 xx.
    return bytes.size() == 2 && bytes[0] == 0x08 ? int(bytes[1]) : -1;
  };
  EXPECT_EQ(health_of(""), 2);
  EXPECT_EQ(health_of("encoder.v1.EncoderService"), 2);
  v1::EmbedResponse response;
  grpc::Status s = Call(server.stub(), IdsRequest("", {{1, 2}}), &response);
  EXPECT_EQ(s.error_code(), StatusCode::UNAVAILABLE);
  EXPECT_NE(s.error_message().find("loading"), std::string::npos);
  server.SetModels();
  EXPECT_EQ(health_of(""), 1);
  EXPECT_EQ(health_of("encoder.v1.EncoderService"), 1);
  EXPECT_TRUE(Call(server.stub(), IdsRequest("", {{1, 2}}), &response).ok());
  EXPECT_EQ(response.model(), "sinusoidal");
}

}  // namespace
}  // namespace encoder::testing
