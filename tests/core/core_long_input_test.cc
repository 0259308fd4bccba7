// Inputs past the model's length, on a fake model of 16 positions: the
// policies (truncate, refuse, chunk, extrapolate) and where each comes
// from (the request, the model's repository entry, the server's default),
// checked by what reached the model.
#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "server/core/long_input.h"
#include "tests/core/core_test_util.h"

namespace encoder::testing {
namespace {

constexpr int64_t kCls = tokenizer::ByteTokenizer::kCls;
constexpr int64_t kSep = tokenizer::ByteTokenizer::kSep;

TEST(CoreLongInput, TruncateByDefaultKeepsTheFirstTokensAndCountsTheRest) {
  FakeCore f;
  // 30 bytes + [CLS] + [SEP] = 32 tokens; the model takes 16.
  auto answer = Embed(f.core, TextQuery({std::string(30, 'a')}));
  ASSERT_TRUE(answer.ok()) << answer.status();
  const core::EmbeddedInput& in = answer->inputs[0];
  EXPECT_TRUE(in.truncated);
  EXPECT_EQ(in.truncated_tokens, 16);
  EXPECT_EQ(answer->truncated_tokens, 16);
  // [CLS] 'a' x 14 [SEP]: the template's tokens survive the cut.
  const float a = tokenizer::ByteTokenizer::kByteOffset + 'a';
  EXPECT_EQ(in.result.pooled,
            (std::vector<float>{16, kCls + 14 * a + kSep, kCls, kSep}));
}

TEST(CoreLongInput, TruncateFalseRefusesNamingTheLengthAndTheLimit) {
  FakeCore f;
  core::EmbedQuery q = IdsQuery({{5}, Ids(17)});
  q.long_input = LongInputPolicy::kRefuse;
  auto answer = Embed(f.core, q);
  EXPECT_EQ(answer.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(answer.status().message(), "inputs[1]"))
      << answer.status();
  EXPECT_TRUE(absl::StrContains(answer.status().message(), "16"))
      << answer.status();
  EXPECT_EQ(f.model().calls(), 0);
}

TEST(CoreLongInput, TheServersDefaultAndTheModelsEntryDecide) {
  core::ServiceLimits limits;
  limits.long_input = LongInputPolicy::kRefuse;
  FakeCore f(limits,
             {{.name = "plain"},
              {.name = "chunky", .long_input = LongInputPolicy::kChunk}});
  auto refused = Embed(f.core, IdsQuery({Ids(40)}, "plain"));
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  auto chunked = Embed(f.core, IdsQuery({Ids(40)}, "chunky"));
  ASSERT_TRUE(chunked.ok()) << chunked.status();
  EXPECT_GT(chunked->inputs[0].chunks, 1);
  EXPECT_EQ(core::DefaultLongInput(*f.catalog.Find("plain"), limits).policy,
            LongInputPolicy::kRefuse);
  EXPECT_EQ(core::DefaultLongInput(*f.catalog.Find("chunky"), limits).policy,
            LongInputPolicy::kChunk);
}

TEST(CoreLongInput, ChunkingSendsWindowsTheModelTakesAndCoversTheInput) {
  FakeCore f;
  core::EmbedQuery q = IdsQuery({Ids(40)});
  q.long_input = LongInputPolicy::kChunk;
  q.return_chunks = true;
  auto answer = Embed(f.core, q);
  ASSERT_TRUE(answer.ok()) << answer.status();
  const core::EmbeddedInput& in = answer->inputs[0];
  EXPECT_FALSE(in.truncated);
  ASSERT_GE(in.chunks, 3);
  ASSERT_EQ(static_cast<int64_t>(in.chunk_vectors.size()), in.chunks);
  const std::vector<api::EmbedSpec> ran = f.model().ran();
  ASSERT_EQ(static_cast<int64_t>(ran.size()), in.chunks);
  for (const api::EmbedSpec& s : ran) EXPECT_LE(s.token_ids.size(), 16u);
  // The windows' spans tile the 40 ids without a gap.
  int64_t next = 0;
  for (const core::ChunkVector& c : in.chunk_vectors) {
    EXPECT_LE(c.span.token_begin, next);
    EXPECT_GT(c.span.token_end, next);
    next = c.span.token_end;
  }
  EXPECT_EQ(next, 40);
}

TEST(CoreLongInput, ChunksPerInputAreBounded) {
  core::ServiceLimits limits;
  limits.max_chunks_per_input = 2;
  FakeCore f(limits);
  core::EmbedQuery q = IdsQuery({Ids(40)});
  q.long_input = LongInputPolicy::kChunk;
  auto answer = Embed(f.core, q);
  EXPECT_EQ(answer.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(answer.status().message(), "2"))
      << answer.status();
  EXPECT_EQ(f.model().calls(), 0);
}

TEST(CoreLongInput, ALearnedTableCannotExtrapolateAndAutoChunksIt) {
  core::ServiceLimits limits;
  limits.long_input = LongInputPolicy::kAuto;
  FakeCore f(limits);
  core::EmbedQuery q = IdsQuery({Ids(40)});
  q.long_input = LongInputPolicy::kExtrapolate;
  EXPECT_EQ(Embed(f.core, q).status().code(),
            absl::StatusCode::kFailedPrecondition);
  const core::LongInputDefault d =
      core::DefaultLongInput(*f.catalog.Find(""), limits);
  EXPECT_EQ(d.policy, LongInputPolicy::kChunk);
  EXPECT_FALSE(d.reason.empty());
  auto answer = Embed(f.core, IdsQuery({Ids(40)}));
  ASSERT_TRUE(answer.ok()) << answer.status();
  EXPECT_GT(answer->inputs[0].chunks, 1);
}

// A rotary code scaled to reach 48 tokens (the model's length 16): auto
// runs inputs up to 48 whole, in windows past it, and says which number
// decided; the server's extrapolation limit still caps it.
TEST(CoreLongInput, AutoRunsAScaledRotaryCodeWholeUpToItsReach) {
  core::ServiceLimits limits;
  limits.long_input = LongInputPolicy::kAuto;
  FakeModelOptions scaled;
  scaled.scaled_length = 48;
  FakeCore f(limits, {scaled});
  const core::LongInputDefault d =
      core::DefaultLongInput(*f.catalog.Find(""), limits);
  EXPECT_EQ(d.policy, LongInputPolicy::kExtrapolate);
  EXPECT_EQ(d.whole_up_to, 48);
  EXPECT_TRUE(absl::StrContains(d.reason, "reaches 48 tokens")) << d.reason;
  EXPECT_TRUE(absl::StrContains(d.reason, "whole up to 48")) << d.reason;
  auto whole = Embed(f.core, IdsQuery({Ids(40)}));
  ASSERT_TRUE(whole.ok()) << whole.status();
  EXPECT_EQ(whole->inputs[0].chunks, 1);
  ASSERT_FALSE(f.model().ran().empty());
  EXPECT_EQ(f.model().ran().back().token_ids.size(), 40u);
  auto windows = Embed(f.core, IdsQuery({Ids(60)}));
  ASSERT_TRUE(windows.ok()) << windows.status();
  EXPECT_GT(windows->inputs[0].chunks, 1);
  // The extrapolation limit (--max-extrapolation-tokens: the diagnose
  // limits', which the core takes) below the scaled reach wins.
  core::DiagnoseLimits diagnose;
  diagnose.max_extrapolation_tokens = 30;
  limits.max_extrapolation_tokens = 30;
  FakeCore capped(limits, {scaled}, diagnose);
  EXPECT_EQ(
      core::DefaultLongInput(*capped.catalog.Find(""), limits).whole_up_to, 30);
  auto chunked = Embed(capped.core, IdsQuery({Ids(40)}));
  ASSERT_TRUE(chunked.ok()) << chunked.status();
  EXPECT_GT(chunked->inputs[0].chunks, 1);
}

// Measured at load: the period held up to 32 tokens (2x the model's 16)
// and broke at 48. auto runs whole up to 32 whatever the scaling's own
// reach says, windows past it, and the reason names the numbers.
TEST(CoreLongInput, AutoRunsWholeUpToTheMeasuredReach) {
  core::ServiceLimits limits;
  limits.long_input = LongInputPolicy::kAuto;
  FakeModelOptions measured;
  measured.scaled_length = 64;
  api::MeasuredReach m;
  m.max_drift = 0.05;
  m.reference_length = 16;
  m.limit = 64;
  m.source = {5, 6, 7, 8};
  m.lengths = {20, 24, 32, 48};
  m.drifts = {0.01, 0.03, 0.02, 0.4};
  m.holds_up_to = 32;
  m.breaks_at = 48;
  measured.measured_reach = m;
  FakeCore f(limits, {measured});
  const core::LongInputDefault d =
      core::DefaultLongInput(*f.catalog.Find(""), limits);
  EXPECT_EQ(d.policy, LongInputPolicy::kExtrapolate);
  EXPECT_EQ(d.whole_up_to, 32);
  for (const char* says :
       {"measured at load on a repeated 4-token input",
        "moves at most 0.03 of its 16-token value up to 32 tokens",
        "0.4 at 48 tokens (over --long-input-drift 0.05)",
        "run whole up to 32 tokens, in windows beyond"}) {
    EXPECT_TRUE(absl::StrContains(d.reason, says)) << d.reason;
  }
  auto whole = Embed(f.core, IdsQuery({Ids(32)}));
  ASSERT_TRUE(whole.ok()) << whole.status();
  EXPECT_EQ(whole->inputs[0].chunks, 1);
  auto windows = Embed(f.core, IdsQuery({Ids(33)}));
  ASSERT_TRUE(windows.ok()) << windows.status();
  EXPECT_GT(windows->inputs[0].chunks, 1);

  // Broken at the first length past the model's: windows, and why.
  m.lengths = {20};
  m.drifts = {0.2};
  m.holds_up_to = 16;
  m.breaks_at = 20;
  measured.measured_reach = m;
  FakeCore broken(limits, {measured});
  const core::LongInputDefault b =
      core::DefaultLongInput(*broken.catalog.Find(""), limits);
  EXPECT_EQ(b.policy, LongInputPolicy::kChunk);
  EXPECT_TRUE(
      absl::StrContains(b.reason,
                        "moves 0.2 of its 16-token value at 20 tokens (over "
                        "--long-input-drift 0.05)"))
      << b.reason;
  auto chunked = Embed(broken.core, IdsQuery({Ids(20)}));
  ASSERT_TRUE(chunked.ok()) << chunked.status();
  EXPECT_GT(chunked->inputs[0].chunks, 1);
}

// An extrapolation limit that is not past the model's length leaves auto
// nothing to run whole, and the reason says that, not the scheme.
TEST(CoreLongInput, AutoSaysWhenTheLimitIsNotPastTheLength) {
  core::ServiceLimits limits;
  limits.long_input = LongInputPolicy::kAuto;
  limits.max_extrapolation_tokens = 16;
  core::DiagnoseLimits diagnose;
  diagnose.max_extrapolation_tokens = 16;
  FakeModelOptions scaled;
  scaled.scaled_length = 48;
  FakeCore f(limits, {scaled}, diagnose);
  const core::LongInputDefault d =
      core::DefaultLongInput(*f.catalog.Find(""), limits);
  EXPECT_EQ(d.policy, LongInputPolicy::kChunk);
  EXPECT_TRUE(absl::StrContains(
      d.reason,
      "its extrapolation limit, 16 tokens (max_extrapolation_tokens "
      "or --max-extrapolation-tokens), is not past its 16"))
      << d.reason;
}

}  // namespace
}  // namespace encoder::testing
