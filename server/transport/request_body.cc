#include "server/transport/request_body.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstring>
#include <utility>

namespace encoder::http::detail {
namespace {

constexpr size_t kBlockBytes = size_t{1} << 20;

}  // namespace

MappedBlock::MappedBlock(size_t capacity) {
  void* p = mmap(nullptr, capacity, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p != MAP_FAILED) {
    data_ = static_cast<char*>(p);
    capacity_ = capacity;
  }
}

MappedBlock::~MappedBlock() {
  if (data_ != nullptr) munmap(data_, capacity_);
}

MappedBlock::MappedBlock(MappedBlock&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      capacity_(std::exchange(other.capacity_, 0)) {}

size_t MappedBlock::Append(const char* bytes, size_t n) {
  const size_t k = std::min(n, room());
  std::memcpy(data_ + size_, bytes, k);
  size_ += k;
  return k;
}

std::string RequestBody::value_type::Take() {
  std::string out;
  if (blocks.empty()) {
    out = std::move(whole);
  } else {
    // The reservation is not touched until written: resident memory grows
    // as blocks are copied and shrinks as each one is unmapped.
    out.reserve(size);
    for (MappedBlock& block : blocks) {
      out.append(block.data(), block.size());
      MappedBlock gone(std::move(block));
    }
    blocks.clear();
  }
  whole.clear();
  size = 0;
  return out;
}

bool RequestBody::reader::Put(const char* bytes, size_t n) {
  body_.size += n;
  if (known_length_) {
    body_.whole.append(bytes, n);
    return true;
  }
  while (n > 0) {
    if (body_.blocks.empty() || body_.blocks.back().room() == 0) {
      body_.blocks.emplace_back(kBlockBytes);
      if (!body_.blocks.back().ok()) return false;
    }
    const size_t k = body_.blocks.back().Append(bytes, n);
    bytes += k;
    n -= k;
  }
  return true;
}

}  // namespace encoder::http::detail
