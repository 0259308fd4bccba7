// The drain sequence (server/app/drain.h) over a core and fake models, no
// front: accepted work finishes, new calls are refused at once, and a grace
// period too short for the work is reported.
#include "server/app/drain.h"

#include <gtest/gtest.h>

#include <thread>

#include "tests/core/core_test_util.h"

namespace encoder::testing {
namespace {

TEST(Drain, WaitsForAcceptedWorkAndRefusesNewCalls) {
  FakeCore f;
  f.model().CloseGate();
  PendingEmbed accepted(f.core, IdsQuery({{5, 6}}));
  bool drained = false;
  std::thread drain([&] {
    drained = app::Drain({&f.core, &f.catalog, nullptr}, absl::Seconds(30));
  });
  while (!f.core.draining()) absl::SleepFor(absl::Milliseconds(1));
  EXPECT_EQ(Embed(f.core, IdsQuery({{7}})).status().code(),
            absl::StatusCode::kUnavailable);
  EXPECT_FALSE(accepted.done());
  f.model().OpenGate();
  drain.join();
  EXPECT_TRUE(drained);
  auto answer = accepted.Wait();
  ASSERT_TRUE(answer.ok()) << answer.status();
  EXPECT_EQ(answer->inputs[0].result.pooled, (std::vector<float>{2, 11, 5, 6}));
}

TEST(Drain, AGraceTooShortIsReportedAndKeepsTheUnreadyTimeWithinIt) {
  FakeCore f;
  f.model().CloseGate();
  PendingEmbed stuck(f.core, IdsQuery({{5}}));
  const absl::Time start = absl::Now();
  // unready (10 s) is bounded by the grace (100 ms).
  EXPECT_FALSE(app::Drain({&f.core, &f.catalog, nullptr},
                          absl::Milliseconds(100), absl::Seconds(10)));
  const absl::Duration took = absl::Now() - start;
  EXPECT_GE(took, absl::Milliseconds(100));
  EXPECT_LT(took, absl::Seconds(5));
  f.model().OpenGate();
  EXPECT_TRUE(stuck.Wait().ok());  // the model still answers it
}

TEST(Drain, WithoutModelsItOnlyRefuses) {
  metrics::NoopMetrics metrics;
  core::Inference core(&metrics, {}, {});
  EXPECT_TRUE(app::Drain({&core, nullptr, nullptr}, absl::Seconds(1)));
  EXPECT_TRUE(core.draining());
}

}  // namespace
}  // namespace encoder::testing
