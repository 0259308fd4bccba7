#include "server/model/weights/safetensors.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <initializer_list>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace encoder::model {
namespace {

using ::testing::HasSubstr;

constexpr char kSource[] = "weights.safetensors";

// The 8-byte little-endian length prefix, built byte by byte.
std::string LengthPrefix(uint64_t n) {
  std::string out;
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>(n >> (8 * i)));
  return out;
}

// A file image assembled by hand: prefix, header text, data buffer.
std::string MakeFile(const std::string& header, const std::string& data) {
  return LengthPrefix(header.size()) + header + data;
}

// Raw little-endian bytes of `values` (the host is little-endian).
template <typename T>
std::string Raw(std::initializer_list<T> values) {
  std::string out(values.size() * sizeof(T), '\0');
  std::memcpy(out.data(), values.begin(), out.size());
  return out;
}

absl::Status Parse(const std::string& header, const std::string& data) {
  return ParseSafetensors(MakeFile(header, data), kSource).status();
}

// Expects InvalidArgument whose message names the source and each of `parts`.
void ExpectInvalid(const absl::Status& status,
                   std::initializer_list<std::string> parts) {
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  const std::string message(status.message());
  EXPECT_THAT(message, HasSubstr(kSource));
  for (const std::string& part : parts) EXPECT_THAT(message, HasSubstr(part));
}

std::string TensorBytes(const at::Tensor& tensor) {
  const at::Tensor c = tensor.contiguous();
  return std::string(static_cast<const char*>(c.data_ptr()), c.nbytes());
}

TEST(SafetensorsTest, RoundTripPreservesDtypesShapesValuesAndMetadata) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  const std::map<std::string, at::Tensor> tensors = {
      {"f32", at::arange(6, at::kFloat).reshape({2, 3}) * 0.1 - 0.2},
      {"f64", at::tensor({1.0 / 3.0, -1e300, 5e-324}, at::kDouble)},
      {"f16", at::tensor({0.5, -1.0, 65504.0}).to(at::kHalf)},
      {"bf16", at::tensor({1.5, -3.0e38, 0.0078125}).to(at::kBFloat16)},
      {"i64", at::tensor({kMax, kMin, int64_t{0}}, at::kLong)},
      {"i32", at::tensor({-7, 2147483647}, at::kInt)},
      {"i16", at::tensor({-32768, 12345}, at::kShort)},
      {"i8", at::tensor({-128, 127}, at::kChar)},
      {"u8", at::tensor({0, 200, 255}, at::kByte)},
      {"bool", at::tensor({1, 0, 1}).to(at::kBool)},
      {"scalar", at::scalar_tensor(7.25, at::kFloat)},
      {"empty", at::empty({0, 4}, at::kFloat)},
      {"transposed", at::arange(12, at::kLong).reshape({3, 4}).t()},
  };
  const std::map<std::string, std::string> metadata = {{"format", "pt"},
                                                       {"note", "ünïcode"}};
  absl::StatusOr<std::string> bytes = SerializeSafetensors(tensors, metadata);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  absl::StatusOr<SafetensorsFile> file = ParseSafetensors(*bytes, kSource);
  ASSERT_TRUE(file.ok()) << file.status();

  EXPECT_EQ(file->metadata, metadata);
  ASSERT_EQ(file->tensors.size(), tensors.size());
  for (const auto& [name, expected] : tensors) {
    SCOPED_TRACE(name);
    ASSERT_EQ(file->tensors.count(name), 1u);
    const at::Tensor& actual = file->tensors.at(name);
    EXPECT_EQ(actual.scalar_type(), expected.scalar_type());
    EXPECT_EQ(actual.sizes().vec(), expected.sizes().vec());
    EXPECT_TRUE(actual.device().is_cpu());
    EXPECT_TRUE(actual.is_contiguous());
    EXPECT_EQ(TensorBytes(actual), TensorBytes(expected));
  }
  const auto& out = file->tensors;
  EXPECT_EQ(out.at("i64")[0].item<int64_t>(), kMax);
  EXPECT_EQ(out.at("i64")[1].item<int64_t>(), kMin);
  EXPECT_EQ(out.at("scalar").dim(), 0);
  EXPECT_EQ(out.at("scalar").item<float>(), 7.25f);
  EXPECT_EQ(out.at("empty").numel(), 0);
  EXPECT_EQ(out.at("transposed")[0][1].item<int64_t>(), 4);
  EXPECT_EQ(out.at("u8")[2].item<uint8_t>(), 255);
  EXPECT_FALSE(out.at("bool")[1].item<bool>());
  EXPECT_EQ(out.at("f16")[2].item<float>(), 65504.0f);
}

