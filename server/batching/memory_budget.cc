#include "server/batching/memory_budget.h"

#include <algorithm>
#include <fstream>
#include <sstream>

namespace encoder::batching {

MemoryBudget::MemoryBudget(int64_t capacity_bytes)
    : capacity_(std::max<int64_t>(capacity_bytes, 1)) {}

int64_t MemoryBudget::capacity() const { return capacity_; }

int64_t MemoryBudget::held() const {
  MutexLock lock(&mu_);
  return held_;
}

void MemoryBudget::Acquire(int64_t bytes) {
  bytes = std::max<int64_t>(bytes, 0);
  MutexLock lock(&mu_);
  while (held_ != 0 && bytes > capacity_ - held_) cv_.Wait(&mu_);
  held_ += bytes;
}

void MemoryBudget::Release(int64_t bytes) {
  {
    MutexLock lock(&mu_);
    held_ -= std::max<int64_t>(bytes, 0);
  }
  cv_.SignalAll();
}

namespace {

// The first number in `path`, or -1 (missing file, "max", garbage).
int64_t ReadNumber(const std::string& path) {
  std::ifstream in(path);
  std::string word;
  if (!(in >> word)) return -1;
  try {
    size_t used = 0;
    const long long value = std::stoll(word, &used);
    return used == word.size() && value > 0 ? value : -1;
  } catch (...) {
    return -1;
  }
}

int64_t MemTotal() {
  std::ifstream in("/proc/meminfo");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string key;
    long long kib = 0;
    if (fields >> key >> kib && key == "MemTotal:") return kib * 1024;
  }
  return -1;
}

}  // namespace

int64_t DetectMemoryLimit(std::string* source) {
  const int64_t total = MemTotal();
  // cgroup v1 reports "no limit" as a huge number: ignore limits above RAM.
  for (const char* path : {"/sys/fs/cgroup/memory.max",
                           "/sys/fs/cgroup/memory/memory.limit_in_bytes"}) {
    const int64_t limit = ReadNumber(path);
    if (limit > 0 && (total <= 0 || limit < total)) {
      if (source != nullptr) *source = path;
      return limit;
    }
  }
  if (source != nullptr) *source = "/proc/meminfo MemTotal";
  return total > 0 ? total : int64_t{4} << 30;
}

}  // namespace encoder::batching
