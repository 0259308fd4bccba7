// core::Tokenize and core::Decode (both fronts' Tokenize / Decode and
// /tokenize / /decode), and prompts on the Embed path, on fake models with
// the byte tokenizer: [CLS] = 1, [SEP] = 2, byte b = b + 4.
#include "server/core/tokenize.h"

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "tests/core/core_test_util.h"

namespace encoder::testing {
namespace {

constexpr int64_t kOffset = tokenizer::ByteTokenizer::kByteOffset;

std::vector<int64_t> Bytes(const std::string& text) {
  std::vector<int64_t> ids = {tokenizer::ByteTokenizer::kCls};
  for (unsigned char c : text) ids.push_back(c + kOffset);
  ids.push_back(tokenizer::ByteTokenizer::kSep);
  return ids;
}

core::TokenizeQuery Texts(std::vector<std::string> texts) {
  core::TokenizeQuery q;
  for (size_t i = 0; i < texts.size(); ++i) {
    q.texts.push_back({texts[i], "texts[" + std::to_string(i) + "]"});
  }
  return q;
}

FakeModelOptions Prompted() {
  FakeModelOptions o;
  o.prompts = {{"query", "q: "}, {"doc", "d: "}};
  o.default_prompt_name = "query";
  return o;
}

TEST(CoreTokenize, EncodesEachTextWithItsOffsets) {
  FakeCatalog catalog;
  auto answer = core::Tokenize(catalog, Texts({"hi", "abc"}), {});
  ASSERT_TRUE(answer.ok()) << answer.status();
  EXPECT_EQ(answer->model->name(), "fake");
  ASSERT_EQ(answer->encodings.size(), 2u);
  EXPECT_EQ(answer->encodings[0].encoding.ids, Bytes("hi"));
  EXPECT_EQ(answer->encodings[1].encoding.ids, Bytes("abc"));
  EXPECT_EQ(answer->texts[1], "abc");
  EXPECT_EQ(answer->encodings[1].encoding.byte_offsets[2].start, 1);
}

TEST(CoreTokenize, ThePromptGoesFirstOnlyWhenAsked) {
  FakeCatalog catalog({Prompted()});
  EXPECT_EQ(
      core::Tokenize(catalog, Texts({"hi"}), {})->encodings[0].encoding.ids,
      Bytes("hi"));
  core::TokenizeQuery q = Texts({"hi"});
  q.prompt_name = "";  // the model's default
  auto answer = core::Tokenize(catalog, q, {});
  ASSERT_TRUE(answer.ok()) << answer.status();
  EXPECT_EQ(answer->texts[0], "q: hi");
  EXPECT_EQ(answer->encodings[0].encoding.ids, Bytes("q: hi"));
  q.prompt_name = "doc";
  EXPECT_EQ(core::Tokenize(catalog, q, {})->texts[0], "d: hi");
  q.prompt_name = "title";
  EXPECT_EQ(core::Tokenize(catalog, q, {}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(CoreTokenize, TruncatesToTheModelsLengthOrTheCallers) {
  FakeCatalog catalog;
  core::TokenizeQuery q = Texts({std::string(40, 'x')});
  q.truncate = true;
  auto model_length = core::Tokenize(catalog, q, {});
  ASSERT_TRUE(model_length.ok()) << model_length.status();
  EXPECT_EQ(model_length->encodings[0].encoding.ids.size(), 16u);
  EXPECT_TRUE(model_length->encodings[0].truncated);
  q.max_length = 5;
  EXPECT_EQ(core::Tokenize(catalog, q, {})->encodings[0].encoding.ids.size(),
            5u);
  q.max_length = -1;
  EXPECT_EQ(core::Tokenize(catalog, q, {}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(CoreTokenize, RefusalsNameTheProblem) {
  core::ServiceLimits limits;
  limits.max_tokenize_texts_per_request = 2;
  FakeCatalog catalog({{}, {.name = "ids", .tokenizer = false}});
  auto none = core::Tokenize(catalog, Texts({}), limits);
  EXPECT_EQ(none.status().code(), absl::StatusCode::kInvalidArgument);
  auto many = core::Tokenize(catalog, Texts({"a", "b", "c"}), limits);
  EXPECT_EQ(many.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(
      many.status().message(),
      "3 texts in one request; at most 2 (--max-tokenize-texts-per-request)"))
      << many.status();
  core::TokenizeQuery unknown = Texts({"a"});
  unknown.model = "nope";
  EXPECT_EQ(core::Tokenize(catalog, unknown, limits).status().code(),
            absl::StatusCode::kNotFound);
  core::TokenizeQuery ids_only = Texts({"a"});
  ids_only.model = "ids";
  auto no_tokenizer = core::Tokenize(catalog, ids_only, limits);
  EXPECT_EQ(no_tokenizer.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(
      absl::StrContains(no_tokenizer.status().message(), "token ids only"))
      << no_tokenizer.status();
  auto bad_utf8 = core::Tokenize(catalog, Texts({"ok", "a\xff"}), limits);
  EXPECT_EQ(bad_utf8.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StartsWith(bad_utf8.status().message(), "texts[1]: "))
      << bad_utf8.status();
}

TEST(CoreDecode, DecodesEachListAndNamesABadOne) {
  core::ServiceLimits limits;
  limits.max_tokenize_texts_per_request = 2;
  FakeCatalog catalog;
  core::DecodeQuery q;
  q.ids = {Bytes("hi"), Bytes("yo")};
  auto with_specials = core::Decode(catalog, q, limits);
  ASSERT_TRUE(with_specials.ok()) << with_specials.status();
  ASSERT_EQ(with_specials->texts.size(), 2u);
  EXPECT_TRUE(absl::StrContains(with_specials->texts[0], "hi"));
  q.skip_special_tokens = true;
  EXPECT_EQ(core::Decode(catalog, q, limits)->texts,
            (std::vector<std::string>{"hi", "yo"}));
  q.ids = {{5}, {1 << 20}};
  q.field = "ids";
  auto outside = core::Decode(catalog, q, limits);
  EXPECT_EQ(outside.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StartsWith(outside.status().message(), "ids[1]: "))
      << outside.status();
  q.ids = {{5}, {6}, {7}};
  auto many = core::Decode(catalog, q, limits);
  EXPECT_TRUE(absl::StrContains(many.status().message(),
                                "3 id lists in one request; at most 2"))
      << many.status();
  q.ids.clear();
  EXPECT_EQ(core::Decode(catalog, q, limits).status().message(),
            "no ids to decode");
}

TEST(CorePrompts, EmbedTextsGetTheDefaultPromptUnlessTheCallNamesAnother) {
  FakeCore f({}, {Prompted()});
  auto defaulted = Embed(f.core, TextQuery({"hi"}));
  ASSERT_TRUE(defaulted.ok()) << defaulted.status();
  // "q: hi" is 5 bytes + [CLS] + [SEP].
  EXPECT_EQ(defaulted->inputs[0].result.pooled[0], 7);
  core::EmbedQuery own = TextQuery({"hi"});
  own.prompt = "";
  EXPECT_EQ(Embed(f.core, own)->inputs[0].result.pooled[0], 4);
  core::EmbedQuery both = TextQuery({"hi"});
  both.prompt = "x";
  both.prompt_name = "doc";
  EXPECT_EQ(Embed(f.core, both).status().code(),
            absl::StatusCode::kInvalidArgument);
  std::vector<std::vector<int64_t>> sent;
  for (const api::EmbedSpec& s : f.model().ran()) {
    sent.push_back(s.token_ids);
  }
  EXPECT_EQ(sent,
            (std::vector<std::vector<int64_t>>{Bytes("q: hi"), Bytes("hi")}));
}

}  // namespace
}  // namespace encoder::testing
