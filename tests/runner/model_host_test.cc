#include "server/runner/model_host.h"

#include <gtest/gtest.h>

namespace encoder::runner {
namespace {

TEST(MergeBatchOptions, SetOverridesReplaceTheDefaultsAndOnlyThose) {
  batching::BatchOptions defaults;
  defaults.max_batch_sequences = 32;
  defaults.max_batch_tokens = 16384;
  defaults.max_queue_delay = absl::Milliseconds(2);
  defaults.max_queued_sequences = 4096;
  defaults.max_batch_cost_bytes = 1000;

  const batching::BatchOptions same =
      MergeBatchOptions(defaults, model::BatchingOverrides{});
  EXPECT_EQ(same.max_batch_sequences, 32);
  EXPECT_EQ(same.max_batch_tokens, 16384);
  EXPECT_EQ(same.max_queue_delay, absl::Milliseconds(2));
  EXPECT_EQ(same.max_queued_sequences, 4096);
  EXPECT_EQ(same.max_batch_cost_bytes, 1000);
  EXPECT_EQ(same.executions, 1);

  model::BatchingOverrides overrides;
  overrides.max_batch_sequences = 4;
  overrides.max_queue_delay_us = 0;  // zero is a value, not "unset"
  overrides.max_batch_memory_bytes = 77;
  overrides.executions = 3;
  const batching::BatchOptions merged = MergeBatchOptions(defaults, overrides);
  EXPECT_EQ(merged.max_batch_sequences, 4);
  EXPECT_EQ(merged.max_batch_tokens, 16384);
  EXPECT_EQ(merged.max_queue_delay, absl::ZeroDuration());
  EXPECT_EQ(merged.max_queued_sequences, 4096);
  EXPECT_EQ(merged.max_batch_cost_bytes, 77);
  EXPECT_EQ(merged.executions, 3);
}

}  // namespace
}  // namespace encoder::runner
