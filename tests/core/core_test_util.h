// A core over fake models (fake_model.h) and synchronous calls into it.
#ifndef ENCODER_TESTS_CORE_CORE_TEST_UTIL_H_
#define ENCODER_TESTS_CORE_CORE_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "server/core/inference.h"
#include "server/metrics/metrics.h"
#include "tests/core/fake_model.h"

namespace encoder::testing {

struct FakeCore {
  explicit FakeCore(core::ServiceLimits limits = {},
                    std::vector<FakeModelOptions> models = {{}},
                    core::DiagnoseLimits diagnose = {})
      : catalog(std::move(models)), core(&metrics, limits, diagnose) {
    core.SetHost(&catalog);
  }

  FakeModel& model(const std::string& name = "fake") {
    return *catalog.FindFake(name);
  }

  metrics::NoopMetrics metrics;
  FakeCatalog catalog;
  core::Inference core;
};

// Starts an Embed call; Wait() returns its answer.
class PendingEmbed {
 public:
  PendingEmbed(core::Inference& core, core::EmbedQuery query,
               core::Call call = {}) {
    if (call.rpc[0] == '\0') call.rpc = "Embed";
    core.Embed(std::move(call), std::move(query),
               [this](absl::StatusOr<core::EmbedAnswer> answer) {
                 answer_ = std::move(answer);
                 done_.Notify();
               });
  }
  bool done() const { return done_.HasBeenNotified(); }
  absl::StatusOr<core::EmbedAnswer> Wait() {
    EXPECT_TRUE(done_.WaitForNotificationWithTimeout(absl::Seconds(30)))
        << "the call never completed";
    return answer_;
  }

 private:
  absl::Notification done_;
  absl::StatusOr<core::EmbedAnswer> answer_ =
      absl::UnknownError("not answered");
};

inline absl::StatusOr<core::EmbedAnswer> Embed(core::Inference& core,
                                               core::EmbedQuery query,
                                               core::Call call = {}) {
  return PendingEmbed(core, std::move(query), std::move(call)).Wait();
}

inline core::EmbedQuery IdsQuery(std::vector<std::vector<int64_t>> inputs,
                                 std::string model = "") {
  core::EmbedQuery q;
  q.model = std::move(model);
  for (auto& ids : inputs) {
    q.inputs.push_back(core::EmbedInput::Ids(std::move(ids)));
  }
  return q;
}

inline core::EmbedQuery TextQuery(std::vector<std::string> texts) {
  core::EmbedQuery q;
  for (auto& t : texts) q.inputs.push_back(core::EmbedInput::Text(t));
  return q;
}

// `n` ids counting up from `first` (all within the byte tokenizer's
// vocabulary and none of its special ids).
inline std::vector<int64_t> Ids(int64_t n, int64_t first = 10) {
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < n; ++i) ids.push_back(first + i);
  return ids;
}

}  // namespace encoder::testing

#endif  // ENCODER_TESTS_CORE_CORE_TEST_UTIL_H_
