#include "server/runner/device_memory.h"

#include <ATen/ATen.h>

#ifdef ENCODER_WITH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#endif

#include "absl/strings/str_cat.h"
#include "server/model/torch_compat.h"

namespace encoder::runner {

absl::StatusOr<DeviceMemory> ReadDeviceMemory(const std::string& name) {
  at::Device device(at::kCPU);
  try {
    device = at::Device(name);
  } catch (const c10::Error&) {
    return absl::InvalidArgumentError(absl::StrCat("bad device ", name));
  }
  if (!device.is_cuda()) {
    return absl::InvalidArgumentError(absl::StrCat(name, " is not CUDA"));
  }
#ifdef ENCODER_WITH_CUDA
  namespace alloc = c10::cuda::CUDACachingAllocator;
  const alloc::DeviceStats stats =
      alloc::getDeviceStats(device.has_index() ? device.index() : 0);
  const size_t all = model::kAggregateStat;
  return DeviceMemory{stats.allocated_bytes[all].current,
                      stats.reserved_bytes[all].current};
#else
  return absl::UnimplementedError("this build has no CUDA");
#endif
}

}  // namespace encoder::runner
