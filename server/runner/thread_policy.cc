#include "server/runner/thread_policy.h"

#include <ATen/Config.h>
#include <ATen/Parallel.h>
#include <dlfcn.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <exception>
#include <fstream>
#include <mutex>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "server/common/thread_name.h"

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
  // SetOneThreadBelowFlops: passes with less arithmetic run on one thread.
  double one_thread_below_flops = 0;
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

// Sets the calling thread's OpenMP count (and MKL's thread-local one) to
// `threads`, after LibTorch's once-per-thread setup, which would otherwise
// undo it at the thread's first parallel region. Both copies of the
// once-per-thread flag are set: LibTorch's own (behind get_num_threads) and
// the header's inline one that code built outside LibTorch checks. Returns
// the OpenMP count before.
int SetThreadCount(BlasPool& pool, int threads, int* previous_mkl) {
  at::get_num_threads();
  at::internal::lazy_init_num_threads();
  const int previous = pool.omp_get();
  pool.omp_set(threads);
  if (pool.mkl_local != nullptr) {
    const int mkl = pool.mkl_local(threads);
    if (previous_mkl != nullptr) *previous_mkl = mkl;
  }
  return previous;
}

// The one thread that runs the passes that have every core (ThreadShare),
// so that only it keeps an OpenMP pool of every core. Started at the first
// such pass; lives as long as the process. Takes one task at a time.
class WideLane {
 public:
  static WideLane& Get() {
    static WideLane* lane = new WideLane;  // never destroyed: see Loop
    return *lane;
  }

  // Runs `fn` on the lane with `threads` intra-op threads and returns its
  // status, or throws what it threw.
  absl::Status Run(int threads, absl::FunctionRef<absl::Status()> fn) {
    Task task{fn, threads, absl::OkStatus(), nullptr, false};
    std::unique_lock<std::mutex> lock(mu_);
    if (!thread_started_) {
      // Detached: a process that exits with the lane waiting does not wait
      // for it.
      std::thread(&WideLane::Loop, this).detach();
      thread_started_ = true;
    }
    room_.wait(lock, [this] { return task_ == nullptr; });
    task_ = &task;
    work_.notify_one();
    done_.wait(lock, [&task] { return task.finished; });
    lock.unlock();
    if (task.thrown) std::rethrow_exception(task.thrown);
    return task.status;
  }

 private:
  struct Task {
    absl::FunctionRef<absl::Status()> fn;
    int threads;
    absl::Status status;
    std::exception_ptr thrown;
    bool finished = false;
  };

  void Loop() {
    NameThisThread("intra-op-lane");
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      work_.wait(lock, [this] { return task_ != nullptr; });
      Task* task = task_;
      lock.unlock();
      if (task->threads != threads_) {
        SetThreadCount(Pool(), task->threads, nullptr);
        threads_ = task->threads;
      }
      try {
        task->status = task->fn();
      } catch (...) {
        task->thrown = std::current_exception();
      }
      lock.lock();
      task->finished = true;
      task_ = nullptr;
      done_.notify_all();
      room_.notify_one();
    }
  }

  std::mutex mu_;
  std::condition_variable work_;  // a task is waiting for the lane
  std::condition_variable done_;  // a task finished
  std::condition_variable room_;  // the lane has no task
  Task* task_ = nullptr;
  bool thread_started_ = false;
  int threads_ = 0;  // the lane thread's count now (the lane's only)
};

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

void RunOnTransientThread(absl::FunctionRef<void()> fn) {
  std::thread thread([fn] { fn(); });
  thread.join();
}

bool ShareIntraOpByDefault(const UsableCores& cores) {
  return cores.cores >= 2 && cores.cores <= kShareIntraOpMaxAutoCores;
}

int DefaultExecutionsPerModel(bool cuda, const UsableCores& cores) {
  if (cuda) return 1;
  return std::clamp(cores.cores, 1, kMaxDefaultExecutions);
}

int DefaultIntraOpThreads(const UsableCores& cores, int executions) {
  return std::max(1, cores.cores / std::max(1, executions));
}

ThreadShare::ThreadShare(bool counts, double flops) : counts_(counts) {
  if (!counts_) return;
  BlasPool& pool = Pool();
  int intra = 0;
  {
    std::lock_guard<std::mutex> lock(pool.mu);
    ++pool.running;
    pool.ShareLocked();
    if (flops >= 0 && flops < pool.one_thread_below_flops) {
      one_thread_ = true;
      intra = 1;
    } else if (pool.intra_cores > 1) {
      intra = ShareOf(pool.intra_cores, pool.running);
      // Every core: the pass runs on the wide thread (Run).
      if (intra == pool.intra_cores) wide_threads_ = intra;
    }
  }
  if (intra == 0 || wide_threads_ > 0) return;
  previous_omp_ = SetThreadCount(pool, intra, &previous_mkl_);
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

absl::Status ThreadShare::Run(absl::FunctionRef<absl::Status()> fn) const {
  if (wide_threads_ == 0) return fn();
  return WideLane::Get().Run(wide_threads_, fn);
}

// Finds the calls that set the calling thread's OpenMP and MKL counts;
// false without an OpenMP runtime. Looked up at run time, as OpenBLAS's:
// the OpenMP runtime and MKL are the ones LibTorch loaded. MKL's C entry
// point is the mixed-case name (mkl_service.h maps mkl_set_num_threads_local
// onto it); the lowercase symbol is the Fortran one, which takes a pointer.
bool LookUpOpenMpLocked(BlasPool& pool) {
#if AT_PARALLEL_OPENMP
  pool.omp_set =
      reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "omp_set_num_threads"));
  pool.omp_get =
      reinterpret_cast<GetThreads>(dlsym(RTLD_DEFAULT, "omp_get_max_threads"));
  pool.mkl_local = reinterpret_cast<SetLocalThreads>(
      dlsym(RTLD_DEFAULT, "MKL_Set_Num_Threads_Local"));
  return pool.omp_set != nullptr && pool.omp_get != nullptr;
#else
  (void)pool;
  return false;
#endif
}

std::string SetOneThreadBelowFlops(double flops) {
  BlasPool& pool = Pool();
  std::lock_guard<std::mutex> lock(pool.mu);
  pool.one_thread_below_flops = 0;
  if (flops <= 0) return "every pass uses its intra-op threads";
  if (!LookUpOpenMpLocked(pool)) {
    return "every pass uses its intra-op threads (LibTorch's pool is not "
           "OpenMP)";
  }
  pool.one_thread_below_flops = flops;
  return absl::StrFormat("a pass of under %g MFLOP runs on one thread",
                         flops / 1e6);
}

std::string EnableIntraOpShare(int cores) {
  BlasPool& pool = Pool();
  std::lock_guard<std::mutex> lock(pool.mu);
  pool.intra_cores = 0;
#if AT_PARALLEL_OPENMP
  if (!LookUpOpenMpLocked(pool)) {
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
      " (on the one thread kept for that), batches side by side split them");
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
