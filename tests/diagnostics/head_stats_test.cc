// ComputeHeadStats against exact cases and against a torch float64
// reference (head_stats_ref.py) run by the project's Python environment
// (.venv, ENCODER_TEST_PYTHON); without it the reference cases are skipped.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "server/diagnostics/diagnostics.h"

namespace encoder::diagnostics {
namespace {

// The Python with torch that runs the reference: the build's
// ENCODER_CONFORMANCE_PYTHON (tests/CMakeLists.txt), else .venv in the
// source tree named by ENCODER_SOURCE_DIR.
std::string ReferencePython() {
#ifdef ENCODER_TEST_PYTHON
  return ENCODER_TEST_PYTHON;
#else
  const char* source_dir = std::getenv("ENCODER_SOURCE_DIR");
  return std::string(source_dir != nullptr ? source_dir : ".") +
         "/.venv/bin/python";
#endif
}

// Runs the reference once on several probability tensors [H, S, S] and
// returns one AttentionHeadStats per head, tensors in order.
std::vector<AttentionHeadStats> ReferenceStats(
    const std::vector<at::Tensor>& tensors) {
  // The script sits next to this file; ENCODER_SOURCE_DIR, when set, names
  // the source tree to take it from instead.
  const char* source_dir = std::getenv("ENCODER_SOURCE_DIR");
  std::string script;
  if (source_dir != nullptr) {
    script = std::string(source_dir) + "/tests/diagnostics/head_stats_ref.py";
  } else {
    const std::string here = __FILE__;
    script = here.substr(0, here.find_last_of('/') + 1) + "head_stats_ref.py";
  }
  const std::string input =
      testing::TempDir() + "/head_stats_" + std::to_string(getpid()) + ".txt";
  {
    std::ofstream out(input);
    out.precision(17);
    for (const at::Tensor& probs : tensors) {
      at::Tensor a = probs.to(at::kDouble).contiguous();
      out << a.size(0) << " " << a.size(1) << "\n";
      const double* p = a.data_ptr<double>();
      for (int64_t i = 0; i < a.numel(); ++i) out << p[i] << "\n";
    }
  }
  const std::string command = ReferencePython() + " " + script + " " + input;
  FILE* pipe = popen(command.c_str(), "r");
  EXPECT_NE(pipe, nullptr) << command;
  if (pipe == nullptr) return {};
  std::string text;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0)
    text.append(buffer, n);
  EXPECT_EQ(pclose(pipe), 0) << command;
  std::remove(input.c_str());

  std::vector<AttentionHeadStats> stats;
  std::istringstream lines(text);
  AttentionHeadStats h;
  while (lines >> h.entropy >> h.mean_distance >> h.self_mass >> h.prev_mass >>
         h.next_mass >> h.first_mass) {
    stats.push_back(h);
  }
  return stats;
}

// The cases against the reference, skipped when its Python is not there.
class HeadStatsReference : public testing::Test {
 protected:
  void SetUp() override {
    if (access(ReferencePython().c_str(), X_OK) != 0) {
      GTEST_SKIP() << "no " << ReferencePython() << " (scripts/python_env.sh)";
    }
  }
};

void ExpectMatches(const std::vector<AttentionHeadStats>& got,
                   const std::vector<AttentionHeadStats>& want, double tol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t h = 0; h < got.size(); ++h) {
    EXPECT_NEAR(got[h].entropy, want[h].entropy, tol) << "head " << h;
    EXPECT_NEAR(got[h].mean_distance, want[h].mean_distance, tol) << h;
    EXPECT_NEAR(got[h].self_mass, want[h].self_mass, tol) << h;
    EXPECT_NEAR(got[h].prev_mass, want[h].prev_mass, tol) << h;
    EXPECT_NEAR(got[h].next_mass, want[h].next_mass, tol) << h;
    EXPECT_NEAR(got[h].first_mass, want[h].first_mass, tol) << h;
  }
}

