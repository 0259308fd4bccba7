// Gives back to the system the memory glibc's heaps keep after a burst,
// once the process has gone quiet. glibc keeps freed blocks (up to its
// adaptive mmap threshold, 32 MiB at most) in its heaps for reuse and
// returns only a heap's top; after a burst of large requests the resident
// set stays near the burst's peak although nothing uses that memory, which
// is what a container's memory limit and its dashboards see. A thread
// samples the process's CPU time; when the process has used next to no CPU
// for `idle_ms` after doing work, it calls malloc_trim(0), which releases
// every free page of every heap. Under load it never runs, so it costs
// nothing on the hot path (the next burst faults its pages in again).
//
// Since the trimmer returns the memory once the process is quiet, a
// running trimmer also has glibc keep freed memory under load (HoldFreed
// below): blocks up to 32 MiB come from the heaps instead of their own
// mappings, and a heap's free top is kept up to 512 MiB. Without that, a
// batch's buffers that LibTorch does not cache (oneDNN's, and those past
// the CPU buffer cache's cap) were mapped and faulted in afresh by every
// batch: on MiniLM int8 at 32 x 128 tokens, 9% of the samples were page
// faults, and holding the memory ran 91-94 sequences/s against 75-77
// (docs/benchmarks-history.md, "AMD EPYC (Zen 4) with AVX-512 VNNI and
// BF16").
#ifndef ENCODER_SERVER_RUNNER_IDLE_TRIM_H_
#define ENCODER_SERVER_RUNNER_IDLE_TRIM_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

namespace encoder::runner {

struct IdleTrimOptions {
  // Quiet time before a trim; 0: never trim.
  int64_t idle_ms = 1000;
  // "Quiet": the process used less CPU than this share of one core over
  // the last idle_ms.
  double idle_cpu_share = 0.05;
  // Work since the last trim (CPU ms) that makes another trim worthwhile.
  int64_t min_work_cpu_ms = 20;
};

class IdleMallocTrimmer {
 public:
  // Starts the sampling thread; nullptr when options.idle_ms is 0 or the
  // allocator is not glibc's (AddressSanitizer builds).
  static std::unique_ptr<IdleMallocTrimmer> Start(
      const IdleTrimOptions& options);
  // Stops and joins the thread.
  ~IdleMallocTrimmer();
  IdleMallocTrimmer(const IdleMallocTrimmer&) = delete;
  IdleMallocTrimmer& operator=(const IdleMallocTrimmer&) = delete;

  // Sets glibc's mmap threshold to its maximum and its trim threshold to
  // the values below, so freed memory stays mapped for the next batches;
  // Start does this when it starts a trimmer. A no-op where the allocator
  // is not glibc's.
  static void HoldFreed();
  // glibc refuses an mmap threshold above half its largest heap, 32 MiB on
  // 64-bit.
  static constexpr int kHeldMmapThreshold = 32 << 20;
  static constexpr int kHeldTrimThreshold = 512 << 20;

  // Trims done so far.
  int64_t trims() const { return trims_.load(); }
  // A line for the start-up log.
  std::string Describe() const;

 private:
  explicit IdleMallocTrimmer(const IdleTrimOptions& options);
  void Run();

  const IdleTrimOptions options_;
  std::atomic<int64_t> trims_{0};
  std::mutex mu_;
  std::condition_variable wake_;
  bool stop_ = false;  // guarded by mu_
  std::thread thread_;
};

}  // namespace encoder::runner

#endif  // ENCODER_SERVER_RUNNER_IDLE_TRIM_H_
