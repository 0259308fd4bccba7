// Packed binary embeddings (EmbedRequest.embedding_type): the pooled
// vector's sign bits, eight to a byte with the first value in the high bit,
// as uint8 (UBINARY) or shifted by -128 as int8 (BINARY); and scalar INT8 /
// UINT8 bytes in per-dimension ranges. The bits are
// computed here from the same call's float vector; the match with
// sentence-transformers' quantize_embeddings on real weights is in
// tests/conformance/quantized.py.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "tests/service/test_server.h"

namespace encoder::testing {
namespace {

std::vector<uint8_t> SignBits(const std::vector<float>& v) {
  std::vector<uint8_t> bytes((v.size() + 7) / 8, 0);
  for (size_t i = 0; i < v.size(); ++i) {
    if (v[i] > 0) bytes[i / 8] = bytes[i / 8] | (1 << (7 - i % 8));
  }
  return bytes;
}

TEST(PackedEmbeddings, SignBitsOfTheFloatVector) {
  TestServer server;
  const std::vector<std::vector<int64_t>> inputs = {{1, 5, 9, 2},
                                                    {7, 7, 3, 11, 40, 2}};
  for (const int dimensions : {0, 20}) {
    v1::EmbedRequest request = IdsRequest("rope", inputs);
    request.set_normalize(true);
    if (dimensions > 0) request.set_dimensions(dimensions);
    v1::EmbedResponse floats;
    ASSERT_TRUE(Call(server.stub(), request, &floats).ok());
    for (const auto type :
         {v1::EMBEDDING_TYPE_BINARY, v1::EMBEDDING_TYPE_UBINARY}) {
      request.set_embedding_type(type);
      v1::EmbedResponse packed;
      const grpc::Status s = Call(server.stub(), request, &packed);
      ASSERT_TRUE(s.ok()) << s.error_message();
      for (int i = 0; i < 2; ++i) {
        const std::vector<float> v = Floats(floats.results(i).pooled());
        std::vector<uint8_t> want = SignBits(v);
        if (type == v1::EMBEDDING_TYPE_BINARY) {
          for (uint8_t& b : want) b = static_cast<uint8_t>(b - 128);
        }
        const v1::Tensor& t = packed.results(i).pooled();
        const std::string what = "input " + std::to_string(i) + " dimensions " +
                                 std::to_string(dimensions);
        EXPECT_EQ(t.dtype(), type == v1::EMBEDDING_TYPE_BINARY
                                 ? v1::DTYPE_INT8
                                 : v1::DTYPE_UINT8)
            << what;
        ASSERT_EQ(t.shape_size(), 1) << what;
        EXPECT_EQ(t.shape(0), static_cast<int64_t>((v.size() + 7) / 8)) << what;
        EXPECT_EQ(std::vector<uint8_t>(t.data().begin(), t.data().end()), want)
            << what;
      }
    }
  }
  v1::EmbedRequest bad = IdsRequest("rope", inputs);
  bad.set_embedding_type(static_cast<v1::EmbeddingType>(9));
  v1::EmbedResponse out;
  const grpc::Status s = Call(server.stub(), bad, &out);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("embedding_type 9"), std::string::npos)
      << s.error_message();
}

// int8 / uint8: q = clip(floor((v - min) / step), 0, 255), step = (max -
// min) / 255 (1 where max equals min), int8 = q - 128, in float32; the
// ranges are the caller's or the call's own per-dimension min and max.
std::vector<uint8_t> Scalar(const std::vector<float>& v,
                            const std::vector<float>& lo,
                            const std::vector<float>& hi, bool int8) {
  std::vector<uint8_t> out;
  for (size_t d = 0; d < v.size(); ++d) {
    float step = (hi[d] - lo[d]) / 255.0f;
    if (step == 0.0f) step = 1.0f;
    float q = std::floor((v[d] - lo[d]) / step);
    q = q < 0.0f ? 0.0f : (q > 255.0f ? 255.0f : q);
    out.push_back(int8 ? static_cast<uint8_t>(static_cast<int>(q) - 128)
                       : static_cast<uint8_t>(q));
  }
  return out;
}

TEST(PackedEmbeddings, ScalarBytesFromOwnAndGivenRanges) {
  TestServer server;
  const std::vector<std::vector<int64_t>> inputs = {
      {1, 5, 9, 2}, {7, 7, 3, 11, 40, 2}, {4, 2}};
  v1::EmbedRequest request = IdsRequest("rope", inputs);
  v1::EmbedResponse floats;
  ASSERT_TRUE(Call(server.stub(), request, &floats).ok());
  std::vector<std::vector<float>> v;
  for (int i = 0; i < 3; ++i) v.push_back(Floats(floats.results(i).pooled()));
  const size_t width = v[0].size();
  std::vector<float> lo(width), hi(width);
  for (size_t d = 0; d < width; ++d) {
    lo[d] = std::min({v[0][d], v[1][d], v[2][d]});
    hi[d] = std::max({v[0][d], v[1][d], v[2][d]});
  }
  // Given ranges: narrower than the values in the first half of the
  // dimensions (so some are clipped), a single point in dimension 1.
  std::vector<float> given_lo = lo, given_hi = hi;
  for (size_t d = 0; d < width / 2; ++d) {
    const float mid = 0.5f * (lo[d] + hi[d]);
    given_lo[d] = mid - 0.1f * (hi[d] - lo[d]);
    given_hi[d] = mid + 0.1f * (hi[d] - lo[d]);
  }
  given_lo[1] = given_hi[1] = v[0][1];
  for (const bool int8 : {true, false}) {
    for (const bool given : {false, true}) {
      request.set_embedding_type(int8 ? v1::EMBEDDING_TYPE_INT8
                                      : v1::EMBEDDING_TYPE_UINT8);
      request.clear_quantization_ranges();
      if (given) {
        for (size_t d = 0; d < width; ++d) {
          request.mutable_quantization_ranges()->add_min(given_lo[d]);
          request.mutable_quantization_ranges()->add_max(given_hi[d]);
        }
      }
      v1::EmbedResponse out;
      const grpc::Status s = Call(server.stub(), request, &out);
      ASSERT_TRUE(s.ok()) << s.error_message();
      const std::vector<float>& want_lo = given ? given_lo : lo;
      const std::vector<float>& want_hi = given ? given_hi : hi;
      EXPECT_EQ(std::vector<float>(out.quantization_ranges().min().begin(),
                                   out.quantization_ranges().min().end()),
                want_lo);
      EXPECT_EQ(std::vector<float>(out.quantization_ranges().max().begin(),
                                   out.quantization_ranges().max().end()),
                want_hi);
      for (int i = 0; i < 3; ++i) {
        const v1::Tensor& t = out.results(i).pooled();
        const std::string what = std::string(int8 ? "int8" : "uint8") +
                                 (given ? " given" : " own") + " input " +
                                 std::to_string(i);
        EXPECT_EQ(t.dtype(), int8 ? v1::DTYPE_INT8 : v1::DTYPE_UINT8) << what;
        ASSERT_EQ(t.shape_size(), 1) << what;
        EXPECT_EQ(t.shape(0), static_cast<int64_t>(width)) << what;
        EXPECT_EQ(std::vector<uint8_t>(t.data().begin(), t.data().end()),
                  Scalar(v[i], want_lo, want_hi, int8))
            << what;
      }
    }
  }
  // Ranges with a float type, of the wrong width, or inverted.
  request.set_embedding_type(v1::EMBEDDING_TYPE_FLOAT);
  v1::EmbedResponse out;
  EXPECT_EQ(Call(server.stub(), request, &out).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  request.set_embedding_type(v1::EMBEDDING_TYPE_UINT8);
  request.mutable_quantization_ranges()->add_min(0.0f);
  EXPECT_EQ(Call(server.stub(), request, &out).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  request.clear_quantization_ranges();
  for (size_t d = 0; d < width; ++d) {
    request.mutable_quantization_ranges()->add_min(1.0f);
    request.mutable_quantization_ranges()->add_max(d == 3 ? 0.5f : 2.0f);
  }
  const grpc::Status inverted = Call(server.stub(), request, &out);
  EXPECT_EQ(inverted.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(inverted.error_message().find("dimension 3"), std::string::npos)
      << inverted.error_message();
}

}  // namespace
}  // namespace encoder::testing
