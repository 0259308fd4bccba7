#include "server/batching/batch_profile.h"

#include <any>
#include <cstdint>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/batching/batch_policy.h"

namespace encoder::batching {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A runner on a simulated clock: a batch of b sequences of L tokens takes
// b * L microseconds while b * L <= knee_tokens, and 1.5 times that beyond,
// as a CPU's caches overflow.
class SimulatedRunner : public ModelRunner {
 public:
  explicit SimulatedRunner(int64_t knee_tokens) : knee_tokens_(knee_tokens) {}

  absl::Status Run(const std::vector<const BatchItem*>& batch,
                   std::vector<ItemResult>* results,
                   const RunContext& /*context*/) override {
    if (fail_) return absl::InternalError("injected failure");
    const int64_t length = batch.front()->length;
    const int64_t tokens = static_cast<int64_t>(batch.size()) * length;
    for (size_t i = 0; i < batch.size(); ++i) {
      // The items are the options' probe items, in order.
      EXPECT_EQ(batch[i]->length, length);
      const auto* probe = std::any_cast<Probe>(&batch[i]->work);
      EXPECT_NE(probe, nullptr);
      if (probe != nullptr) {
        EXPECT_EQ(probe->index, static_cast<int64_t>(i));
        EXPECT_EQ(probe->length, length);
      }
    }
    const double factor = tokens > knee_tokens_ ? 1.5 : 1.0;
    now_ += absl::Microseconds(static_cast<double>(tokens) * factor);
    ++runs_;
    results->resize(batch.size());
    return absl::OkStatus();
  }

  absl::Time Now() const { return now_; }
  int runs() const { return runs_; }
  void Fail() { fail_ = true; }

  // The probe items' payload.
  struct Probe {
    int64_t index;
    int64_t length;
  };

