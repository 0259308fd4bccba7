#include "server/runner/thread_policy.h"

#include <ATen/Config.h>
#include <ATen/Parallel.h>
#include <dlfcn.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <mutex>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace encoder::runner {
namespace {

// The first line of a file, or "" when it cannot be read.
std::string FirstLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// CPUs the cgroup's quota allows (quota / period); 0 when there is none.
double CgroupQuota(const std::string& root, std::string* source) {
  // v2: "max 100000" (none) or "150000 100000".
  const std::string v2 = root + "/cpu.max";
  std::vector<std::string> fields =
      absl::StrSplit(FirstLine(v2), ' ', absl::SkipEmpty());
  int64_t quota = 0, period = 0;
  if (fields.size() == 2 && absl::SimpleAtoi(fields[0], &quota) &&
      absl::SimpleAtoi(fields[1], &period) && quota > 0 && period > 0) {
    *source = v2;
    return static_cast<double>(quota) / static_cast<double>(period);
  }
  // v1: quota -1 is none.
  const std::string v1 = root + "/cpu/cpu.cfs_quota_us";
  if (absl::SimpleAtoi(absl::StripAsciiWhitespace(FirstLine(v1)), &quota) &&
      absl::SimpleAtoi(absl::StripAsciiWhitespace(
                           FirstLine(root + "/cpu/cpu.cfs_period_us")),
                       &period) &&
      quota > 0 && period > 0) {
    *source = v1;
    return static_cast<double>(quota) / static_cast<double>(period);
  }
  return 0;
}

using SetThreads = void (*)(int);
using GetThreads = int (*)();
using SetLocalThreads = int (*)(int);  // returns the previous local count

// One pass's share of `total` threads among `passes` running: at least 1.
int ShareOf(int total, int passes) {
  return std::max(1, total / std::max(1, passes));
}

// What ThreadShare divides: OpenBLAS's pool as ApplyThreadPolicy left it.
struct BlasPool {
  std::mutex mu;
  SetThreads set = nullptr;
  GetThreads get = nullptr;
  int threads = 0;  // 0: not OpenBLAS, or not configured yet
  int running = 0;  // ThreadShare instances alive
  // The intra-op share (EnableIntraOpShare): the cores divided, 0 when off,
  // and the OpenMP and MKL calls that set the calling thread's count.
  int intra_cores = 0;
  SetThreads omp_set = nullptr;
  GetThreads omp_get = nullptr;
  SetLocalThreads mkl_local = nullptr;

  void ShareLocked() {
    if (set != nullptr && threads > 0) {
      set(ShareOf(threads, running));
    }
  }
};

BlasPool& Pool() {
  static BlasPool* pool = new BlasPool;
  return *pool;
}

int AffinityCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    const int n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
  const long online = sysconf(_SC_NPROCESSORS_ONLN);
  return online > 0 ? static_cast<int>(online) : 1;
}

}  // namespace

UsableCores DetectUsableCores(const std::string& cgroup_root) {
  UsableCores u;
  u.affinity = AffinityCpus();
  u.quota = CgroupQuota(cgroup_root, &u.quota_source);
  u.cores = u.affinity;
  if (u.quota > 0) {
    const int allowed = std::max(1, static_cast<int>(std::ceil(u.quota)));
    if (allowed < u.cores) u.cores = allowed;
  }
  return u;
}

std::string ApplyThreadPolicy(int intra_op_threads, int blas_threads) {
  at::set_num_threads(intra_op_threads);
  std::string out = absl::StrCat(at::get_num_threads(), " intra-op threads");
  // Looked up at run time: the BLAS behind LibTorch is chosen by the
  // system (Debian's alternatives), not by this build.
  auto set = reinterpret_cast<SetThreads>(
      dlsym(RTLD_DEFAULT, "openblas_set_num_threads"));
  auto get = reinterpret_cast<GetThreads>(
      dlsym(RTLD_DEFAULT, "openblas_get_num_threads"));
  if (set == nullptr || get == nullptr) {
    return absl::StrCat(out, ", BLAS pool not OpenBLAS (left as is)");
  }
  std::string why;
  if (blas_threads > 0) {
    set(blas_threads);
  } else {
    const UsableCores usable = DetectUsableCores();
    if (get() > usable.cores) {
      set(usable.cores);
      why = absl::StrFormat(" (the CPU quota allows %.2f of %d CPUs, %s)",
                            usable.quota, usable.affinity, usable.quota_source);
    }
  }
  BlasPool& pool = Pool();
  {
    std::lock_guard<std::mutex> lock(pool.mu);
    pool.set = set;
    pool.get = get;
    pool.threads = get();
    pool.ShareLocked();
  }
  return absl::StrCat(out, ", OpenBLAS ", get(), " threads", why);
}

