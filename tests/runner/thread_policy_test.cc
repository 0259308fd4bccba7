#include "server/runner/thread_policy.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

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

TEST(ShareIntraOpByDefault, TwoOrThreeUsableCores) {
  UsableCores cores;
  for (const int n : {1, 2, 3, 4, 16}) {
    cores.cores = n;
    EXPECT_EQ(ShareIntraOpByDefault(cores), n == 2 || n == 3) << n;
  }
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

// The threads of this process now.
int ProcessThreads() {
  int n = 0;
  for (const auto& entry : fs::directory_iterator("/proc/self/task")) {
    (void)entry;
    ++n;
  }
  return n;
}

// Polls until the process has `want` threads (pool threads told to exit
// take a moment to be gone); returns the last count.
int WaitForThreads(int want) {
  int n = ProcessThreads();
  for (int i = 0; i < 200 && n != want; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    n = ProcessThreads();
  }
  return n;
}

// Runs parallel work with `threads` intra-op threads on the calling thread,
// which makes OpenMP start a pool of `threads` - 1 workers for it: an
// element-wise product long enough for LibTorch to split (its own
// parallel_for, built with OpenMP; this file is not).
void ParallelWork(int threads) {
  at::set_num_threads(threads);
  const at::Tensor x = at::ones({1 << 20});
  EXPECT_EQ((x * 2).sum().item<double>(), 2.0 * (1 << 20));
}

// The pool that parallel work on a transient thread starts ends with it; on
// a thread that stays, it stays (the case the helper exists for).
TEST(RunOnTransientThread, ThePoolItStartedEndsWithIt) {
  // The count first: LibTorch sizes its other pool (pthreadpool, not
  // OpenMP) to it, and that pool is the process's, not the thread's.
  at::set_num_threads(3);
  const int before = ProcessThreads();
  std::thread::id ran_on;
  RunOnTransientThread([&ran_on] {
    ran_on = std::this_thread::get_id();
    ParallelWork(3);
  });
  EXPECT_NE(ran_on, std::this_thread::get_id());
  EXPECT_EQ(WaitForThreads(before), before);

  // The same work on a thread that lives on keeps its two pool workers.
  std::mutex mu;
  std::condition_variable cv;
  bool worked = false, leave = false;
  std::thread stays([&] {
    ParallelWork(3);
    std::unique_lock<std::mutex> lock(mu);
    worked = true;
    cv.notify_all();
    cv.wait(lock, [&] { return leave; });
  });
  {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return worked; });
  }
  const int kept = ProcessThreads();
  {
    std::lock_guard<std::mutex> lock(mu);
    leave = true;
  }
  cv.notify_all();
  stays.join();
  if (kept == before + 1) {
    GTEST_SKIP() << "parallel work started no pool threads (LibTorch's pool "
                    "is not OpenMP here)";
  }
  EXPECT_EQ(kept, before + 3);  // the thread and its two workers
  EXPECT_EQ(WaitForThreads(before), before);
  ApplyThreadPolicy(1, 0);
}

// What a pass's work saw: its intra-op threads and the thread it ran on.
struct Seen {
  int threads = 0;
  std::thread::id on;
};
Seen RunAndSee(const ThreadShare& pass) {
  Seen seen;
  EXPECT_TRUE(pass.Run([&seen] {
                    seen.threads = at::get_num_threads();
                    seen.on = std::this_thread::get_id();
                    return absl::OkStatus();
                  })
                  .ok());
  return seen;
}

// With the intra-op share on, a pass that starts alone runs on the wide
// thread with every core; passes beside it run here on the cores over the
// passes running, and the thread gets its own count back when a pass ends;
// other threads keep theirs. Needs LibTorch on OpenMP (both the wheel's and
// Debian's are).
TEST(ThreadShare, PassesSplitTheIntraOpThreads) {
  ApplyThreadPolicy(1, 0);
  const std::string enabled = EnableIntraOpShare(4);
  if (IntraOpShareCores() == 0) GTEST_SKIP() << enabled;
  EXPECT_NE(enabled.find("shared"), std::string::npos) << enabled;
  ASSERT_EQ(ThreadShare::running(), 0);
  EXPECT_EQ(at::get_num_threads(), 1);
  EXPECT_EQ(IntraOpShareCores(), 4);
  std::thread::id lane;  // the wide thread
  {
    ThreadShare first;
    EXPECT_TRUE(first.wide());            // alone: every core, on the lane
    EXPECT_EQ(at::get_num_threads(), 1);  // this thread's count unchanged
    EXPECT_EQ(IntraOpShareCores(), 2);    // what the next one would get
    const Seen wide = RunAndSee(first);
    lane = wide.on;
    EXPECT_EQ(wide.threads, 4);
    EXPECT_NE(lane, std::this_thread::get_id());
    {
      ThreadShare second;
      EXPECT_FALSE(second.wide());
      EXPECT_EQ(at::get_num_threads(), 2);
      const Seen here = RunAndSee(second);
      EXPECT_EQ(here.threads, 2);
      EXPECT_EQ(here.on, std::this_thread::get_id());  // run here
      {
        ThreadShare third;
        EXPECT_EQ(at::get_num_threads(), 1);  // 4 / 3, rounded down
        ThreadShare fourth, fifth;
        EXPECT_EQ(at::get_num_threads(), 1);  // never below one
      }
      EXPECT_EQ(at::get_num_threads(), 2);  // the second's count again
    }
    EXPECT_EQ(at::get_num_threads(), 1);
    // A pass on another thread takes its share there, not here.
    int there = 0;
    std::thread([&there] {
      ThreadShare other;
      EXPECT_FALSE(other.wide());
      there = at::get_num_threads();
    }).join();
    EXPECT_EQ(there, 2);
    const ThreadShare gpu(/*counts=*/false);  // a GPU pass takes no share
    EXPECT_FALSE(gpu.wide());
    EXPECT_EQ(at::get_num_threads(), 1);
    EXPECT_EQ(ThreadShare::running(), 1);
  }
  EXPECT_EQ(at::get_num_threads(), 1);
  {
    // The next pass alone runs on the same wide thread, with every core.
    ThreadShare again;
    ASSERT_TRUE(again.wide());
    const Seen wide = RunAndSee(again);
    EXPECT_EQ(wide.threads, 4);
    EXPECT_EQ(wide.on, lane);
  }
  EnableIntraOpShare(0);  // off: passes keep the fixed count, here
  {
    ThreadShare fixed;
    EXPECT_FALSE(fixed.wide());
    EXPECT_EQ(at::get_num_threads(), 1);
  }
  EXPECT_EQ(IntraOpShareCores(), 0);
}