 private:
  const int64_t knee_tokens_;
  absl::Time now_ = absl::UnixEpoch();
  int runs_ = 0;
  bool fail_ = false;
};

BatchProfileOptions Simulated(SimulatedRunner* runner) {
  BatchProfileOptions o;
  o.probe_item = [](int64_t index, int64_t length) {
    BatchItem item;
    item.length = length;
    item.work = SimulatedRunner::Probe{index, length};
    return item;
  };
  o.now = [runner] { return runner->Now(); };
  return o;
}

TEST(BatchProfileTest, CapsSitAtTheKneeOfEachLength) {
  SimulatedRunner runner(/*knee_tokens=*/512);
  auto profile = MeasureBatchProfile(&runner, Simulated(&runner));
  ASSERT_TRUE(profile.ok()) << profile.status();
  // 512 tokens per batch run at full speed; the next doubling is 1.5x
  // slower per sequence, so growth stops there.
  EXPECT_THAT(profile->complete_lengths, ElementsAre(32, 128, 512));
  ASSERT_EQ(profile->caps.size(), 3u);
  EXPECT_EQ(profile->caps[0].length, 32);
  EXPECT_EQ(profile->caps[0].max_sequences, 16);
  EXPECT_EQ(profile->caps[1].length, 128);
  EXPECT_EQ(profile->caps[1].max_sequences, 4);
  EXPECT_EQ(profile->caps[2].length, 512);
  EXPECT_EQ(profile->caps[2].max_sequences, 1);
  EXPECT_FALSE(profile->budget_ran_out);
  // 32 tokens: 1..32 (6 sizes); 128: 1..8 (4); 512: 1, 2; two runs each.
  EXPECT_EQ(profile->points.size(), 12u);
  EXPECT_EQ(runner.runs(), 24);
  EXPECT_THAT(DescribeProfile(*profile), HasSubstr("128 tokens: 1:"));
  EXPECT_THAT(DescribeProfile(*profile), HasSubstr("-> cap 4"));
}

TEST(BatchProfileTest, NoDeclineMeansTheLargestBatch) {
  SimulatedRunner runner(/*knee_tokens=*/1 << 30);
  BatchProfileOptions o = Simulated(&runner);
  o.max_batch_sequences = 24;  // not a power of two: tried as well
  auto profile = MeasureBatchProfile(&runner, o);
  ASSERT_TRUE(profile.ok());
  for (const LengthCap& cap : profile->caps) {
    EXPECT_EQ(cap.max_sequences, 24) << cap.length;
  }
  std::vector<int64_t> sizes;
  for (const ProfilePoint& p : profile->points) {
    if (p.length == 32) sizes.push_back(p.batch);
  }
  EXPECT_THAT(sizes, ElementsAre(1, 2, 4, 8, 16, 24));
}

TEST(BatchProfileTest, TokenLimitAndModelLengthBoundWhatIsTried) {
  SimulatedRunner runner(/*knee_tokens=*/1 << 30);
  BatchProfileOptions o = Simulated(&runner);
  o.max_batch_tokens = 1024;
  o.max_length = 200;  // 512 is longer than the model takes
  auto profile = MeasureBatchProfile(&runner, o);
  ASSERT_TRUE(profile.ok());
  EXPECT_THAT(profile->complete_lengths, ElementsAre(32, 128));
  for (const ProfilePoint& p : profile->points) {
    EXPECT_LE(p.batch * p.length, 1024);
  }
  // A model shorter than every default length is measured at its own.
  o.max_length = 20;
  auto short_model = MeasureBatchProfile(&runner, o);
  ASSERT_TRUE(short_model.ok());
  EXPECT_THAT(short_model->complete_lengths, ElementsAre(20));
}

TEST(BatchProfileTest, BudgetStopsMeasuringAndUnfinishedLengthsGiveNoCap) {
  SimulatedRunner runner(/*knee_tokens=*/1 << 30);
  BatchProfileOptions o = Simulated(&runner);
  // 32 tokens at 1..32 take 2 x 2016 us; 128 tokens would take far more.
  o.budget = absl::Milliseconds(6);
  auto profile = MeasureBatchProfile(&runner, o);
  ASSERT_TRUE(profile.ok());
  EXPECT_TRUE(profile->budget_ran_out);
  EXPECT_THAT(profile->complete_lengths, ElementsAre(32));
  ASSERT_EQ(profile->caps.size(), 1u);
  EXPECT_EQ(profile->caps[0].length, 32);
  EXPECT_LE(profile->took, o.budget);
  EXPECT_THAT(DescribeProfile(*profile), HasSubstr("budget ran out"));
}

TEST(BatchProfileTest, RunnerFailureIsReturned) {
  SimulatedRunner runner(512);
  runner.Fail();
  auto profile = MeasureBatchProfile(&runner, Simulated(&runner));
  EXPECT_EQ(profile.status().code(), absl::StatusCode::kInternal);
}

TEST(BatchProfileTest, CapIsTheLargestBatchNearTheBest) {
  // Measurement noise: 8 is within 10% of the best (4), 16 is not.
  const std::vector<ProfilePoint> points = {
      {128, 1, 100},  {128, 2, 180}, {128, 4, 200}, {128, 8, 185},
      {128, 16, 150}, {32, 1, 50},   {32, 2, 90}};
  const auto caps = CapsFromPoints(points, {32, 128}, 0.9);
  ASSERT_EQ(caps.size(), 2u);
  EXPECT_EQ(caps[0].length, 32);
  EXPECT_EQ(caps[0].max_sequences, 2);
  EXPECT_EQ(caps[1].length, 128);
  EXPECT_EQ(caps[1].max_sequences, 8);
  // A length not measured to the end gives none.
  EXPECT_EQ(CapsFromPoints(points, {128}, 0.9).size(), 1u);
}

TEST(SequenceCapAtTest, InterpolatesTokensOnALogScale) {
  EXPECT_EQ(SequenceCapAt({}, 128), INT64_MAX);
  const std::vector<LengthCap> caps = {{32, 32}, {128, 4}};  // 1024, 512
  EXPECT_EQ(SequenceCapAt(caps, 16), 64);  // held flat below 32
  EXPECT_EQ(SequenceCapAt(caps, 32), 32);
  EXPECT_EQ(SequenceCapAt(caps, 64), 12);  // 768 tokens halfway
  EXPECT_EQ(SequenceCapAt(caps, 128), 4);
  EXPECT_EQ(SequenceCapAt(caps, 256), 2);   // held flat above 128
  EXPECT_EQ(SequenceCapAt(caps, 4096), 1);  // never below one
}

std::vector<QueuedSequence> Queue(const std::vector<int64_t>& lengths) {
  std::vector<QueuedSequence> queue;
  const absl::Time t = absl::UnixEpoch();
  for (size_t i = 0; i < lengths.size(); ++i) {
    QueuedSequence q;
    q.length = lengths[i];
    q.enqueued = t + absl::Milliseconds(static_cast<int64_t>(i));
    queue.push_back(q);
  }
  return queue;
}

TEST(SequenceCapAtTest, DecideBatchStopsAtTheCapAndDoesNotWait) {
  BatchOptions options;
  options.fair_share = false;
  options.max_queue_delay = absl::Hours(1);
  options.length_caps = {{32, 32}, {128, 4}};
  // Ten long sequences: four run now; waiting for company would not help.
  const BatchDecision long_batch = DecideBatch(
      Queue(std::vector<int64_t>(10, 128)), options, absl::UnixEpoch());
  EXPECT_EQ(long_batch.take.size(), 4u);
  // Short ones are capped only by the sequence limit.
  const BatchDecision short_batch = DecideBatch(
      Queue(std::vector<int64_t>(40, 16)), options, absl::UnixEpoch());
  EXPECT_EQ(short_batch.take.size(), 32u);
  // A long member would lower the cap of a batch of short ones: it is
  // left out once they are taken, and joins only a batch it fits.
  std::vector<int64_t> mixed(20, 32);
  mixed[1] = 128;
  const BatchDecision mixed_batch =
      DecideBatch(Queue(mixed), options, absl::UnixEpoch());
  EXPECT_EQ(mixed_batch.take.size(), 19u);
  EXPECT_THAT(mixed_batch.take, ::testing::Not(::testing::Contains(1u)));
  // Offered first (no grouping by length), it joins and caps the batch.
  options.group_by_length = false;
  const BatchDecision capped =
      DecideBatch(Queue(mixed), options, absl::UnixEpoch());
  EXPECT_EQ(capped.take.size(), 4u);
  EXPECT_THAT(capped.take, ::testing::Contains(1u));
}

}  // namespace
}  // namespace encoder::batching
