#include "server/runner/thread_policy.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace encoder::runner {
namespace {

namespace fs = std::filesystem;

// A cgroup file system of the test's own.
class FakeCgroup {
 public:
  FakeCgroup() {
    root_ = fs::temp_directory_path() /
            ("thread-policy-test-" + std::to_string(::getpid()) + "-" +
             std::to_string(counter_++));
    fs::create_directories(root_ / "cpu");
  }
  ~FakeCgroup() { fs::remove_all(root_); }
  void Write(const std::string& name, const std::string& text) {
    std::ofstream(root_ / name) << text << "\n";
  }
  std::string root() const { return root_.string(); }

 private:
  static inline int counter_ = 0;
  fs::path root_;
};

TEST(DetectUsableCores, NoQuotaMeansTheAffinityMask) {
  FakeCgroup cgroup;
  const UsableCores u = DetectUsableCores(cgroup.root());
  EXPECT_GE(u.affinity, 1);
  EXPECT_EQ(u.cores, u.affinity);
  EXPECT_EQ(u.quota, 0);
  cgroup.Write("cpu.max", "max 100000");  // v2 without a limit
  EXPECT_EQ(DetectUsableCores(cgroup.root()).quota, 0);
  cgroup.Write("cpu/cpu.cfs_quota_us", "-1");  // v1 without a limit
  cgroup.Write("cpu/cpu.cfs_period_us", "100000");
  EXPECT_EQ(DetectUsableCores(cgroup.root()).quota, 0);
}

TEST(DetectUsableCores, AQuotaBelowTheCpusLimitsThemRoundedUp) {
  FakeCgroup cgroup;
  cgroup.Write("cpu.max", "50000 100000");  // half a CPU: one thread
  UsableCores u = DetectUsableCores(cgroup.root());
  EXPECT_DOUBLE_EQ(u.quota, 0.5);
  EXPECT_EQ(u.cores, 1);
  EXPECT_EQ(u.quota_source, cgroup.root() + "/cpu.max");
  // A quota above the CPUs the process has changes nothing.
  cgroup.Write("cpu.max",
               std::to_string(100000 * (u.affinity + 3)) + " 100000");
  u = DetectUsableCores(cgroup.root());
  EXPECT_EQ(u.cores, u.affinity);
}

TEST(DetectUsableCores, CgroupV1Quota) {
  FakeCgroup cgroup;
  cgroup.Write("cpu/cpu.cfs_quota_us", "150000");
  cgroup.Write("cpu/cpu.cfs_period_us", "100000");
  const UsableCores u = DetectUsableCores(cgroup.root());
  EXPECT_DOUBLE_EQ(u.quota, 1.5);
  EXPECT_EQ(u.cores, std::min(2, u.affinity));
  EXPECT_EQ(u.quota_source, cgroup.root() + "/cpu/cpu.cfs_quota_us");
}

TEST(DetectUsableCores, UnreadableFilesMeanNoQuota) {
  FakeCgroup cgroup;
  cgroup.Write("cpu.max", "garbage");
  cgroup.Write("cpu/cpu.cfs_quota_us", "12x");
  EXPECT_EQ(DetectUsableCores(cgroup.root()).quota, 0);
  EXPECT_EQ(DetectUsableCores("/nonexistent-cgroup-root").quota, 0);
}

}  // namespace
}  // namespace encoder::runner
