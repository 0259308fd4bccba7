// Memory held on a CUDA device by LibTorch's caching allocator.
#ifndef ENCODER_SERVER_RUNNER_DEVICE_MEMORY_H_
#define ENCODER_SERVER_RUNNER_DEVICE_MEMORY_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace encoder::runner {

struct DeviceMemory {
  int64_t allocated_bytes = 0;  // held by live tensors
  int64_t reserved_bytes = 0;   // held by the caching allocator
};

// `device` as at::Device names it ("cuda", "cuda:1"). UNIMPLEMENTED in
// builds without CUDA; INVALID_ARGUMENT for a non-CUDA device. Thread-safe.
absl::StatusOr<DeviceMemory> ReadDeviceMemory(const std::string& device);

}  // namespace encoder::runner

#endif  // ENCODER_SERVER_RUNNER_DEVICE_MEMORY_H_