TEST(SafetensorsTest, SerializedHeaderIsSortedAlignedAndSpacePadded) {
  absl::StatusOr<std::string> bytes = SerializeSafetensors(
      {{"b", at::tensor({1.0f, 2.0f})}, {"a", at::tensor({int64_t{3}})}},
      {{"k", "v"}});
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  ASSERT_GE(bytes->size(), 8u);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) {
    n = (n << 8) | static_cast<unsigned char>((*bytes)[i]);
  }
  EXPECT_EQ(n % 8, 0u);
  ASSERT_EQ(bytes->size(), 8 + n + 8 + 8);
  const std::string header = bytes->substr(8, n);
  EXPECT_EQ(header.front(), '{');
  const size_t close = header.rfind('}');
  EXPECT_EQ(header.find_first_not_of(' ', close + 1), std::string::npos);
  EXPECT_LT(header.find("\"a\""), header.find("\"b\""));
  EXPECT_THAT(header, HasSubstr("\"data_offsets\":[0,8]"));
  EXPECT_THAT(header, HasSubstr("\"data_offsets\":[8,16]"));
  EXPECT_EQ(bytes->substr(8 + n), Raw<int64_t>({3}) + Raw<float>({1.0f, 2.0f}));
}

TEST(SafetensorsTest, ParsesHandBuiltFile) {
  const std::string header =
      R"({"__metadata__":{"k":"v"},)"
      R"("w":{"dtype":"F32","shape":[2],"data_offsets":[8,16]},)"
      R"("n":{"dtype":"I64","shape":[],"data_offsets":[0,8]}}    )";
  absl::StatusOr<SafetensorsFile> file = ParseSafetensors(
      MakeFile(header, Raw<int64_t>({42}) + Raw<float>({1.5f, -2.0f})),
      kSource);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(file->metadata.at("k"), "v");
  ASSERT_EQ(file->tensors.size(), 2u);
  const at::Tensor& w = file->tensors.at("w");
  EXPECT_EQ(w.scalar_type(), at::kFloat);
  EXPECT_EQ(w.sizes().vec(), std::vector<int64_t>({2}));
  EXPECT_EQ(w[0].item<float>(), 1.5f);
  EXPECT_EQ(w[1].item<float>(), -2.0f);
  EXPECT_EQ(file->tensors.at("n").dim(), 0);
  EXPECT_EQ(file->tensors.at("n").item<int64_t>(), 42);
}

TEST(SafetensorsTest, EmptyHeaderIsAValidFileWithNoTensors) {
  absl::StatusOr<SafetensorsFile> file =
      ParseSafetensors(MakeFile("{}", ""), kSource);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_TRUE(file->tensors.empty());
  EXPECT_TRUE(file->metadata.empty());
}

TEST(SafetensorsTest, TensorsOwnTheirMemory) {
  auto bytes = std::make_unique<std::string>(
      MakeFile(R"({"w":{"dtype":"I32","shape":[3],"data_offsets":[0,12]}})",
               Raw<int32_t>({5, 6, 7})));
  absl::StatusOr<SafetensorsFile> file = ParseSafetensors(*bytes, kSource);
  ASSERT_TRUE(file.ok()) << file.status();
  const char* begin = bytes->data();
  const char* end = begin + bytes->size();
  const char* data = static_cast<const char*>(file->tensors.at("w").data_ptr());
  EXPECT_TRUE(data < begin || data >= end);
  std::fill(bytes->begin(), bytes->end(), '\xff');
  bytes.reset();
  EXPECT_EQ(file->tensors.at("w")[2].item<int32_t>(), 7);
}

TEST(SafetensorsTest, ReadsFileFromDisk) {
  const std::string path = testing::TempDir() + "/read_test.safetensors";
  absl::StatusOr<std::string> bytes =
      SerializeSafetensors({{"x", at::tensor({2.5, -4.0}, at::kDouble)}});
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  std::ofstream(path, std::ios::binary) << *bytes;
  absl::StatusOr<SafetensorsFile> file = ReadSafetensors(path);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(file->tensors.at("x")[1].item<double>(), -4.0);
}

TEST(SafetensorsTest, MissingFileIsNotFound) {
  const std::string path = testing::TempDir() + "/no_such.safetensors";
  absl::StatusOr<SafetensorsFile> file = ReadSafetensors(path);
  EXPECT_EQ(file.status().code(), absl::StatusCode::kNotFound) << file.status();
  EXPECT_THAT(std::string(file.status().message()), HasSubstr(path));
}