int DefaultExecutionsPerModel(bool cuda, const UsableCores& cores) {
  if (cuda) return 1;
  return std::clamp(cores.cores, 1, kMaxDefaultExecutions);
}

int DefaultIntraOpThreads(const UsableCores& cores, int executions) {
  return std::max(1, cores.cores / std::max(1, executions));
}

ThreadShare::ThreadShare(bool counts) : counts_(counts) {
  if (!counts_) return;
  BlasPool& pool = Pool();
  int intra = 0;
  {
    std::lock_guard<std::mutex> lock(pool.mu);
    ++pool.running;
    pool.ShareLocked();
    if (pool.intra_cores > 1) {
      intra = ShareOf(pool.intra_cores, pool.running);
    }
  }
  if (intra == 0) return;
  // LibTorch sets a thread's count on its first parallel region; done
  // first here, so that it cannot undo the share later. Both copies of the
  // once-per-thread flag: LibTorch's own (behind get_num_threads) and the
  // header's inline one that code built outside LibTorch checks.
  at::get_num_threads();
  at::internal::lazy_init_num_threads();
  previous_omp_ = pool.omp_get();
  pool.omp_set(intra);
  if (pool.mkl_local != nullptr) previous_mkl_ = pool.mkl_local(intra);
}

ThreadShare::~ThreadShare() {
  if (!counts_) return;
  BlasPool& pool = Pool();
  {
    std::lock_guard<std::mutex> lock(pool.mu);
    --pool.running;
  }
  if (previous_omp_ > 0) {
    pool.omp_set(previous_omp_);
    if (pool.mkl_local != nullptr) pool.mkl_local(previous_mkl_);
  }
}

std::string EnableIntraOpShare(int cores) {
  BlasPool& pool = Pool();
  std::lock_guard<std::mutex> lock(pool.mu);
  pool.intra_cores = 0;
#if AT_PARALLEL_OPENMP
  // Looked up at run time, as OpenBLAS's: the OpenMP runtime and MKL are
  // the ones LibTorch loaded. MKL's C entry point is the mixed-case name
  // (mkl_service.h maps mkl_set_num_threads_local onto it); the lowercase
  // symbol is the Fortran one, which takes a pointer.
  pool.omp_set =
      reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "omp_set_num_threads"));
  pool.omp_get =
      reinterpret_cast<GetThreads>(dlsym(RTLD_DEFAULT, "omp_get_max_threads"));
  pool.mkl_local = reinterpret_cast<SetLocalThreads>(
      dlsym(RTLD_DEFAULT, "MKL_Set_Num_Threads_Local"));
  if (pool.omp_set == nullptr || pool.omp_get == nullptr) {
    return "intra-op threads fixed (no OpenMP runtime found)";
  }
  if (cores <= 1) return "intra-op threads fixed (one usable core)";
  if (pool.set != nullptr) {
    // Float32 products run on OpenBLAS's pool, which ThreadShare already
    // splits; OpenMP threads beside it would spin on the same cores.
    return "intra-op threads fixed (OpenBLAS multiplies on its own pool)";
  }
  pool.intra_cores = cores;
  return absl::StrCat(
      "intra-op threads shared: a batch that starts alone uses ", cores,
      ", batches side by side split them");
#else
  (void)cores;
  return "intra-op threads fixed (LibTorch's pool is not OpenMP)";
#endif
}

int IntraOpShareCores() {
  BlasPool& pool = Pool();
  std::lock_guard<std::mutex> lock(pool.mu);
  if (pool.intra_cores <= 1) return 0;
  return ShareOf(pool.intra_cores, pool.running + 1);
}

int ThreadShare::blas_threads_now() {
  BlasPool& pool = Pool();
  std::lock_guard<std::mutex> lock(pool.mu);
  return pool.get != nullptr ? pool.get() : 0;
}

int ThreadShare::running() {
  BlasPool& pool = Pool();
  std::lock_guard<std::mutex> lock(pool.mu);
  return pool.running;
}

}  // namespace encoder::runner
