// Packed binary embeddings (EmbedRequest.embedding_type): the pooled
// vector's sign bits, eight to a byte with the first value in the high bit,
// as uint8 (UBINARY) or shifted by -128 as int8 (BINARY). The bits are
// computed here from the same call's float vector; the match with
// sentence-transformers' quantize_embeddings on real weights is in
// tests/conformance/quantized.py.
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace encoder::testing
