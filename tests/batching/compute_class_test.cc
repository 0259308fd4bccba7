// Compute classes: a kind of work whose true cost on this CPU is not what
// the runner's estimate prices it at (attention statistics). A planted slow
// class, measured at start-up (MeasureComputeScale), keeps a small call
// within the bound beside a heavy request; unmeasured, the same call waits
// for whole batches; and the batcher learns a class's scale from the
// batches it runs.
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "server/batching/batch_profile.h"
#include "server/batching/batcher.h"
#include "tests/batching/batcher_fakes.h"

namespace encoder::batching {
namespace {

using namespace fakes;  // NOLINT(build/namespaces): the test doubles

// The planted model: a batch takes its items' priced compute at the padded
// length, times its class's true scale, over kTrueRate units per second;
// it asks its context every 2 ms, as a forward pass does between layers.
constexpr double kTrueRate = 1000;
constexpr std::array<double, kComputeClasses> kTrueScale = {1.0, 10.0};

class SlowClassRunner : public ModelRunner {
 public:
  absl::Status Run(const std::vector<const BatchItem*>& batch,
                   std::vector<ItemResult>* results,
                   const RunContext& context) override {
    int64_t longest = 0;
    for (const BatchItem* item : batch) {
      longest = std::max(longest, item->length);
    }
    double seconds = 0;
    for (const BatchItem* item : batch) {
      seconds += static_cast<double>(item->compute.At(longest)) *
                 kTrueScale[item->compute_class] / kTrueRate;
    }
    const absl::Time end = absl::Now() + absl::Seconds(seconds);
    while (absl::Now() < end) {
      if (absl::Status stop = context.Check(); !stop.ok()) return stop;
      absl::SleepFor(std::min(absl::Milliseconds(2), end - absl::Now()));
    }
    results->resize(batch.size());
    for (ItemResult& r : *results) {
      r.output = Echo{};
      r.bytes = 4;
    }
    return absl::OkStatus();
  }
};

// `count` items of `length` tokens, priced 1 unit per token, of class c.
std::vector<BatchItem> Items(int64_t count, int64_t length, ComputeClass c) {
  std::vector<BatchItem> items(count);
  for (BatchItem& item : items) {
    item.length = length;
    item.compute.per_token = 1;
    item.compute_class = c;
    item.work = FakeWork{1};
  }
  return items;
}

std::shared_ptr<Request> RequestOf(std::vector<BatchItem> items, Done* done) {
  auto request = std::make_shared<Request>();
  request->sequences = std::move(items);
  request->done = done->Callback();
  return request;
}

TEST(ComputeClassTest, MeasureComputeScaleFindsThePlantedScale) {
  SlowClassRunner runner;
  // Two items of 5 units: 0.1 s a run at ten times their price.
  auto scale =
      MeasureComputeScale(&runner, Items(2, 5, kStatisticsCompute), kTrueRate);
  ASSERT_TRUE(scale.ok()) << scale.status();
  EXPECT_GE(*scale, kTrueScale[kStatisticsCompute] * 0.99);
  EXPECT_LT(*scale, kTrueScale[kStatisticsCompute] * 1.3);
  auto plain =
      MeasureComputeScale(&runner, Items(2, 50, kPlainCompute), kTrueRate);
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_GE(*plain, 0.99);
  EXPECT_LT(*plain, 1.3);
  // Nothing to time, or no rate to time it by.
  EXPECT_EQ(MeasureComputeScale(&runner, {}, kTrueRate).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MeasureComputeScale(&runner, Items(1, 5, kStatisticsCompute), 0)
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  std::vector<BatchItem> unpriced = Items(1, 5, kStatisticsCompute);
  unpriced[0].compute = SequenceCost{};
  EXPECT_EQ(MeasureComputeScale(&runner, unpriced, kTrueRate).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// The longest a small call waits beside a heavy request of eight class-1
// sequences priced 60 ms each (600 ms each in truth), two executions, with
// `scale` as the batcher's start-up estimate of the class.
absl::Duration SmallCallWait(double scale) {
  SlowClassRunner runner;
  BatchOptions options = Options();
  options.executions = 2;
  options.max_batch_time = absl::Milliseconds(250);
  options.work_per_second = kTrueRate;
  options.compute_scale[kStatisticsCompute] = scale;
  Batcher batcher(&runner, options);
  Done heavy;
  auto big = RequestOf(Items(8, 60, kStatisticsCompute), &heavy);
  big->deadline = absl::Now() + absl::Seconds(4);  // ends the test's wait
  EXPECT_TRUE(batcher.Submit(big).ok());
  absl::SleepFor(absl::Milliseconds(50));  // both executions taken
  absl::Duration worst = absl::ZeroDuration();
  for (int call = 0; call < 3; ++call) {
    Done small;
    const absl::Time start = absl::Now();
    EXPECT_TRUE(
        batcher.Submit(RequestOf(Items(1, 10, kPlainCompute), &small)).ok());
    EXPECT_TRUE(small.Wait());
    EXPECT_TRUE(small.status().ok()) << small.status();
    worst = std::max(worst, absl::Now() - start);
  }
  EXPECT_TRUE(heavy.Wait());
  return worst;
}

TEST(ComputeClassTest, AMeasuredSlowClassKeepsSmallCallsWithinTheBound) {
  SlowClassRunner runner;
  auto measured =
      MeasureComputeScale(&runner, Items(2, 5, kStatisticsCompute), kTrueRate);
  ASSERT_TRUE(measured.ok()) << measured.status();
  // Measured: each heavy sequence is expected to take its 600 ms, runs in
  // a batch of its own, and a small call waits for one of them at most.
  const absl::Duration with = SmallCallWait(*measured);
  EXPECT_LE(with, absl::Seconds(1));
  // As priced: four heavy sequences fit the 250 ms bound, so both
  // executions take a batch of four (2.4 s in truth) and the small call
  // waits for one of them; the plant is what the first case is about.
  const absl::Duration without = SmallCallWait(1.0);
  EXPECT_GT(without, absl::Seconds(1));
  std::printf("small call's longest wait: %.0f ms measured, %.0f ms not\n",
              absl::ToDoubleMilliseconds(with),
              absl::ToDoubleMilliseconds(without));
}

TEST(ComputeClassTest, TheBatcherLearnsAClassScaleFromItsBatches) {
  SlowClassRunner runner;
  BatchOptions options = Options();
  options.work_per_second = kTrueRate;
  Batcher batcher(&runner, options);
  EXPECT_EQ(batcher.compute_scale(kStatisticsCompute), 1.0);
  // A class-1 batch of 30 units takes 0.3 s: its scale moves toward 10
  // (by 0.3 / 0.8 of the way), and the plain rate stays.
  Done slow;
  ASSERT_TRUE(
      batcher.Submit(RequestOf(Items(1, 30, kStatisticsCompute), &slow)).ok());
  ASSERT_TRUE(slow.Wait());
  ASSERT_TRUE(batcher.Drain(absl::Now() + kPatience));
  const double learnt = batcher.compute_scale(kStatisticsCompute);
  EXPECT_GT(learnt, 3.5);
  EXPECT_LT(learnt, 10.5);
  EXPECT_EQ(batcher.work_per_second(), kTrueRate);
}

TEST(ComputeClassTest, APlainBatchMovesTheRateAndNotAClasssOwnTime) {
  SlowClassRunner runner;
  BatchOptions options = Options();
  options.work_per_second = 100;  // a tenth of the truth
  options.compute_scale[kStatisticsCompute] = 4;
  Batcher batcher(&runner, options);
  Done plain;
  ASSERT_TRUE(
      batcher.Submit(RequestOf(Items(1, 300, kPlainCompute), &plain)).ok());
  ASSERT_TRUE(plain.Wait());
  ASSERT_TRUE(batcher.Drain(absl::Now() + kPatience));
  EXPECT_GT(batcher.work_per_second(), 300);
  EXPECT_LE(batcher.work_per_second(), kTrueRate * 1.01);
  // The class's own time per unit (4 / 100 s) stays: its scale is that
  // time at the new rate.
  EXPECT_NEAR(
      batcher.compute_scale(kStatisticsCompute) / batcher.work_per_second(),
      4.0 / 100, 1e-12);
}

TEST(ComputeClassTest, ScaleCostScalesBothTermsAndSaturates) {
  const SequenceCost c{10, 3};
  EXPECT_EQ(ScaleCost(c, 2.5).per_token, 25);
  EXPECT_EQ(ScaleCost(c, 2.5).per_token_pair, 7);
  EXPECT_EQ(ScaleCost(c, 0).At(100), 0);
  EXPECT_EQ(ScaleCost(c, -1).At(100), 0);
  EXPECT_EQ(ScaleCost(SequenceCost{INT64_MAX / 2, 0}, 4).per_token, INT64_MAX);
}

}  // namespace
}  // namespace encoder::batching
