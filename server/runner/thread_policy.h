// The compute threads of the process: LibTorch's intra-op pool and the BLAS
// library's own pool (OpenBLAS keeps one per process, sized to every core
// unless told, which makes each matrix product of a one-thread server run
// on all cores and busy-wait there between products).
#ifndef ENCODER_SERVER_RUNNER_THREAD_POLICY_H_
#define ENCODER_SERVER_RUNNER_THREAD_POLICY_H_

#include <string>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"

namespace encoder::runner {

// The cores this process may keep busy: the CPUs of its affinity mask, or
// fewer when a cgroup CPU quota allows less (cgroup v2 `cpu.max`, v1
// `cpu/cpu.cfs_quota_us` over `cpu.cfs_period_us`; a quota of 1.5 CPUs
// counts as 2). A container's CPU limit is such a quota, and OpenBLAS sizes
// its pool by the CPUs it sees, not by the quota.
struct UsableCores {
  int cores = 1;             // what the process may use
  int affinity = 1;          // CPUs in its affinity mask
  double quota = 0;          // CPUs the cgroup quota allows; 0: none
  std::string quota_source;  // the file the quota came from
};
// `cgroup_root` is where the cgroup file system is mounted (tests pass a
// directory of their own).
UsableCores DetectUsableCores(
    const std::string& cgroup_root = "/sys/fs/cgroup");

// Sets LibTorch's pool to `intra_op_threads` and OpenBLAS's pool to
// `blas_threads`, or, when that is 0, to the usable cores if OpenBLAS chose
// more (it counts every CPU, not a container's quota); returns what is in
// effect, for the log ("1 intra-op threads, OpenBLAS 2 threads", with the
// quota when it decided, or "..., BLAS pool not OpenBLAS").
std::string ApplyThreadPolicy(int intra_op_threads, int blas_threads);

// The most batches of one model that run at once by default on a CPU.
inline constexpr int kMaxDefaultExecutions = 2;

// --one-thread-below-mflop's default: a CPU pass of fewer than this many
// million floating-point operations (BatchItem::compute's estimate) runs
// on one thread. Measured on AMD EPYC Zen 4 (encoder-bench-forward, batch
// 1, one thread against two): under about 3 MFLOP two threads gained at
// most 1.13x back to back and lost up to 0.68x with 200 us between passes;
// from about 6 MFLOP they gained 1.03-1.64x. All-MiniLM-L6-v2 does 21 per
// token, so only models far smaller than it are affected.
inline constexpr double kDefaultOneThreadBelowMflop = 4;
// --executions-per-model when it is 0: on a GPU 1 (the model's batches share
// one stream); on a CPU the usable cores, at most kMaxDefaultExecutions.
int DefaultExecutionsPerModel(bool cuda, const UsableCores& cores);

// --intra-op-threads when it is 0: the usable cores over the executions per
// model, at least 1 (1 on two cores with two executions), so that batches
// running side by side do not oversubscribe the cores with LibTorch's
// threads.
int DefaultIntraOpThreads(const UsableCores& cores, int executions);

// Runs `fn` on a new thread and waits for it to end. For work done once
// with LibTorch's intra-op threads (loading and warming models): an OpenMP
// runtime keeps a pool of threads for each thread that starts parallel work,
// for as long as that thread lives, and GNU libgomp, once the threads of all
// pools outnumber the CPUs, stops spinning before it sleeps (1,000 rounds
// instead of 300,000). A pool left behind by loading would make the
// threads of every later batch sleep and be woken between products; on a
// thread that ends, it is released with it.
void RunOnTransientThread(absl::FunctionRef<void()> fn);

// Counts a forward pass as running for as long as it lives, and divides
// the compute threads among the passes running in the process: OpenBLAS's
// pool that ApplyThreadPolicy set, and, once EnableIntraOpShare has run,
// the usable cores as this pass's LibTorch intra-op threads. A pass that
// starts sets its share to pool / running (at least 1): a pass that starts
// alone uses every thread, and two passes side by side (two batches of one
// model, or of two models) use half each instead of contending for the
// same threads. A pass already running keeps its count (the intra-op one
// until it ends; OpenBLAS's until its product ends); the next one takes
// the new share. When a pass ends, the share is not raised for those still
// running: under a steady load another starts soon, and idle pool threads
// spin for a while after each product they join, taking the cores the
// running passes use.
//
// The intra-op share is an OpenMP thread count, and OpenMP keeps a pool of
// threads for each thread that runs parallel work, as large as the largest
// count it ran with. Were every pass that started alone to run on its own
// thread, each executing thread would keep a pool of every core, and
// together they would outnumber the cores, which makes GNU libgomp sleep
// between products (see RunOnTransientThread). So a pass that gets every
// core (`wide()`) runs its work, through Run, on one thread of the process
// kept for that, whose pool is the only one that size; the other passes run
// on the calling thread with their share set there and put back at
// destruction, so such a pass must run on the thread that made it. Does
// nothing where the pools are not OpenBLAS or OpenMP, or not configured,
// and for a pass that does not count (`counts` false: a GPU model's, whose
// work runs on the device). Thread-safe.
//
// A pass whose arithmetic (`flops`, estimated by the caller; negative:
// unknown) is below SetOneThreadBelowFlops's threshold runs here on one
// thread (`one_thread()`): waking the intra-op threads for it, and their
// spinning after it, cost more than they save. It still counts as running.
class ThreadShare {
 public:
  explicit ThreadShare(bool counts = true, double flops = -1);
  ~ThreadShare();
  ThreadShare(const ThreadShare&) = delete;
  ThreadShare& operator=(const ThreadShare&) = delete;

