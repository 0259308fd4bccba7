#include "server/runner/cpu_buffer_cache.h"

#include <c10/core/CPUAllocator.h>

#include <algorithm>
#include <string>
#include <unordered_map>

#include "absl/strings/str_format.h"
#include "server/common/sanitizers.h"

namespace encoder::runner {

struct CpuBufferCache::Block {
  c10::DataPtr memory;  // from the default allocator, size_class bytes
  size_t size_class = 0;
  const CpuBufferCache* owner = nullptr;
  std::list<Block*>::iterator lru;  // its place in lru_ while it is free
};

namespace {

// Every large block of every cache by its data pointer, so that Release,
// which gets only the pointer, finds the block and its cache.
std::mutex registry_mu;
std::unordered_map<void*, CpuBufferCache::Block*>& Registry() {
  static auto* registry =
      new std::unordered_map<void*, CpuBufferCache::Block*>();
  return *registry;
}

}  // namespace

CpuBufferCache::CpuBufferCache(int64_t max_cached_bytes)
    : base_(c10::GetDefaultCPUAllocator()),
      max_cached_bytes_(max_cached_bytes) {}

CpuBufferCache::~CpuBufferCache() { Trim(); }

size_t CpuBufferCache::SizeClass(size_t n) {
  if (n < kMinBlockBytes) return n;
  // Keep the top three bits of n - 1's magnitude, rounding up.
  const int width = 64 - __builtin_clzll(n - 1);  // n - 1 < 2^width
  const size_t step = size_t{1} << (width - 3);
  return (n + step - 1) / step * step;
}

c10::DataPtr CpuBufferCache::Allocate(size_t n) const {
  if (n < kMinBlockBytes) return base_->allocate(n);
  const size_t size_class = SizeClass(n);
  Block* block = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = free_.find(size_class);
    if (it != free_.end() && !it->second.empty()) {
      block = it->second.back();
      it->second.pop_back();
      lru_.erase(block->lru);
      stats_.cached_bytes -= static_cast<int64_t>(size_class);
      ++stats_.hits;
    } else {
      ++stats_.misses;
    }
  }
  if (block == nullptr) {
    block = new Block;
    block->memory = base_->allocate(size_class);
    block->size_class = size_class;
    block->owner = this;
    std::lock_guard<std::mutex> lock(registry_mu);
    Registry()[block->memory.get()] = block;
  }
  void* data = block->memory.get();
  return c10::DataPtr(data, data, &CpuBufferCache::Release,
                      c10::Device(c10::DeviceType::CPU));
}

void CpuBufferCache::Release(void* data) {
  Block* block = nullptr;
  {
    std::lock_guard<std::mutex> lock(registry_mu);
    auto it = Registry().find(data);
    if (it != Registry().end()) block = it->second;
  }
  if (block == nullptr) {
    // A small allocation handed out raw by the default allocator.
    c10::GetDefaultCPUAllocator()->raw_deallocate(data);
    return;
  }
  block->owner->Return(block);
}

void CpuBufferCache::Return(Block* block) const {
  const int64_t size = static_cast<int64_t>(block->size_class);
  std::vector<Block*> evicted;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (size > max_cached_bytes_) {
      ++stats_.dropped;
      evicted.push_back(block);
    } else {
      // Make room by releasing the blocks freed longest ago: shapes the
      // traffic has moved away from, while the block just freed is the one
      // the next batch of this shape asks for.
      while (stats_.cached_bytes + size > max_cached_bytes_) {
        Block* oldest = lru_.front();
        lru_.pop_front();
        std::vector<Block*>& same = free_[oldest->size_class];
        same.erase(std::find(same.begin(), same.end(), oldest));
        stats_.cached_bytes -= static_cast<int64_t>(oldest->size_class);
        ++stats_.dropped;
        evicted.push_back(oldest);
      }
      free_[block->size_class].push_back(block);
      block->lru = lru_.insert(lru_.end(), block);
      stats_.cached_bytes += size;
    }
  }
  for (Block* b : evicted) Free(b);
}

void CpuBufferCache::Free(Block* block) {
  {
    std::lock_guard<std::mutex> lock(registry_mu);
    Registry().erase(block->memory.get());
  }
  delete block;  // its DataPtr frees the memory
}

CpuBufferCacheStats CpuBufferCache::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void CpuBufferCache::Trim() {
  std::map<size_t, std::vector<Block*>> blocks;
  {
    std::lock_guard<std::mutex> lock(mu_);
    blocks.swap(free_);
    lru_.clear();
    stats_.cached_bytes = 0;
  }
  for (auto& [size, list] : blocks) {
    for (Block* b : list) Free(b);
  }
}

namespace {
// Never destroyed: tensors may be freed during exit, after statics die.
CpuBufferCache* installed = nullptr;
}  // namespace

std::string InstallCpuBufferCache(int64_t max_cached_bytes) {
  if (max_cached_bytes <= 0) return "CPU buffer cache off";
#ifdef ENCODER_ASAN
  // Reused blocks would hide a use after free from AddressSanitizer.
  return "CPU buffer cache off (AddressSanitizer build)";
#endif
  if (installed == nullptr) {
    installed = new CpuBufferCache(max_cached_bytes);
    // Priority 1 outranks LibTorch's own registration (0).
    c10::SetCPUAllocator(installed, /*priority=*/1);
  }
  return absl::StrFormat(
      "CPU buffer cache keeps up to %.0f MiB of freed blocks >= %d KiB",
      max_cached_bytes / double(1 << 20), CpuBufferCache::kMinBlockBytes >> 10);
}

std::optional<CpuBufferCacheStats> InstalledCpuBufferCacheStats() {
  if (installed == nullptr) return std::nullopt;
  return installed->stats();
}

}  // namespace encoder::runner
