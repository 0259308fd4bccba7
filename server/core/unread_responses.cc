#include "server/core/unread_responses.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace encoder::core {
namespace {

std::string Mib(int64_t bytes) {
  return absl::StrFormat("%.1f MiB", static_cast<double>(bytes) / (1 << 20));
}

}  // namespace

UnreadResponses::UnreadResponses(UnreadLimits limits, Observer observer)
    : limits_(limits), observer_(std::move(observer)) {}

UnreadResponses::Hold::Hold(Hold&& other) noexcept
    : owner_(std::exchange(other.owner_, nullptr)),
      connection_(std::move(other.connection_)),
      bytes_(std::exchange(other.bytes_, 0)) {}

UnreadResponses::Hold& UnreadResponses::Hold::operator=(Hold&& other) noexcept {
  if (this != &other) {
    Reset();
    owner_ = std::exchange(other.owner_, nullptr);
    connection_ = std::move(other.connection_);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

void UnreadResponses::Hold::Reset() {
  if (owner_ != nullptr) owner_->Release(connection_, bytes_);
  owner_ = nullptr;
  bytes_ = 0;
}

absl::StatusOr<UnreadResponses::Hold> UnreadResponses::Reserve(
    const std::string& connection, int64_t bytes) {
  {
    absl::MutexLock lock(&mu_);
    auto it = by_connection_.find(connection);
    const int64_t mine = it == by_connection_.end() ? 0 : it->second;
    if (mine > 0 && mine + bytes > limits_.per_connection_bytes) {
      return absl::ResourceExhaustedError(absl::StrCat(
          Mib(mine),
          " of earlier responses on this connection are not yet read by the "
          "client, and this call's response (about ",
          Mib(bytes), ") would go over the limit of ",
          Mib(limits_.per_connection_bytes),
          " (--max-unread-response-bytes-per-connection); read them, or "
          "retry later"));
    }
    if (total_ > 0 && total_ + bytes > limits_.total_bytes) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "the server holds ", Mib(total_),
          " of responses its clients have not yet read, and this call's "
          "response (about ",
          Mib(bytes), ") would go over the limit of ", Mib(limits_.total_bytes),
          " (--max-unread-response-bytes); retry later"));
    }
  }
  return Add(connection, bytes);
}

absl::Status UnreadResponses::Admit(const std::string& connection) {
  return Reserve(connection, 0).status();
}

UnreadResponses::Hold UnreadResponses::Add(const std::string& connection,
                                           int64_t bytes) {
  Hold hold;
  if (bytes <= 0) return hold;
  int64_t total;
  {
    absl::MutexLock lock(&mu_);
    by_connection_[connection] += bytes;
    total = total_ += bytes;
  }
  if (observer_) observer_(total);
  hold.owner_ = this;
  hold.connection_ = connection;
  hold.bytes_ = bytes;
  return hold;
}

void UnreadResponses::Release(const std::string& connection, int64_t bytes) {
  int64_t total;
  {
    absl::MutexLock lock(&mu_);
    auto it = by_connection_.find(connection);
    if (it != by_connection_.end() && (it->second -= bytes) <= 0) {
      by_connection_.erase(it);
    }
    total = total_ -= bytes;
  }
  if (observer_) observer_(total);
}

int64_t UnreadResponses::total_bytes() const {
  absl::MutexLock lock(&mu_);
  return total_;
}

int64_t UnreadResponses::connection_bytes(const std::string& connection) const {
  absl::MutexLock lock(&mu_);
  auto it = by_connection_.find(connection);
  return it == by_connection_.end() ? 0 : it->second;
}

}  // namespace encoder::core