TEST(SafetensorsTest, SerializeRejectsUnsupportedDtypeAndNonCpuTensors) {
  absl::StatusOr<std::string> complex =
      SerializeSafetensors({{"c", at::zeros({2}, at::kComplexFloat)}});
  EXPECT_EQ(complex.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(complex.status().message()),
              HasSubstr("unsupported dtype"));
  absl::StatusOr<std::string> meta = SerializeSafetensors(
      {{"m", at::empty({2}, at::TensorOptions().device(at::kMeta))}});
  EXPECT_EQ(meta.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(meta.status().message()), HasSubstr("\"m\""));
  EXPECT_THAT(std::string(meta.status().message()), HasSubstr("CPU"));
}

TEST(SafetensorsTest, RejectsFileShorterThanLengthPrefix) {
  ExpectInvalid(ParseSafetensors("abc", kSource).status(),
                {"3 bytes", "shorter than the 8-byte header length"});
}

TEST(SafetensorsTest, RejectsHeaderLengthLargerThanFile) {
  ExpectInvalid(ParseSafetensors(LengthPrefix(100) + "{}", kSource).status(),
                {"header length 100 is larger than the 2 bytes"});
}

TEST(SafetensorsTest, RejectsHeaderLengthOverCap) {
  ExpectInvalid(
      ParseSafetensors(LengthPrefix(kMaxSafetensorsHeaderBytes + 1) + "{}",
                       kSource)
          .status(),
      {"header length 100000001 exceeds the limit of 100000000"});
}

TEST(SafetensorsTest, RejectsHeaderNotStartingWithBrace) {
  ExpectInvalid(Parse("[]", ""), {"does not start with '{'"});
  ExpectInvalid(Parse(" {}", ""), {"does not start with '{'"});
  ExpectInvalid(Parse("", ""), {"does not start with '{'"});
}

TEST(SafetensorsTest, RejectsMalformedJson) {
  ExpectInvalid(Parse(R"({"w": {"dtype": "F32",)", ""),
                {"header is not valid JSON"});
  ExpectInvalid(Parse("{}x", ""), {"header is not valid JSON"});
}

TEST(SafetensorsTest, RejectsEntryMissingAField) {
  ExpectInvalid(
      Parse(R"({"w":{"shape":[1],"data_offsets":[0,4]}})", Raw<float>({1})),
      {"tensor \"w\"", "missing \"dtype\""});
  ExpectInvalid(
      Parse(R"({"w":{"dtype":"F32","data_offsets":[0,4]}})", Raw<float>({1})),
      {"tensor \"w\"", "missing \"shape\""});
  ExpectInvalid(Parse(R"({"w":{"dtype":"F32","shape":[1]}})", Raw<float>({1})),
                {"tensor \"w\"", "missing \"data_offsets\""});
}

TEST(SafetensorsTest, RejectsEntryThatIsNotAnObject) {
  ExpectInvalid(Parse(R"({"w":[1,2]})", ""),
                {"tensor \"w\"", "entry is an array, not an object"});
}

TEST(SafetensorsTest, RejectsUnknownDtype) {
  ExpectInvalid(
      Parse(R"({"w":{"dtype":"F12","shape":[1],"data_offsets":[0,4]}})",
            Raw<float>({1})),
      {"tensor \"w\"", "unknown dtype \"F12\""});
}

TEST(SafetensorsTest, RejectsUnsignedDtypesLibTorchCannotHold) {
  for (const char* dtype : {"U16", "U32", "U64"}) {
    SCOPED_TRACE(dtype);
    ExpectInvalid(Parse(std::string(R"({"u":{"dtype":")") + dtype +
                            R"(","shape":[0],"data_offsets":[0,0]}})",
                        ""),
                  {"tensor \"u\"", std::string("unsupported dtype ") + dtype});
  }
}

TEST(SafetensorsTest, RejectsNegativeOrNonIntegerShape) {
  ExpectInvalid(
      Parse(R"({"w":{"dtype":"F32","shape":[-1,2],"data_offsets":[0,8]}})",
            Raw<float>({1, 2})),
      {"tensor \"w\"", "shape[0] is -1, not a non-negative integer"});
  ExpectInvalid(
      Parse(R"({"w":{"dtype":"F32","shape":[1,2.5],"data_offsets":[0,8]}})",
            Raw<float>({1, 2})),
      {"tensor \"w\"", "shape[1] is 2.5, not a non-negative integer"});
  ExpectInvalid(
      Parse(R"({"w":{"dtype":"F32","shape":["2"],"data_offsets":[0,8]}})",
            Raw<float>({1, 2})),
      {"tensor \"w\"", "shape[0] is a string"});
  ExpectInvalid(Parse(R"({"w":{"dtype":"F32","shape":2,"data_offsets":[0,8]}})",
                      Raw<float>({1, 2})),
                {"tensor \"w\"", "shape is 2, not an array"});
}

