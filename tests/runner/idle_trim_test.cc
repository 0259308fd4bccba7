#include "server/runner/idle_trim.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <thread>
#include <vector>

namespace encoder::runner {
namespace {

using std::chrono::milliseconds;

// Resident pages of this process, in bytes.
int64_t ResidentBytes() {
  std::ifstream statm("/proc/self/statm");
  int64_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * sysconf(_SC_PAGESIZE);
}

// Busy work on this thread for `ms` of CPU time.
void Spin(int ms) {
  const auto end = std::chrono::steady_clock::now() + milliseconds(ms);
  volatile uint64_t x = 0;
  while (std::chrono::steady_clock::now() < end) x = x + 1;
}

TEST(IdleMallocTrimmerTest, ZeroIdleTimeMeansOff) {
  IdleTrimOptions options;
  options.idle_ms = 0;
  EXPECT_EQ(IdleMallocTrimmer::Start(options), nullptr);
}

// Half of many 64 KiB blocks freed, every other one: the free memory lies
// between live blocks, where glibc neither unmaps nor trims it. After the
// work, a quiet spell trims and the resident set falls by most of it.
TEST(IdleMallocTrimmerTest, QuietAfterWorkGivesFreeHeapMemoryBack) {
  IdleTrimOptions options;
  // Long enough that a loaded machine's scheduler does not make this
  // process look quiet (the quiet is measured in its CPU time).
  options.idle_ms = 500;
  auto trimmer = IdleMallocTrimmer::Start(options);
  if (trimmer == nullptr) GTEST_SKIP() << "not glibc's allocator";
  // Start-up work (the test binary's own) may be trimmed first.
  std::this_thread::sleep_for(milliseconds(1200));
  const int64_t trims_before = trimmer->trims();

  constexpr size_t kBlock = 64 << 10;
  constexpr int kBlocks = 3200;  // 200 MiB
  std::vector<void*> blocks;
  for (int i = 0; i < kBlocks; ++i) {
    blocks.push_back(malloc(kBlock));
    ASSERT_NE(blocks.back(), nullptr);
    std::memset(blocks.back(), 1, kBlock);
  }
  for (int i = 0; i < kBlocks; i += 2) free(blocks[i]);
  Spin(100);  // the work that makes a trim worthwhile
  const int64_t before = ResidentBytes();
  EXPECT_EQ(trimmer->trims(), trims_before);  // busy: no trim yet

  for (int wait = 0; wait < 50 && trimmer->trims() == trims_before; ++wait) {
    std::this_thread::sleep_for(milliseconds(100));
  }
  EXPECT_EQ(trimmer->trims(), trims_before + 1);
  const int64_t after = ResidentBytes();
  EXPECT_LT(after, before - 80 * (int64_t{1} << 20))
      << "resident " << (before >> 20) << " MiB -> " << (after >> 20) << " MiB";

  // Quiet without new work: no further trims.
  std::this_thread::sleep_for(milliseconds(1200));
  EXPECT_EQ(trimmer->trims(), trims_before + 1);
  for (int i = 1; i < kBlocks; i += 2) free(blocks[i]);
}

// While the process stays busy, it never trims.
TEST(IdleMallocTrimmerTest, NoTrimWhileBusy) {
  IdleTrimOptions options;
  options.idle_ms = 300;
  auto trimmer = IdleMallocTrimmer::Start(options);
  if (trimmer == nullptr) GTEST_SKIP() << "not glibc's allocator";
  std::this_thread::sleep_for(milliseconds(800));  // start-up trim, if any
  const int64_t trims_before = trimmer->trims();
  Spin(1000);
  EXPECT_EQ(trimmer->trims(), trims_before);
}

}  // namespace
}  // namespace encoder::runner
