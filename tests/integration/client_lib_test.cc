// Pure pieces of encoder-client: tensor codec, JSON conversion, health
// status names, input-file parsing, the .npy header, flag parsing and bench
// statistics.
#include <cmath>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "client/bench_stats.h"
#include "client/commands.h"
#include "client/embed_file.h"
#include "client/errors.h"
#include "client/health.h"
#include "client/inputs.h"
#include "client/json_output.h"
#include "client/tensor_codec.h"

namespace encoder_client {
namespace {

using encoder::v1::DType;

TEST(HalfTest, KnownValuesAndRounding) {
  EXPECT_EQ(FloatToHalfBits(1.0f), 0x3c00);
  EXPECT_EQ(FloatToHalfBits(-2.0f), 0xc000);
  EXPECT_EQ(FloatToHalfBits(65504.0f), 0x7bff);
  EXPECT_EQ(FloatToHalfBits(65519.0f), 0x7bff);
  EXPECT_EQ(FloatToHalfBits(65520.0f), 0x7c00);
  EXPECT_EQ(FloatToHalfBits(std::ldexp(1.0f, -24)), 0x0001);
  EXPECT_EQ(FloatToHalfBits(std::ldexp(1.0f, -26)), 0x0000);
  EXPECT_EQ(FloatToHalfBits(0.1f), 0x2e66);
  // Ties go to the even mantissa.
  EXPECT_EQ(FloatToHalfBits(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
  EXPECT_EQ(FloatToHalfBits(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
  EXPECT_TRUE(std::isnan(HalfBitsToFloat(FloatToHalfBits(NAN))));
  EXPECT_FLOAT_EQ(HalfBitsToFloat(0x3555), 0.333251953125f);
}

TEST(HalfTest, EveryFiniteHalfRoundTrips) {
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    if ((bits & 0x7c00) == 0x7c00 && (bits & 0x3ff) != 0) continue;  // NaN
    ASSERT_EQ(FloatToHalfBits(HalfBitsToFloat(bits)), bits) << bits;
  }
}

TEST(BFloat16Test, EveryNonNanValueRoundTripsAndTiesGoEven) {
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    if ((bits & 0x7f80) == 0x7f80 && (bits & 0x7f) != 0) continue;
    ASSERT_EQ(FloatToBFloat16Bits(BFloat16BitsToFloat(bits)), bits) << bits;
  }
  float tie_down, tie_up;
  const uint32_t down_bits = 0x3f808000, up_bits = 0x3f818000;
  std::memcpy(&tie_down, &down_bits, 4);
  std::memcpy(&tie_up, &up_bits, 4);
  EXPECT_EQ(FloatToBFloat16Bits(tie_down), 0x3f80);
  EXPECT_EQ(FloatToBFloat16Bits(tie_up), 0x3f82);
}

TEST(TensorCodecTest, DecodesLittleEndianFloat32) {
  encoder::v1::Tensor tensor;
  tensor.add_shape(2);
  tensor.set_dtype(encoder::v1::DTYPE_FLOAT32);
  // 1.5f = 0x3fc00000, -2.0f = 0xc0000000, low byte first.
  tensor.set_data(std::string("\x00\x00\xc0\x3f\x00\x00\x00\xc0", 8));
  std::vector<double> values;
  std::string error;
  ASSERT_TRUE(DecodeTensor(tensor, &values, &error)) << error;
  EXPECT_EQ(values, (std::vector<double>{1.5, -2.0}));
}

TEST(TensorCodecTest, RejectsWrongSizeAndUnspecifiedDtype) {
  encoder::v1::Tensor tensor;
  tensor.add_shape(3);
  tensor.set_dtype(encoder::v1::DTYPE_INT64);
  tensor.set_data(std::string(16, '\0'));
  std::vector<double> values;
  std::string error;
  EXPECT_FALSE(DecodeTensor(tensor, &values, &error));
  EXPECT_NE(error.find("24"), std::string::npos) << error;
  tensor.set_dtype(encoder::v1::DTYPE_UNSPECIFIED);
  EXPECT_FALSE(DecodeTensor(tensor, &values, &error));
}

TEST(TensorCodecTest, EncodeDecodeRoundTripsEveryDtype) {
  const std::vector<double> values = {0.0, -3.0, 0.5, 1024.0, -7.25, 96.0};
  for (DType dtype : {encoder::v1::DTYPE_FLOAT32, encoder::v1::DTYPE_FLOAT16,
                      encoder::v1::DTYPE_BFLOAT16, encoder::v1::DTYPE_INT64,
                      encoder::v1::DTYPE_FLOAT64}) {
    const encoder::v1::Tensor tensor = EncodeTensor({2, 3}, values, dtype);
    EXPECT_EQ(tensor.data().size(), 6u * ElementSize(dtype));
    std::vector<double> decoded;
    std::string error;
    ASSERT_TRUE(DecodeTensor(tensor, &decoded, &error)) << error;
    for (size_t i = 0; i < values.size(); ++i) {
      const double expected =
          dtype == encoder::v1::DTYPE_INT64 ? std::trunc(values[i]) : values[i];
      EXPECT_EQ(decoded[i], expected) << DTypeName(dtype) << " " << i;
    }
  }
}

TEST(JsonOutputTest, NestsValuesToShape) {
  EXPECT_EQ(NestValues({1, 2, 3, 4, 5, 6}, {2, 3}),
            nlohmann::ordered_json::parse("[[1,2,3],[4,5,6]]"));
  EXPECT_EQ(NestValues({7}, {}), nlohmann::ordered_json(7.0));
  EXPECT_TRUE(NestValues({1, 2}, {3}).is_null());
  EXPECT_TRUE(TensorToJson(encoder::v1::Tensor()).is_null());
}

TEST(JsonOutputTest, EmbedResponseFlattensPooledAndKeepsAttentionShape) {
  encoder::v1::EmbedResponse response;
  response.set_model("rope");
  auto* result = response.add_results();
  *result->mutable_pooled() =
      EncodeTensor({2}, {0.5, 1.0}, encoder::v1::DTYPE_FLOAT32);
  *result->mutable_attention() =
      EncodeTensor({1, 2, 2}, {1, 0, 0.5, 0.5}, encoder::v1::DTYPE_FLOAT32);
  result->set_num_tokens(2);
  result->mutable_batch()->set_padded_tokens(int64_t{1} << 40);
  const nlohmann::ordered_json json = EmbedResponseToJson(response);
  const nlohmann::ordered_json& out = json["results"][0];
  EXPECT_EQ(out["pooled"], nlohmann::ordered_json::parse("[0.5, 1.0]"));
  EXPECT_EQ(out["attention"]["shape"],
            nlohmann::ordered_json::parse("[1,2,2]"));
  EXPECT_EQ(out["attention"]["values"],
            nlohmann::ordered_json::parse("[[[1,0],[0.5,0.5]]]"));
  // The proto3 JSON mapping prints 64-bit integers as strings.
  EXPECT_EQ(out["batch"]["padded_tokens"], "1099511627776");
  EXPECT_EQ(out["truncated"], false);
  EXPECT_FALSE(out.contains("token_embeddings"));
}

TEST(JsonOutputTest, PresenceAndEnumsFollowTheProto) {
  EmbedOptions options;
  options.inputs.emplace_back().set_text("x");
  options.pooling = "first";
  nlohmann::ordered_json json = MessageToJson(BuildEmbedRequest(options));
  EXPECT_FALSE(json.contains("normalize"));
  EXPECT_EQ(json["pooling"], "POOLING_FIRST");
  EXPECT_EQ(json["inputs"][0],
            nlohmann::ordered_json::parse(R"({"text": "x"})"));
  options.normalize = false;
  json = MessageToJson(BuildEmbedRequest(options));
  EXPECT_EQ(json["normalize"], false);

  encoder::v1::PositionalInfo info;
  (*info.mutable_params())["base"] = "10000";
  EXPECT_EQ(MessageToJson(info)["params"],
            nlohmann::ordered_json::parse(R"({"base": "10000"})"));
}

TEST(HealthTest, StatusNamesComeFromHealthProto) {
  EXPECT_EQ(ServingStatusName(1), "SERVING");
  EXPECT_EQ(ServingStatusName(2), "NOT_SERVING");
  EXPECT_EQ(ServingStatusName(3), "SERVICE_UNKNOWN");
  EXPECT_EQ(ServingStatusName(9), "STATUS_9");
}

TEST(JsonOutputTest, CamelCaseUsesProtobufJsonNames) {
  encoder::v1::EmbedResponse response;
  auto* result = response.add_results();
  *result->mutable_token_embeddings() =
      EncodeTensor({1, 2}, {0.25, -1.0}, encoder::v1::DTYPE_FLOAT32);
  result->set_num_tokens(1);
  const nlohmann::ordered_json json =
      EmbedResponseToJson(response, /*camel_case=*/true);
  EXPECT_EQ(json["results"][0]["numTokens"], 1);
  EXPECT_EQ(json["results"][0]["tokenEmbeddings"],
            nlohmann::ordered_json::parse("[[0.25, -1.0]]"));
}

TEST(EmbedFileTest, ParsesTextAndJsonLines) {
  std::istringstream in(
      "{\"text\": \"h\\u00e9\", \"id\": \"a\"}\r\n"
      "\n"
      "  \n"
      "{\"ids\": [1, 2, 3], \"id\": 7, \"label\": \"ignored\"}\n");
  std::vector<FileInput> inputs;
  std::string error;
  ASSERT_TRUE(ReadInputs(in, InputFormat::kJsonl, &inputs, &error)) << error;
  ASSERT_EQ(inputs.size(), 2u);
  EXPECT_EQ(inputs[0].line, 1);
  EXPECT_EQ(inputs[0].input.text(), "h\xc3\xa9");
  EXPECT_EQ(inputs[0].id, "a");
  EXPECT_EQ(inputs[1].line, 4);
  EXPECT_EQ(inputs[1].input.token_ids().ids_size(), 3);
  EXPECT_EQ(inputs[1].id, 7);

  std::istringstream text("first\n\nthird line\r\n");
  inputs.clear();
  ASSERT_TRUE(ReadInputs(text, InputFormat::kText, &inputs, &error));
  ASSERT_EQ(inputs.size(), 2u);
  EXPECT_EQ(inputs[1].line, 3);
  EXPECT_EQ(inputs[1].input.text(), "third line");

  // Bytes that are not UTF-8 (a lone continuation byte, an overlong '/',
  // a surrogate) travel as text_bytes for the server to refuse.
  for (const std::string bad : {"a\x80", "\xc0\xaf", "\xed\xa0\x80"}) {
    std::istringstream raw(bad + "\n");
    inputs.clear();
    ASSERT_TRUE(ReadInputs(raw, InputFormat::kText, &inputs, &error));
    ASSERT_EQ(inputs.size(), 1u);
    EXPECT_EQ(inputs[0].input.text_bytes(), bad);
  }
  std::istringstream good("h\xc3\xa9 \xf0\x9f\x99\x82\n");
  inputs.clear();
  ASSERT_TRUE(ReadInputs(good, InputFormat::kText, &inputs, &error));
  EXPECT_TRUE(inputs[0].input.has_text());
}

TEST(EmbedFileTest, MalformedLinesNameTheirLine) {
  for (const char* bad :
       {"{\"text\": 1}", "[1]", "{\"ids\": [1, 2.5]}",
        "{\"ids\": [1], \"text\": \"x\"}", "{}",
        "{\"text\": \"x\", \"id\": [1]}", "{\"text\": \"x\""}) {
    std::istringstream in(std::string("{\"text\": \"ok\"}\n") + bad + "\n");
    std::vector<FileInput> inputs;
    std::string error;
    EXPECT_FALSE(ReadInputs(in, InputFormat::kJsonl, &inputs, &error)) << bad;
    EXPECT_EQ(error.rfind("line 2: ", 0), 0u) << error;
  }
  EXPECT_EQ(FormatForPath("a/b.jsonl"), InputFormat::kJsonl);
  EXPECT_EQ(FormatForPath("b.ndjson"), InputFormat::kJsonl);
  EXPECT_EQ(FormatForPath("-"), InputFormat::kText);
}

TEST(EmbedFileTest, NpyHeaderIsAlignedVersionOne) {
  const std::string header = NpyHeader(3, 512);
  ASSERT_GE(header.size(), 10u);
  EXPECT_EQ(header.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
  const size_t length = static_cast<unsigned char>(header[8]) |
                        static_cast<unsigned char>(header[9]) << 8;
  EXPECT_EQ(header.size(), 10 + length);
  EXPECT_EQ(header.size() % 64, 0u);
  EXPECT_EQ(header.back(), '\n');
  EXPECT_NE(header.find("'shape': (3, 512)"), std::string::npos);
  EXPECT_NE(header.find("'descr': '<f4'"), std::string::npos);
}

TEST(EmbedFileTest, FailedInputRecordCarriesItsError) {
  FileInput input;
  input.line = 12;
  input.id = "doc-1";
  InputOutcome outcome;
  outcome.code = 3;
  outcome.message = "token id 10000 out of range";
  const FloatJson record = RecordJson(5, input, outcome);
  EXPECT_EQ(
      record.dump(),
      "{\"index\":5,\"line\":12,\"id\":\"doc-1\",\"error\":{\"code\":"
      "\"INVALID_ARGUMENT\",\"message\":\"token id 10000 out of range\"}}");
}

TEST(InputsTest, ParsesCommaSeparatedIntegers) {
  std::vector<int64_t> values;
  std::string error;
  ASSERT_TRUE(ParseIntList(" 1, 2 ,3", &values, &error)) << error;
  EXPECT_EQ(values, (std::vector<int64_t>{1, 2, 3}));
  ASSERT_TRUE(ParseIntList("", &values, &error));
  EXPECT_TRUE(values.empty());
  EXPECT_FALSE(ParseIntList("1,,2", &values, &error));
  EXPECT_FALSE(ParseIntList("1.5", &values, &error));
  EXPECT_FALSE(ParseIntList("99999999999999999999", &values, &error));
  std::vector<int32_t> narrow;
  EXPECT_FALSE(ParseInt32List("3000000000", &narrow, &error));
}

TEST(BenchStatsTest, PercentilesAndBatchHistogram) {
  std::vector<double> sorted;
  for (int i = 1; i <= 100; ++i) sorted.push_back(i);
  EXPECT_EQ(Percentile(sorted, 50), 50);
  EXPECT_EQ(Percentile(sorted, 99), 99);
  EXPECT_EQ(Percentile(sorted, 100), 100);
  EXPECT_EQ(Percentile({}, 50), 0);

  BenchStats a, b;
  a.requests_ok = 2;
  a.sequences_ok = 3;
  a.latencies_ms = {4.0, 2.0};
  a.batch_sizes = {{1, 1}, {2, 2}};
  b.batch_sizes = {{2, 1}};
  b.AddError("UNAVAILABLE", "down");
  a.Merge(b);
  const nlohmann::ordered_json report = BenchReportJson({"m"}, a, 1.0);
  EXPECT_EQ(report["requests"], 3);
  EXPECT_EQ(report["failed_requests"], 1);
  EXPECT_EQ(report["errors"]["UNAVAILABLE"], 1);
  EXPECT_EQ(report["batch_size"]["histogram"]["2"], 3);
  EXPECT_DOUBLE_EQ(report["batch_size"]["mean"].get<double>(), 7.0 / 4.0);
  EXPECT_DOUBLE_EQ(report["latency_ms"]["max"].get<double>(), 4.0);
  EXPECT_EQ(a.first_error_code, "UNAVAILABLE");
}

TEST(ErrorsTest, CodeNames) {
  EXPECT_EQ(StatusCodeName(5), "NOT_FOUND");
  EXPECT_EQ(StatusCodeName(16), "UNAUTHENTICATED");
  EXPECT_EQ(StatusCodeName(99), "CODE_99");
}

}  // namespace
}  // namespace encoder_client