TEST(SafetensorsTest, RejectsShapeWhoseSizeOverflows) {
  // 2^62 * 4 wraps to 0 in 64 bits; it must not match the empty range.
  ExpectInvalid(Parse(R"({"w":{"dtype":"F32","shape":[4611686018427387904,4],)"
                      R"("data_offsets":[0,0]}})",
                      ""),
                {"tensor \"w\"", "more elements than int64 holds"});
  // 2^62 elements fit, but 2^62 * 8 bytes do not.
  ExpectInvalid(Parse(R"({"w":{"dtype":"F64","shape":[2147483648,2147483648],)"
                      R"("data_offsets":[0,0]}})",
                      ""),
                {"tensor \"w\"", "needs more than 2^64"});
}

TEST(SafetensorsTest, RejectsMalformedDataOffsets) {
  ExpectInvalid(
      Parse(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4,8]}})",
            Raw<float>({1, 2})),
      {"tensor \"w\"", "data_offsets must be [begin, end]", "array of 3"});
}

TEST(SafetensorsTest, RejectsBeginAfterEnd) {
  ExpectInvalid(
      Parse(R"({"w":{"dtype":"F32","shape":[0],"data_offsets":[8,4]}})",
            Raw<float>({1, 2})),
      {"tensor \"w\"", "data_offsets [8, 4] have begin > end"});
}

TEST(SafetensorsTest, RejectsEndBeyondBuffer) {
  ExpectInvalid(
      Parse(R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})",
            Raw<float>({1, 2})),
      {"tensor \"w\"", "data_offsets [0, 16] end beyond the 8-byte data"});
}

TEST(SafetensorsTest, RejectsSizeThatDoesNotMatchShapeAndDtype) {
  const absl::Status status =
      Parse(R"({"encoder.layers.0.linear1.weight":{"dtype":"F32",)"
            R"("shape":[2,3],"data_offsets":[0,12]}})",
            Raw<float>({1, 2, 3}));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(std::string(status.message()),
            "weights.safetensors: tensor \"encoder.layers.0.linear1.weight\": "
            "data_offsets [0, 12] hold 12 bytes but shape [2, 3] of F32 needs "
            "24");
}

TEST(SafetensorsTest, RejectsOverlappingTensors) {
  ExpectInvalid(
      Parse(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
            R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
            Raw<float>({1, 2, 3})),
      {"tensor \"b\"", "overlap tensor \"a\" at [0, 8]"});
}

TEST(SafetensorsTest, RejectsHoleBetweenTensors) {
  ExpectInvalid(
      Parse(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
            R"("b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
            Raw<float>({1, 2, 3})),
      {"tensor \"b\"", "hole of unused bytes [4, 8)"});
}

TEST(SafetensorsTest, RejectsTrailingBytes) {
  ExpectInvalid(
      Parse(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
            Raw<float>({1, 2})),
      {"4 trailing bytes after the last tensor"});
}

TEST(SafetensorsTest, RejectsMetadataThatIsNotStringToString) {
  ExpectInvalid(Parse(R"({"__metadata__":{"k":1}})", ""),
                {"__metadata__ key \"k\" is 1, not a string"});
  ExpectInvalid(Parse(R"({"__metadata__":["k"]})", ""),
                {"__metadata__ is an array, not an object"});
}

TEST(SafetensorsTest, RejectsDuplicateEntries) {
  ExpectInvalid(
      Parse(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
            R"("a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
            Raw<float>({1})),
      {"duplicate entry \"a\""});
}

TEST(SafetensorsTest, RejectsDeeplyNestedHeader) {
  const std::string header =
      "{\"x\":" + std::string(100000, '[') + std::string(100000, ']') + "}";
  ExpectInvalid(Parse(header, ""), {"nests deeper than"});
}

TEST(SafetensorsTest, RejectsBoolByteOtherThanZeroOrOne) {
  ExpectInvalid(
      Parse(R"({"m":{"dtype":"BOOL","shape":[3],"data_offsets":[0,3]}})",
            std::string("\x01\x00\x02", 3)),
      {"tensor \"m\"", "BOOL element 2 is byte 2"});
}

}  // namespace
}  // namespace encoder::model