TEST_F(HeadStatsReference, MatchesTorchReferenceOnRandomSoftmax) {
  at::manual_seed(11);
  std::vector<at::Tensor> cases;
  std::vector<AttentionHeadStats> got;
  for (int64_t s : {1, 2, 7}) {
    // Peaked rows (scale 3) so that the heads differ visibly.
    cases.push_back((3 * at::randn({3, s, s}, at::kDouble)).softmax(-1));
    const std::vector<AttentionHeadStats> stats =
        ComputeHeadStats(cases.back(), 2);
    ASSERT_EQ(stats.size(), 3u);
    for (int64_t h = 0; h < 3; ++h) {
      EXPECT_EQ(stats[h].layer, 2);
      EXPECT_EQ(stats[h].head, h);
    }
    got.insert(got.end(), stats.begin(), stats.end());
  }
  ExpectMatches(got, ReferenceStats(cases), 1e-9);
}

TEST_F(HeadStatsReference, MatchesTorchReferenceWithZeroProbabilities) {
  // A causal-style mask gives exact zeros: 0 ln 0 must count as 0.
  at::manual_seed(12);
  const int64_t s = 7;
  at::Tensor scores = at::randn({2, s, s}, at::kDouble);
  at::Tensor future = at::ones({s, s}, at::kBool).triu(1);
  at::Tensor probs =
      scores.masked_fill(future, -std::numeric_limits<double>::infinity())
          .softmax(-1);
  const std::vector<AttentionHeadStats> got = ComputeHeadStats(probs, 0);
  ExpectMatches(got, ReferenceStats({probs}), 1e-9);
  for (const AttentionHeadStats& h : got) {
    EXPECT_TRUE(std::isfinite(h.entropy));
    EXPECT_EQ(h.next_mass, 0.0);
  }
}

TEST(HeadStats, UniformRows) {
  const int64_t s = 5;
  at::Tensor probs = at::full({2, s, s}, 1.0 / s, at::kFloat);
  for (const AttentionHeadStats& h : ComputeHeadStats(probs, 0)) {
    EXPECT_NEAR(h.entropy, std::log(5.0), 1e-7);
    // sum_ij |i - j| / S^2 = (S^2 - 1) / (3 S).
    EXPECT_NEAR(h.mean_distance, 24.0 / 15.0, 1e-7);
    EXPECT_NEAR(h.self_mass, 0.2, 1e-7);
    EXPECT_NEAR(h.prev_mass, 4.0 / 25.0, 1e-7);  // 4 rows with a previous key
    EXPECT_NEAR(h.next_mass, 4.0 / 25.0, 1e-7);
    EXPECT_NEAR(h.first_mass, 0.2, 1e-7);
  }
}

TEST(HeadStats, Identity) {
  const int64_t s = 6;
  at::Tensor probs = at::eye(s, at::kDouble).expand({3, s, s});
  for (const AttentionHeadStats& h : ComputeHeadStats(probs, 1)) {
    EXPECT_EQ(h.entropy, 0.0);
    EXPECT_EQ(h.mean_distance, 0.0);
    EXPECT_EQ(h.self_mass, 1.0);
    EXPECT_EQ(h.prev_mass, 0.0);
    EXPECT_EQ(h.next_mass, 0.0);
    EXPECT_DOUBLE_EQ(h.first_mass, 1.0 / s);
  }
}

TEST(HeadStats, ShiftedIdentity) {
  // Row i attends to i - 1; row 0, which has no previous key, to itself.
  const int64_t s = 6;
  at::Tensor probs = at::eye(s, at::kDouble).roll(-1, 1);
  probs[0].zero_();
  probs[0][0] = 1.0;
  probs = probs.unsqueeze(0);
  const std::vector<AttentionHeadStats> stats = ComputeHeadStats(probs, 0);
  ASSERT_EQ(stats.size(), 1u);
  // Rows 1..S-1 put all mass on the previous token; row 0 counts 0.
  EXPECT_DOUBLE_EQ(stats[0].prev_mass, (s - 1.0) / s);
  EXPECT_DOUBLE_EQ(stats[0].mean_distance, (s - 1.0) / s);
  EXPECT_DOUBLE_EQ(stats[0].self_mass, 1.0 / s);
  EXPECT_EQ(stats[0].next_mass, 0.0);
  EXPECT_EQ(stats[0].entropy, 0.0);
  EXPECT_DOUBLE_EQ(stats[0].first_mass, 2.0 / s);
}

TEST(HeadStats, RejectsNonSquareInput) {
  EXPECT_THROW(ComputeHeadStats(at::ones({2, 3, 4}), 0), c10::Error);
  EXPECT_THROW(ComputeHeadStats(at::ones({3, 3}), 0), c10::Error);
}

}  // namespace
}  // namespace encoder::diagnostics