// A pass with less arithmetic than the threshold runs here on one thread,
// shared or fixed, and counts as running; a larger one, or one of unknown
// size, takes its threads as before; at 0 the threshold is off.
TEST(ThreadShare, SmallPassesRunOnOneThread) {
  ApplyThreadPolicy(1, 0);
  const std::string enabled = EnableIntraOpShare(2);
  if (IntraOpShareCores() == 0) GTEST_SKIP() << enabled;
  const std::string set = SetOneThreadBelowFlops(1e6);
  EXPECT_NE(set.find("one thread"), std::string::npos) << set;
  {
    ThreadShare small(/*counts=*/true, /*flops=*/5e5);
    EXPECT_TRUE(small.one_thread());
    EXPECT_FALSE(small.wide());
    EXPECT_EQ(ThreadShare::running(), 1);
    const Seen here = RunAndSee(small);
    EXPECT_EQ(here.threads, 1);
    EXPECT_EQ(here.on, std::this_thread::get_id());
  }
  for (const double flops : {2e6, -1.0}) {
    ThreadShare large(/*counts=*/true, flops);
    EXPECT_FALSE(large.one_thread()) << flops;
    ASSERT_TRUE(large.wide()) << flops;
    EXPECT_EQ(RunAndSee(large).threads, 2) << flops;
  }
  // Fixed intra-op threads: the small pass sets one here and gives the
  // thread its count back.
  EnableIntraOpShare(0);
  ApplyThreadPolicy(2, 0);
  ASSERT_EQ(at::get_num_threads(), 2);
  {
    ThreadShare small(/*counts=*/true, /*flops=*/5e5);
    EXPECT_TRUE(small.one_thread());
    EXPECT_EQ(at::get_num_threads(), 1);
  }
  EXPECT_EQ(at::get_num_threads(), 2);
  {
    ThreadShare large(/*counts=*/true, /*flops=*/2e6);
    EXPECT_FALSE(large.one_thread());
    EXPECT_EQ(at::get_num_threads(), 2);
  }
  SetOneThreadBelowFlops(0);
  {
    ThreadShare small(/*counts=*/true, /*flops=*/5e5);
    EXPECT_FALSE(small.one_thread());
    EXPECT_EQ(at::get_num_threads(), 2);
  }
  ApplyThreadPolicy(1, 0);
  EXPECT_EQ(ThreadShare::running(), 0);
}

// What a pass run on the wide thread returns or throws reaches its caller,
// and passes from many threads, one wide at a time, each get their own
// result.
TEST(ThreadShare, TheWideThreadHandsBackStatusAndExceptions) {
  ApplyThreadPolicy(1, 0);
  const std::string enabled = EnableIntraOpShare(2);
  if (IntraOpShareCores() == 0) GTEST_SKIP() << enabled;
  {
    ThreadShare alone;
    ASSERT_TRUE(alone.wide());
    const absl::Status status =
        alone.Run([] { return absl::NotFoundError("the pass's own error"); });
    EXPECT_EQ(status, absl::NotFoundError("the pass's own error"));
    EXPECT_THROW(alone.Run([]() -> absl::Status {
      throw std::runtime_error("thrown on the wide thread");
    }),
                 std::runtime_error);
    // The lane still serves after a throw.
    EXPECT_TRUE(alone.Run([] { return absl::OkStatus(); }).ok());
  }
  std::atomic<int> wide{0}, ok{0};
  std::vector<std::thread> callers;
  for (int t = 0; t < 8; ++t) {
    callers.emplace_back([t, &wide, &ok] {
      for (int i = 0; i < 50; ++i) {
        ThreadShare pass;
        if (pass.wide()) ++wide;
        const int want = t * 1000 + i;
        int got = -1;
        const absl::Status s = pass.Run([&] {
          got = want;
          return absl::OkStatus();
        });
        if (s.ok() && got == want) ++ok;
      }
    });
  }
  for (std::thread& c : callers) c.join();
  EXPECT_EQ(ok.load(), 8 * 50);
  EXPECT_GT(wide.load(), 0);
  EXPECT_EQ(ThreadShare::running(), 0);
  EnableIntraOpShare(0);
}

}  // namespace
}  // namespace encoder::runner
