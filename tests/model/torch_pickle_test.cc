// ReadTorchStateDict on files torch.save wrote
// (tests/model/torch_pickle_fixtures.py made them, and wrote in
// expected.json what torch.load reads back): every tensor bit-exact, and
// the files it must refuse refused with their reason.
#include "server/model/weights/torch_pickle.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace encoder::model {
namespace {

using ::testing::HasSubstr;
using json = nlohmann::json;

std::string FixtureDir() {
  const char* source_dir = std::getenv("ENCODER_SOURCE_DIR");
  return std::string(source_dir != nullptr ? source_dir : ".") +
         "/tests/model/.fixtures/torch_pickle";
}

json Expected() {
  std::ifstream in(FixtureDir() + "/expected.json");
  return json::parse(in);
}

TEST(TorchPickle, ReadsEveryTensorAsTorchLoadDoes) {
  const json expected = Expected();
  int checked = 0;
  for (const auto& [name, want] : expected.items()) {
    if (!want.contains("tensors")) continue;
    SCOPED_TRACE(name);
    auto got = ReadTorchStateDict(FixtureDir() + "/" + name + ".pt");
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_EQ(got->size(), want["tensors"].size());
    for (const auto& [tensor_name, w] : want["tensors"].items()) {
      SCOPED_TRACE(tensor_name);
      ASSERT_EQ(got->count(tensor_name), 1u);
      const at::Tensor& t = got->at(tensor_name);
      EXPECT_EQ(std::string(c10::toString(t.scalar_type())),
                w["dtype"].get<std::string>() == "float32"    ? "Float"
                : w["dtype"].get<std::string>() == "float16"  ? "Half"
                : w["dtype"].get<std::string>() == "bfloat16" ? "BFloat16"
                : w["dtype"].get<std::string>() == "int64"    ? "Long"
                                                              : "?");
      EXPECT_EQ(t.sizes().vec(), w["shape"].get<std::vector<int64_t>>());
      EXPECT_TRUE(t.is_contiguous());
      const at::Tensor d = t.to(at::kDouble).reshape({-1});
      const auto values = w["values"].get<std::vector<double>>();
      ASSERT_EQ(d.numel(), static_cast<int64_t>(values.size()));
      for (size_t i = 0; i < values.size(); ++i) {
        ASSERT_EQ(d[i].item<double>(), values[i]) << "value " << i;
      }
      ++checked;
    }
  }
  EXPECT_GE(checked, 12);
}

TEST(TorchPickle, ViewsOfOneStorageOwnTheirValues) {
  auto got = ReadTorchStateDict(FixtureDir() + "/shared_views.pt");
  ASSERT_TRUE(got.ok()) << got.status();
  const float before = got->at("full")[1][2].item<float>();
  got->at("rows").fill_(7);
  EXPECT_EQ(got->at("full")[1][2].item<float>(), before);
}

TEST(TorchPickle, RefusesWhatIsNotADictionaryOfTensors) {
  const json expected = Expected();
  int checked = 0;
  for (const auto& [name, want] : expected.items()) {
    if (!want.contains("error")) continue;
    SCOPED_TRACE(name);
    const std::string path = FixtureDir() + "/" + name + ".pt";
    auto got = ReadTorchStateDict(path);
    ASSERT_FALSE(got.ok());
    EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(got.status().message(), HasSubstr(path));
    EXPECT_THAT(got.status().message(),
                HasSubstr(want["error"].get<std::string>()));
    ++checked;
  }
  EXPECT_EQ(checked, 3);
}

// A dict set as an item of itself (EMPTY_DICT, BINPUT, BINGETs, SETITEM,
// ...: what the fuzzer found) is refused, and the cycle it made is freed
// with the parser (the AddressSanitizer build checks that nothing leaks).
TEST(TorchPickle, ADictInsideItselfIsRefusedAndFreed) {
  std::string pickle = "\x80\x02}qh";
  pickle += std::string(4, 'h') + "s" + std::string(60, 'h');
  pickle += std::string(
      "\x00X\x01\x00\x00\x00"
      "e",
      7);
  auto got = ParseTorchPickle(
      pickle,
      [](const std::string&, at::ScalarType,
         int64_t) -> absl::StatusOr<at::Tensor> { return at::Tensor(); });
  EXPECT_FALSE(got.ok());
  // The same cycle in a pickle that ends well: a dict holding itself.
  const std::string complete("\x80\x02}q\x00h\x00h\x00s.", 11);
  auto whole = ParseTorchPickle(
      complete,
      [](const std::string&, at::ScalarType,
         int64_t) -> absl::StatusOr<at::Tensor> { return at::Tensor(); });
  ASSERT_FALSE(whole.ok());
  EXPECT_THAT(whole.status().message(), HasSubstr("text -> tensor"));
}

TEST(TorchPickle, RefusesAMissingFileAndATruncatedOne) {
  EXPECT_FALSE(ReadTorchStateDict(FixtureDir() + "/absent.pt").ok());
  std::ifstream in(FixtureDir() + "/state_dict.pt", std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)),
                    std::istreambuf_iterator<char>());
  const std::string cut = ::testing::TempDir() + "/cut.pt";
  std::ofstream(cut, std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  auto got = ReadTorchStateDict(cut);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace encoder::model
