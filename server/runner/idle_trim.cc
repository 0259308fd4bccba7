#include "server/runner/idle_trim.h"

#include <malloc.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <utility>

#include "absl/strings/str_format.h"
#include "server/common/sanitizers.h"

namespace encoder::runner {
namespace {

// CPU time of every thread of the process, in ms.
double ProcessCpuMs() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) * 1e3 + t.tv_nsec / 1e6;
}

}  // namespace

std::unique_ptr<IdleMallocTrimmer> IdleMallocTrimmer::Start(
    const IdleTrimOptions& options) {
  if (options.idle_ms <= 0) return nullptr;
#ifdef ENCODER_ASAN  // not glibc's allocator
  return nullptr;
#endif
  HoldFreed();
  return std::unique_ptr<IdleMallocTrimmer>(new IdleMallocTrimmer(options));
}

void IdleMallocTrimmer::HoldFreed() {
#ifndef ENCODER_ASAN
  // Setting either threshold also ends glibc's own adjustment of both.
  mallopt(M_MMAP_THRESHOLD, kHeldMmapThreshold);
  mallopt(M_TRIM_THRESHOLD, kHeldTrimThreshold);
#endif
}

IdleMallocTrimmer::IdleMallocTrimmer(const IdleTrimOptions& options)
    : options_(options), thread_([this] { Run(); }) {}

IdleMallocTrimmer::~IdleMallocTrimmer() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

std::string IdleMallocTrimmer::Describe() const {
  return absl::StrFormat(
      "free heap memory goes back to the system after %d ms with under "
      "%.0f%% of a core busy, and stays mapped under load (blocks up to "
      "%d MiB from the heaps, up to %d MiB of free heap top kept)",
      options_.idle_ms, 100 * options_.idle_cpu_share, kHeldMmapThreshold >> 20,
      kHeldTrimThreshold >> 20);
}

void IdleMallocTrimmer::Run() {
  using Clock = std::chrono::steady_clock;
  const auto window = std::chrono::milliseconds(options_.idle_ms);
  const auto step = std::max(std::chrono::milliseconds(10), window / 4);
  // (when, process CPU ms) over the last window, oldest first.
  std::deque<std::pair<Clock::time_point, double>> samples;
  double cpu_at_last_trim = ProcessCpuMs();
  std::unique_lock<std::mutex> lock(mu_);
  while (!wake_.wait_for(lock, step, [this] { return stop_; })) {
    const Clock::time_point now = Clock::now();
    const double cpu = ProcessCpuMs();
    samples.emplace_back(now, cpu);
    while (samples.size() > 1 && now - samples[1].first >= window) {
      samples.pop_front();
    }
    const auto& [oldest, oldest_cpu] = samples.front();
    if (now - oldest < window) continue;  // not a whole window seen yet
    const double window_ms =
        std::chrono::duration<double, std::milli>(now - oldest).count();
    const bool quiet = cpu - oldest_cpu < options_.idle_cpu_share * window_ms;
    const bool worked = cpu - cpu_at_last_trim >= options_.min_work_cpu_ms;
    if (!quiet || !worked) continue;
    malloc_trim(0);
    trims_.fetch_add(1);
    cpu_at_last_trim = ProcessCpuMs();
    samples.clear();
  }
}

}  // namespace encoder::runner
