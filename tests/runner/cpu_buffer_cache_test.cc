// The caching CPU allocator: reuse, size classes, the byte cap, threads,
// and a model forward whose results do not change when its buffers come
// from the cache.
#include "server/runner/cpu_buffer_cache.h"

#include <ATen/ATen.h>
#include <c10/core/CPUAllocator.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include "server/model/encoder.h"

namespace encoder::runner {
namespace {

constexpr size_t kMiB = 1 << 20;

TEST(CpuBufferCacheTest, SizeClassesStepByAnEighthOfAPowerOfTwo) {
  EXPECT_EQ(CpuBufferCache::SizeClass(100), 100u);
  EXPECT_EQ(CpuBufferCache::SizeClass(CpuBufferCache::kMinBlockBytes - 1),
            CpuBufferCache::kMinBlockBytes - 1);
  // 1 MiB is a power of two: itself. 1 MiB + 1 rounds to 1 MiB + 256 KiB
  // (steps of 2 MiB / 8 between 1 and 2 MiB).
  EXPECT_EQ(CpuBufferCache::SizeClass(kMiB), kMiB);
  EXPECT_EQ(CpuBufferCache::SizeClass(kMiB + 1), kMiB + kMiB / 4);
  EXPECT_EQ(CpuBufferCache::SizeClass(3 * kMiB - 5), 3 * kMiB);
  for (size_t n = CpuBufferCache::kMinBlockBytes; n < 64 * kMiB;
       n = n * 9 / 8 + 4093) {
    const size_t c = CpuBufferCache::SizeClass(n);
    EXPECT_GE(c, n);
    EXPECT_LE(static_cast<double>(c), n * 1.25) << n;
    EXPECT_EQ(CpuBufferCache::SizeClass(c), c) << n;
  }
}

TEST(CpuBufferCacheTest, FreedLargeBlocksAreReusedSmallOnesAreNot) {
  CpuBufferCache cache(64 * kMiB);
  void* first = nullptr;
  {
    c10::DataPtr p = cache.allocate(3 * kMiB);
    first = p.get();
    std::memset(first, 1, 3 * kMiB);
  }
  EXPECT_EQ(cache.stats().cached_bytes, static_cast<int64_t>(3 * kMiB));
  {
    // A slightly smaller request of the same class gets the same block.
    c10::DataPtr p = cache.allocate(3 * kMiB - 1000);
    EXPECT_EQ(p.get(), first);
    EXPECT_EQ(cache.stats().cached_bytes, 0);
    // Another block of that class while the first is in use: a new one.
    c10::DataPtr q = cache.allocate(3 * kMiB);
    EXPECT_NE(q.get(), first);
  }
  const CpuBufferCacheStats stats = cache.stats();
  EXPECT_EQ(stats.hits, 1);
  EXPECT_EQ(stats.misses, 2);
  EXPECT_EQ(stats.cached_bytes, static_cast<int64_t>(6 * kMiB));
  { c10::DataPtr small = cache.allocate(1000); }
  EXPECT_EQ(cache.stats().misses, 2);  // small requests bypass the cache
  cache.Trim();
  EXPECT_EQ(cache.stats().cached_bytes, 0);
}

TEST(CpuBufferCacheTest, RawAllocationsOfAnySizeComeBack) {
  // Kernels that want scratch space (GELU's, oneDNN's) allocate raw: the
  // data pointer must be the context and raw_deleter must free both kinds.
  CpuBufferCache cache(64 * kMiB);
  void* large = cache.raw_allocate(2 * kMiB);
  void* small = cache.raw_allocate(1000);
  ASSERT_NE(large, nullptr);
  ASSERT_NE(small, nullptr);
  std::memset(large, 7, 2 * kMiB);
  std::memset(small, 7, 1000);
  cache.raw_deallocate(small);
  cache.raw_deallocate(large);
  EXPECT_EQ(cache.stats().cached_bytes, static_cast<int64_t>(2 * kMiB));
  void* again = cache.raw_allocate(2 * kMiB - 64);
  EXPECT_EQ(again, large);
  cache.raw_deallocate(again);
}

TEST(CpuBufferCacheTest, TheCapBoundsWhatIsKept) {
  CpuBufferCache cache(5 * kMiB);
  {
    std::vector<c10::DataPtr> held;
    for (int i = 0; i < 4; ++i) held.push_back(cache.allocate(2 * kMiB));
  }
  const CpuBufferCacheStats stats = cache.stats();
  EXPECT_EQ(stats.cached_bytes, static_cast<int64_t>(4 * kMiB));
  EXPECT_EQ(stats.dropped, 2);
}

TEST(CpuBufferCacheTest, TheBlocksFreedLongestAgoMakeRoom) {
  CpuBufferCache cache(5 * kMiB);
  {
    c10::DataPtr a = cache.allocate(3 * kMiB);
    c10::DataPtr b = cache.allocate(2 * kMiB);
    c10::DataPtr c = cache.allocate(2 * kMiB);
    a.clear();  // cached: 3
    b.clear();  // cached: 3 + 2
    c.clear();  // 3 MiB, the oldest, goes; cached: 2 + 2
  }
  EXPECT_EQ(cache.stats().cached_bytes, static_cast<int64_t>(4 * kMiB));
  EXPECT_EQ(cache.stats().dropped, 1);
  const int64_t hits = cache.stats().hits;
  c10::DataPtr two = cache.allocate(2 * kMiB);
  c10::DataPtr other = cache.allocate(2 * kMiB);
  EXPECT_EQ(cache.stats().hits, hits + 2);
  c10::DataPtr three = cache.allocate(3 * kMiB);
  EXPECT_EQ(cache.stats().hits, hits + 2);  // it was released
  // A block over the whole cap is never kept.
  { c10::DataPtr huge = cache.allocate(6 * kMiB); }
  EXPECT_EQ(cache.stats().dropped, 2);
  EXPECT_EQ(cache.stats().cached_bytes, 0);
}

TEST(CpuBufferCacheTest, ThreadsNeverShareABlock) {
  CpuBufferCache cache(256 * kMiB);
  std::vector<std::thread> threads;
  std::atomic<int> overlaps{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 200; ++round) {
        const size_t n = (1 + (round + t) % 3) * kMiB;
        c10::DataPtr p = cache.allocate(n);
        auto* bytes = static_cast<unsigned char*>(p.get());
        std::memset(bytes, t + 1, n);
        for (size_t k = 0; k < n; k += 4096) {
          if (bytes[k] != t + 1) ++overlaps;
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(overlaps.load(), 0);
  const CpuBufferCacheStats stats = cache.stats();
  EXPECT_EQ(stats.hits + stats.misses, 800);
  EXPECT_GT(stats.hits, 700);
}

TEST(CpuBufferCacheTest, InstalledCacheServesTensorsAndKeepsResultsExact) {
  model::ModelConfig config;
  config.vocab_size = 300;
  config.d_model = 64;
  config.num_heads = 4;
  config.num_layers = 2;
  config.d_ff = 256;
  config.max_input_tokens = 512;
  config.activation = model::Activation::kGelu;  // GELU allocates raw
  auto encoder = model::Encoder::Create(
      config, model::Encoder::RandomStateDict(config, 7), at::kCPU);
  ASSERT_TRUE(encoder.ok()) << encoder.status();
  model::EncoderInput input;
  input.ids = at::randint(3, 300, {8, 200}, at::kLong);
  input.mask = at::ones({8, 200}, at::kBool);
  auto before = (*encoder)->Forward(input, {});
  ASSERT_TRUE(before.ok());
  const at::Tensor want = before->tokens.clone();

  EXPECT_EQ(InstallCpuBufferCache(0), "CPU buffer cache off");
  const std::string installed = InstallCpuBufferCache(512 * kMiB);
  if (installed.find("AddressSanitizer") != std::string::npos) {
    GTEST_SKIP() << installed;
  }
  EXPECT_NE(installed.find("512 MiB"), std::string::npos);
  for (int round = 0; round < 3; ++round) {
    auto after = (*encoder)->Forward(input, {});
    ASSERT_TRUE(after.ok());
    EXPECT_TRUE(at::equal(after->tokens, want)) << "round " << round;
  }
  const std::optional<CpuBufferCacheStats> stats =
      InstalledCpuBufferCacheStats();
  ASSERT_TRUE(stats.has_value());
  // Rounds after the first find their buffers in the cache.
  EXPECT_GT(stats->hits, 0);
  EXPECT_GT(stats->cached_bytes, 0);
}

}  // namespace
}  // namespace encoder::runner
