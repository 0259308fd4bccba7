// A caching allocator for LibTorch's CPU tensors. Every batch allocates the
// same large activation buffers (attention scores, feed-forward
// intermediates) and frees them at the end; glibc hands buffers that large
// back to the kernel at once, so the next batch faults every page in again
// (hundreds to thousands of minor faults per sequence, and the system time
// that goes with them). This allocator keeps freed blocks of at least
// kMinBlockBytes, up to a byte cap, and gives them out again to requests of
// the same size class, so steady traffic runs on memory that is already
// mapped. When a free would pass the cap, the blocks freed longest ago are
// released first. Smaller requests go straight to LibTorch's default allocator.
#ifndef ENCODER_SERVER_RUNNER_CPU_BUFFER_CACHE_H_
#define ENCODER_SERVER_RUNNER_CPU_BUFFER_CACHE_H_

#include <c10/core/Allocator.h>

#include <cstddef>
#include <cstdint>
#include <list>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "server/model/torch_compat.h"

namespace encoder::runner {

struct CpuBufferCacheStats {
  int64_t cached_bytes = 0;  // free blocks held now
  int64_t hits = 0;          // large requests served from the cache
  int64_t misses = 0;        // large requests that went to the base allocator
  int64_t dropped = 0;       // free blocks released to stay under the cap
};

class CpuBufferCache : public model::CompatAllocator {
 public:
  static constexpr size_t kMinBlockBytes = 256 << 10;

  // LibTorch's default CPU allocator serves every allocation;
  // `max_cached_bytes` caps the free blocks kept.
  explicit CpuBufferCache(int64_t max_cached_bytes);
  // Releases the free blocks; blocks still in use must not outlive it.
  ~CpuBufferCache() override;

  // Large blocks' data pointer is also their context, so LibTorch's raw
  // allocations (raw_allocate / raw_deallocate, used by some kernels for
  // scratch space) work on them too.
  c10::DataPtr Allocate(size_t n) const override;
  c10::DeleterFnPtr raw_deleter() const override { return &Release; }

  // The size a request of `n` bytes is rounded up to: n itself below
  // kMinBlockBytes, else the next size with at most three significant bits
  // (steps of 1/8 of a power of two, so at most 12.5% is wasted and
  // lengths that differ a little share blocks).
  static size_t SizeClass(size_t n);

  CpuBufferCacheStats stats() const;
  // Releases every free block to the base allocator.
  void Trim();

 public:
  struct Block;  // defined in the .cc

 private:
  // Frees `data`: a large block goes back to its cache, anything else to
  // the default allocator.
  static void Release(void* data);
  void Return(Block* block) const;
  static void Free(Block* block);

  c10::Allocator* base_;
  const int64_t max_cached_bytes_;
  mutable std::mutex mu_;
  mutable std::map<size_t, std::vector<Block*>> free_;  // by size class
  mutable std::list<Block*> lru_;  // every free block, freed longest ago first
  mutable CpuBufferCacheStats stats_;
};

// Makes a process-wide CpuBufferCache over LibTorch's default CPU allocator
// the CPU allocator of every tensor created afterwards. Call once, before
// models load; 0 leaves LibTorch's allocator in place. Returns a line for
// the start-up log.
std::string InstallCpuBufferCache(int64_t max_cached_bytes);

// The server's --cpu-buffer-cache-bytes default.
inline constexpr int64_t kDefaultCpuBufferCacheBytes = int64_t{256} << 20;

// The installed cache's statistics; nullopt when none is installed.
std::optional<CpuBufferCacheStats> InstalledCpuBufferCacheStats();

}  // namespace encoder::runner

#endif  // ENCODER_SERVER_RUNNER_CPU_BUFFER_CACHE_H_
