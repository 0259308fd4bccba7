// Start-up's compute steps (process.h): the device, the thread pools, the
// CPU's features and the precision options.
#include "server/app/process.h"

#include <ATen/Parallel.h>
#include <spdlog/spdlog.h>

#include <sys/resource.h>

#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "server/app/accept_reserve.h"
#include "server/runner/cpu_buffer_cache.h"
#include "server/runner/thread_policy.h"

namespace encoder::app {
namespace {

// Every connection holds a descriptor: start with the soft limit at the
// hard limit, so the kernel's limit is the only one (accept_reserve.h keeps
// the listeners alive at that limit).
void RaiseOpenFileLimit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return;
  const rlim_t before = limit.rlim_cur;
  if (limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &limit) != 0) limit.rlim_cur = before;
  }
  spdlog::info("open file limit {} (was {}, hard limit {})",
               static_cast<uint64_t>(limit.rlim_cur),
               static_cast<uint64_t>(before),
               static_cast<uint64_t>(limit.rlim_max));
}

absl::StatusOr<at::Device> ParseDevice(const std::string& name) {
  if (name == "auto") {
    return at::hasCUDA() ? at::Device(at::kCUDA, 0) : at::Device(at::kCPU);
  }
  if (name == "cpu") return at::Device(at::kCPU);
  if (name == "cuda" || absl::StartsWith(name, "cuda:")) {
    if (!at::hasCUDA()) {
      return absl::FailedPreconditionError(
          absl::StrCat("--device=", name, " but this build or machine has ",
                       "no CUDA; use --device=cpu"));
    }
    try {
      return at::Device(name);
    } catch (const c10::Error&) {
      return absl::InvalidArgumentError(absl::StrCat("bad --device ", name));
    }
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--device must be auto, cpu, cuda or cuda:N, got ", name));
}

}  // namespace

void RaiseDescriptorLimits() {
  RaiseOpenFileLimit();
  if (!encoder::OpenAcceptReserve()) {
    spdlog::warn("no descriptor to hold in reserve for accept");
  }
}

absl::Status ConfigureCompute(Process& p) {
  const encoder::ServeFlags& flags = p.flags;
  absl::StatusOr<at::Device> device = ParseDevice(flags.device);
  if (!device.ok()) return device.status();
  p.device = *device;
  const encoder::runner::UsableCores cores =
      encoder::runner::DetectUsableCores();
  const int executions = flags.executions_per_model > 0
                             ? flags.executions_per_model
                             : encoder::runner::DefaultExecutionsPerModel(
                                   p.device.is_cuda(), cores);
  const std::string threads = encoder::runner::ApplyThreadPolicy(
      flags.intra_op_threads > 0
          ? flags.intra_op_threads
          : encoder::runner::DefaultIntraOpThreads(cores, executions),
      flags.blas_threads);
  // Asked for, a CPU batch that runs alone takes every usable core for its
  // products, and batches side by side split them.
  std::string share = "intra-op threads fixed";
  const bool can_share = flags.intra_op_threads == 0 && !p.device.is_cuda();
  if (flags.share_intra_op == "true") {
    share = can_share ? encoder::runner::EnableIntraOpShare(cores.cores)
                      : std::string(
                            "intra-op threads fixed (--intra-op-threads "
                            "is set, or the device is a GPU)");
  } else if (flags.share_intra_op == "auto" && can_share) {
    share = encoder::runner::ShareIntraOpByDefault(cores)
                ? encoder::runner::EnableIntraOpShare(cores.cores)
                : absl::StrCat("intra-op threads fixed (", cores.cores,
                               " usable cores; --share-intra-op-threads=auto "
                               "shares with 2 or 3)");
  }
  if (!p.device.is_cuda()) {
    share = absl::StrCat(share, "; ",
                         encoder::runner::SetOneThreadBelowFlops(
                             flags.one_thread_below_mflop * 1e6));
  }
  const encoder::runner::IdleTrimOptions trim_options = flags.trim;
  p.trimmer = encoder::runner::IdleMallocTrimmer::Start(trim_options);
  spdlog::info("{}", p.trimmer
                         ? p.trimmer->Describe()
                         : std::string("free heap memory kept by malloc"));
  spdlog::info("{}", encoder::runner::InstallCpuBufferCache(
                         flags.cpu_buffer_cache_bytes));
  if (const std::string bad = encoder::model::CpuIsaCapError(); !bad.empty()) {
    return absl::InvalidArgumentError(bad);
  }
  p.cpu = &encoder::model::DetectCpuFeatures();
  spdlog::info("CPU {}: {}{}; {}; {}", p.cpu->model, p.cpu->Joined(),
               p.cpu->isa_cap.empty()
                   ? std::string()
                   : absl::StrCat(" (capped at ", p.cpu->isa_cap, ")"),
               threads, share);
  p.host_options = flags.host;
  p.host_options.device = p.device;
  p.host_options.long_input = flags.limits.long_input;
  p.host_options.max_extrapolation_tokens =
      flags.diagnose.max_extrapolation_tokens;
  p.host_options.batching.executions = executions;
  spdlog::info(
      "up to {} batches per model run at once{}",
      p.host_options.batching.executions,
      flags.executions_per_model > 0 ? " (--executions-per-model)" : "");
  return encoder::ApplyPrecisionFlags(p.precision, *p.cpu, &p.host_options);
}

}  // namespace encoder::app
