// Diagnose's validation in the core (core::BuildDiagnoseOptions) over a
// fake model: each refusal with the limit it names, the defaults of a
// query that leaves fields at zero, the extrapolation grid, and that a
// refused call never reaches the model.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/synchronization/notification.h"
#include "server/core/diagnose_request.h"
#include "server/core/inference.h"
#include "tests/core/core_test_util.h"
#include "tests/core/fake_model.h"

namespace encoder::testing {
namespace {

using core::BuildDiagnoseOptions;
using core::DiagnoseLimits;
using core::DiagnoseQuery;
using Input = core::DiagnoseQuery::Input;

DiagnoseQuery Ids(std::vector<int64_t> ids) {
  DiagnoseQuery q;
  q.input = Input::kTokenIds;
  q.token_ids = std::move(ids);
  return q;
}

DiagnoseQuery Random(int64_t length, uint64_t seed = 7) {
  DiagnoseQuery q;
  q.input = Input::kRandom;
  q.random_length = length;
  q.random_seed = seed;
  return q;
}

// The refusal's message, or "" when the query was accepted.
std::string Refusal(const DiagnoseQuery& q, const FakeModel& model,
                    const DiagnoseLimits& limits = {}) {
  auto built = BuildDiagnoseOptions(q, model, limits);
  if (built.ok()) return "";
  EXPECT_EQ(built.status().code(), absl::StatusCode::kInvalidArgument)
      << built.status();
  return std::string(built.status().message());
}

class CoreDiagnoseTest : public ::testing::Test {
 protected:
  FakeModel model_;  // a learned table of 16 positions
};

TEST_F(CoreDiagnoseTest, RefusesAQueryWithoutAnUsableInput) {
  EXPECT_EQ(Refusal(DiagnoseQuery{}, model_),
            "no input: set token_ids, text or random");
  DiagnoseQuery text;
  text.input = Input::kText;
  EXPECT_EQ(Refusal(text, model_), "text is empty");
  EXPECT_EQ(Refusal(Random(0), model_), "random.length must be > 0");
  EXPECT_EQ(Refusal(Ids({}), model_), "the input has no tokens");
  EXPECT_EQ(Refusal(Ids({1, 2, 100000}), model_),
            absl::StrCat("token id 100000 is outside the vocabulary [0, ",
                         model_.description().config.vocab_size, ")"));
  EXPECT_EQ(Refusal(Ids({-1}), model_),
            absl::StrCat("token id -1 is outside the vocabulary [0, ",
                         model_.description().config.vocab_size, ")"));
}

TEST_F(CoreDiagnoseTest, LengthLimitIsTheSmallerOfTheFlagAndTheModel) {
  // The model's table ends at 16; the flag allows 512.
  EXPECT_EQ(Refusal(Random(16), model_), "");
  EXPECT_EQ(Refusal(Random(17), model_),
            "the input has 17 tokens; Diagnose accepts at most 16 for model "
            "\"fake\" (--max-diagnose-tokens=512, model limit 16)");
  DiagnoseLimits tight;
  tight.max_tokens = 4;
  EXPECT_EQ(Refusal(Random(5), model_, tight),
            "the input has 5 tokens; Diagnose accepts at most 4 for model "
            "\"fake\" (--max-diagnose-tokens=4, model limit 16)");
  EXPECT_EQ(Refusal(Ids({1, 2, 3, 4, 5}), model_, tight),
            Refusal(Random(5), model_, tight));
}

TEST_F(CoreDiagnoseTest, TextIsTokenizedByTheModelsTokenizer) {
  DiagnoseQuery q;
  q.input = Input::kText;
  q.text = "abc";
  q.text_options.add_special_tokens = false;
  auto built = BuildDiagnoseOptions(q, model_, {});
  ASSERT_TRUE(built.ok()) << built.status();
  tokenizer::EncodeOptions plain;
  plain.add_special_tokens = false;
  auto ids = model_.tokenizer()->Encode("abc", plain);
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(built->token_ids, ids->ids);
}

TEST_F(CoreDiagnoseTest, RandomIdsAreSeededAndInTheVocabulary) {
  auto a = BuildDiagnoseOptions(Random(12, 3), model_, {});
  auto b = BuildDiagnoseOptions(Random(12, 3), model_, {});
  auto c = BuildDiagnoseOptions(Random(12, 4), model_, {});
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(a->token_ids, b->token_ids);
  EXPECT_NE(a->token_ids, c->token_ids);
  ASSERT_EQ(a->token_ids.size(), 12u);
  for (int64_t id : a->token_ids) {
    EXPECT_GE(id, 0);
    EXPECT_LT(id, model_.description().config.vocab_size);
  }
}

TEST_F(CoreDiagnoseTest, NoProbeNamedRunsAllButExtrapolation) {
  auto all = BuildDiagnoseOptions(Random(8), model_, {});
  ASSERT_TRUE(all.ok());
  EXPECT_TRUE(all->permutation && all->shift && all->structure &&
              all->attention_stats);
  EXPECT_FALSE(all->extrapolation.has_value());
  DiagnoseQuery one = Random(8);
  one.shift = true;
  auto some = BuildDiagnoseOptions(one, model_, {});
  ASSERT_TRUE(some.ok());
  EXPECT_TRUE(some->shift);
  EXPECT_FALSE(some->permutation || some->structure || some->attention_stats);
}

TEST_F(CoreDiagnoseTest, ProbeParametersAreCheckedAgainstTheirRanges) {
  DiagnoseQuery q = Random(4);
  q.permutation_order = {0, 1, 2};
  EXPECT_EQ(Refusal(q, model_),
            "permutation_order has 3 entries; the input has 4 tokens");
  q.permutation_order = {3, 2, 1, 0};
  EXPECT_EQ(Refusal(q, model_), "");

  q = Random(4);
  q.shift_offset = core::kMaxShiftOffset;
  EXPECT_EQ(Refusal(q, model_), "");
  q.shift_offset = -core::kMaxShiftOffset - 1;
  EXPECT_EQ(Refusal(q, model_),
            "shift_offset -1048577 is out of range [-1048576, 1048576]");

  q = Random(4);
  DiagnoseLimits limits;
  limits.max_structure_positions = 40;
  auto defaulted = BuildDiagnoseOptions(q, model_, limits);
  ASSERT_TRUE(defaulted.ok());
  EXPECT_EQ(defaulted->structure_positions, 40);  // min(64, the limit)
  q.structure_positions = 41;
  EXPECT_EQ(Refusal(q, model_, limits),
            "structure_positions 41 must be in [2, 40] "
            "(--max-structure-positions)");
  q.structure_positions = 1;
  EXPECT_NE(Refusal(q, model_, limits), "");
  q.structure = false;
  q.shift = true;  // the structure probe off: its size is not checked
  EXPECT_EQ(Refusal(q, model_, limits), "");

  q = Random(4);
  q.tolerance = -1e-9;
  EXPECT_TRUE(absl::StartsWith(Refusal(q, model_), "tolerance -1e-09 must"));
  q.tolerance = std::numeric_limits<double>::quiet_NaN();
  EXPECT_NE(Refusal(q, model_), "");
  q.tolerance = std::numeric_limits<double>::infinity();
  EXPECT_NE(Refusal(q, model_), "");
}

TEST_F(CoreDiagnoseTest, ExtrapolationGridDefaultsAndLimits) {
  DiagnoseQuery q = Random(4, 11);
  q.extrapolation = true;
  auto built = BuildDiagnoseOptions(q, model_, {});
  ASSERT_TRUE(built.ok()) << built.status();
  ASSERT_TRUE(built->extrapolation.has_value());
  // Six lengths from T/8 to 2T, geometric (T = 16): 2 * 16^(k/5), rounded.
  EXPECT_EQ(built->extrapolation->lengths,
            (std::vector<int64_t>{2, 3, 6, 11, 18, 32}));
  EXPECT_EQ(built->extrapolation->prefix_length, 2);  // min(8, shortest)
  // A random source is drawn at the longest length with the query's seed:
  // its first ids are the base input's.
  const std::vector<int64_t>& source = built->extrapolation->source;
  ASSERT_EQ(source.size(), 32u);
  EXPECT_EQ(std::vector<int64_t>(source.begin(), source.begin() + 4),
            built->token_ids);

  DiagnoseLimits limits;
  limits.max_extrapolation_tokens = 20;
  q.extrapolation_lengths = {4, 8, 21};
  EXPECT_TRUE(absl::StartsWith(
      Refusal(q, model_, limits),
      "extrapolation length 21 is over this model's limit of 20 tokens"));
  q.extrapolation_lengths = {4, 4};
  EXPECT_EQ(Refusal(q, model_, limits),
            "extrapolation_options.lengths must be >= 1 and strictly "
            "increasing");
  q.extrapolation_lengths = {4, 8};
  q.extrapolation_prefix_length = 5;
  EXPECT_EQ(Refusal(q, model_, limits),
            "extrapolation_options.prefix_length 5 must be in [1, 4] (the "
            "shortest length)");
  q.extrapolation_lengths.clear();
  q.extrapolation_prefix_length = 0;
  q.extrapolation_points = 33;
  EXPECT_EQ(Refusal(q, model_, limits),
            "extrapolation_options.points 33 must be in [1, 32]");
  q.extrapolation_points = 0;
  q.extrapolation_max_multiple = 64.5;
  EXPECT_EQ(Refusal(q, model_, limits),
            "extrapolation_options.max_multiple 64.5 must be in (0, 64]");
  // The default grid clipped at the limit, its duplicates dropped.
  q.extrapolation_max_multiple = 0;
  auto clipped = BuildDiagnoseOptions(q, model_, limits);
  ASSERT_TRUE(clipped.ok()) << clipped.status();
  EXPECT_EQ(clipped->extrapolation->lengths,
            (std::vector<int64_t>{2, 3, 6, 11, 18, 20}));
}

TEST(CoreDiagnoseGridTest, DefaultGridIsGeometricAndClipped) {
  // 64 * 16^(k/5): 64, 111.4, 194.0, 337.8, 588.1, 1024.
  EXPECT_EQ(core::DefaultGrid(512, 2.0, 6, 2048),
            (std::vector<int64_t>{64, 111, 194, 338, 588, 1024}));
  EXPECT_EQ(core::DefaultGrid(512, 2.0, 6, 300),
            (std::vector<int64_t>{64, 111, 194, 300}));
  EXPECT_EQ(core::DefaultGrid(512, 2.0, 1, 2048), (std::vector<int64_t>{1024}));
}

TEST(CoreDiagnoseCallTest, ARefusedQueryNeverReachesTheModel) {
  FakeCore fake;
  absl::Notification done;
  absl::Status status;
  bool rendered = false;
  core::Call call;
  call.rpc = "Diagnose";
  fake.core.Diagnose(
      call, "fake", Random(17),
      [&rendered](core::DiagnoseAnswer) {
        rendered = true;
        return absl::OkStatus();
      },
      [&](const absl::Status& s) {
        status = s;
        done.Notify();
      });
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(10)));
  // The fake's probes answer UNIMPLEMENTED: INVALID_ARGUMENT came from the
  // core's validation, before the model.
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_FALSE(rendered);
  // A valid query goes on to the model.
  absl::Notification second;
  fake.core.Diagnose(
      call, "fake", Random(8),
      [](core::DiagnoseAnswer) { return absl::OkStatus(); },
      [&](const absl::Status& s) {
        status = s;
        second.Notify();
      });
  ASSERT_TRUE(second.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_EQ(status.code(), absl::StatusCode::kUnimplemented) << status;
}

}  // namespace
}  // namespace encoder::testing
