#include "server/runner/thread_policy.h"

#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

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

TEST(DefaultExecutionsPerModel, OneOnAGpuAndUpToTwoOnACpu) {
  UsableCores cores;
  cores.cores = 16;
  EXPECT_EQ(DefaultExecutionsPerModel(/*cuda=*/true, cores), 1);
  EXPECT_EQ(DefaultExecutionsPerModel(false, cores), kMaxDefaultExecutions);
  cores.cores = 2;
  EXPECT_EQ(DefaultExecutionsPerModel(false, cores), 2);
  cores.cores = 1;
  EXPECT_EQ(DefaultExecutionsPerModel(false, cores), 1);
}

TEST(DefaultIntraOpThreads, TheCoresOverTheExecutions) {
  UsableCores cores;
  cores.cores = 2;
  EXPECT_EQ(DefaultIntraOpThreads(cores, 2), 1);
  EXPECT_EQ(DefaultIntraOpThreads(cores, 1), 2);
  cores.cores = 16;
  EXPECT_EQ(DefaultIntraOpThreads(cores, 2), 8);
  EXPECT_EQ(DefaultIntraOpThreads(cores, 3), 5);
  cores.cores = 1;
  EXPECT_EQ(DefaultIntraOpThreads(cores, 2), 1);  // never 0
  EXPECT_EQ(DefaultIntraOpThreads(cores, 0), 1);
}

// Passes running side by side split the pool; the share is not raised
// while passes still run, and a pass that starts alone gets all of it.
// Needs OpenBLAS as LibTorch's BLAS (Debian's libtorch uses the system's).
TEST(ThreadShare, RunningPassesSplitTheOpenBlasPool) {
  const std::string applied = ApplyThreadPolicy(1, 4);
  if (ThreadShare::blas_threads_now() == 0) {
    GTEST_SKIP() << "the BLAS is not OpenBLAS: " << applied;
  }
  ASSERT_EQ(ThreadShare::running(), 0);
  EXPECT_EQ(ThreadShare::blas_threads_now(), 4);
  {
    ThreadShare first;
    EXPECT_EQ(ThreadShare::running(), 1);
    EXPECT_EQ(ThreadShare::blas_threads_now(), 4);
    {
      ThreadShare second;
      EXPECT_EQ(ThreadShare::blas_threads_now(), 2);
      {
        ThreadShare third;
        EXPECT_EQ(ThreadShare::blas_threads_now(), 1);  // 4 / 3, rounded down
        ThreadShare fourth, fifth;
        EXPECT_EQ(ThreadShare::blas_threads_now(), 1);  // never below one
      }
      EXPECT_EQ(ThreadShare::running(), 2);
      // Not raised while passes still run.
      EXPECT_EQ(ThreadShare::blas_threads_now(), 1);
      ThreadShare another;
      EXPECT_EQ(ThreadShare::blas_threads_now(), 4 / 3);
    }
    EXPECT_EQ(ThreadShare::blas_threads_now(), 1);
  }
  EXPECT_EQ(ThreadShare::running(), 0);
  {
    ThreadShare alone;  // the next pass that starts alone gets the pool
    EXPECT_EQ(ThreadShare::blas_threads_now(), 4);
    const ThreadShare gpu(/*counts=*/false);  // a GPU pass takes no share
    EXPECT_EQ(ThreadShare::running(), 1);
    EXPECT_EQ(ThreadShare::blas_threads_now(), 4);
  }
  {
    ThreadShare first;
    ThreadShare second;  // and a second beside it half
    EXPECT_EQ(ThreadShare::blas_threads_now(), 2);
  }
  ApplyThreadPolicy(1, 0);
}

// With the intra-op share on, each pass's thread runs its products on the
// cores over the passes running when it started, and gets its own count
// back when the pass ends; other threads keep theirs. Needs LibTorch on
// OpenMP (both the wheel's and Debian's are).
TEST(ThreadShare, PassesSplitTheIntraOpThreads) {
  ApplyThreadPolicy(1, 0);
  const std::string enabled = EnableIntraOpShare(4);
  if (IntraOpShareCores() == 0) GTEST_SKIP() << enabled;
  EXPECT_NE(enabled.find("shared"), std::string::npos) << enabled;
  ASSERT_EQ(ThreadShare::running(), 0);
  EXPECT_EQ(at::get_num_threads(), 1);
  EXPECT_EQ(IntraOpShareCores(), 4);
  {
    ThreadShare first;
    EXPECT_EQ(at::get_num_threads(), 4);  // alone: every core
    EXPECT_EQ(IntraOpShareCores(), 2);    // what the next one would get
    {
      ThreadShare second;
      EXPECT_EQ(at::get_num_threads(), 2);
      {
        ThreadShare third;
        EXPECT_EQ(at::get_num_threads(), 1);  // 4 / 3, rounded down
        ThreadShare fourth, fifth;
        EXPECT_EQ(at::get_num_threads(), 1);  // never below one
      }
      EXPECT_EQ(at::get_num_threads(), 2);  // the second's count again
    }
    EXPECT_EQ(at::get_num_threads(), 4);
    // A pass on another thread takes its share there, not here.
    int there = 0;
    std::thread([&there] {
      ThreadShare other;
      there = at::get_num_threads();
    }).join();
    EXPECT_EQ(there, 2);
    EXPECT_EQ(at::get_num_threads(), 4);
    const ThreadShare gpu(/*counts=*/false);  // a GPU pass takes no share
    EXPECT_EQ(at::get_num_threads(), 4);
    EXPECT_EQ(ThreadShare::running(), 1);
  }
  EXPECT_EQ(at::get_num_threads(), 1);  // the thread's own count back
  EnableIntraOpShare(0);                // off: passes keep the fixed count
  {
    ThreadShare fixed;
    EXPECT_EQ(at::get_num_threads(), 1);
  }
  EXPECT_EQ(IntraOpShareCores(), 0);
}

}  // namespace
}  // namespace encoder::runner