  // Runs the pass's work and returns its status: on the wide thread when
  // the pass has every core, else here. What `fn` throws is thrown here.
  absl::Status Run(absl::FunctionRef<absl::Status()> fn) const;
  // Whether Run hands the work to the wide thread.
  bool wide() const { return wide_threads_ > 0; }
  // Whether the pass runs here on one thread for its small arithmetic.
  bool one_thread() const { return one_thread_; }

  // OpenBLAS's threads per product now (0: not OpenBLAS), and the passes
  // counted (tests and the log).
  static int blas_threads_now();
  static int running();

 private:
  const bool counts_;
  int wide_threads_ = 0;  // the wide thread's count for this pass; 0: here
  bool one_thread_ = false;
  int previous_omp_ = 0;  // the thread's OpenMP count before; 0: unchanged
  int previous_mkl_ = 0;  // MKL's thread-local count before
};

// The most usable cores with which --share-intra-op-threads=auto shares.
// With up to three, a pass that starts beside another gets one thread and
// so starts no OpenMP pool: the wide thread's pool is the only one, and
// libgomp's threads never outnumber the cores. With four or more, passes
// side by side would keep pools of their own beside it.
inline constexpr int kShareIntraOpMaxAutoCores = 3;
// Whether auto shares on these cores: 2 to kShareIntraOpMaxAutoCores.
bool ShareIntraOpByDefault(const UsableCores& cores);

// Lets ThreadShare size each CPU pass's intra-op threads: `cores` over the
// passes running when it starts (the usable cores, when --intra-op-threads
// is left to its default). Returns what is in effect, for the log, or why
// it is off: LibTorch's pool is not OpenMP, or its BLAS is OpenBLAS, whose
// own pool (split by ThreadShare) does the float32 products, so that
// OpenMP threads beside it would only contend for the cores; call it after
// ApplyThreadPolicy, which finds OpenBLAS. `cores` <= 1 turns it off.
std::string EnableIntraOpShare(int cores);

// Passes (ThreadShare) with less estimated arithmetic than `flops` run on
// one thread; 0 turns it off. Needs LibTorch on OpenMP. Returns what it
// did, for the log.
std::string SetOneThreadBelowFlops(double flops);
// The intra-op threads a pass starting now on this thread would get (0:
// the share is off); for tests.
int IntraOpShareCores();

}  // namespace encoder::runner

#endif  // ENCODER_SERVER_RUNNER_THREAD_POLICY_H_
