// The cache's paths for one repository and the file-system steps Download
// and ResolveCached share (internal to server/hub).
#ifndef ENCODER_SERVER_HUB_HUB_LAYOUT_H_
#define ENCODER_SERVER_HUB_HUB_LAYOUT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace encoder::hub::internal {

struct RepoLayout {
  RepoLayout(absl::string_view cache_dir, absl::string_view repo_id);

  std::string cache;     // the hub cache
  std::string repo_dir;  // <cache>/models--ORG--NAME
  std::string lock_dir;  // <cache>/.locks/models--ORG--NAME

  std::string Blob(absl::string_view etag) const;
  std::string Snapshot(absl::string_view commit) const;
  std::string Pointer(absl::string_view commit, absl::string_view path) const;
  std::string Ref(absl::string_view revision) const;
  std::string Lock(absl::string_view etag) const;
};

// The snapshot link's target for repository path `path` (relative, '/'
// separated): "../../blobs/<etag>" with one more "../" per directory in
// `path`, as os.path.relpath gives it.
std::string PointerTarget(absl::string_view path, absl::string_view etag);

// An errno as a status: ENOSPC / EDQUOT are RESOURCE_EXHAUSTED, EACCES /
// EPERM / EROFS PERMISSION_DENIED, ENOENT NOT_FOUND, the rest INTERNAL.
absl::Status ErrnoStatus(int err, absl::string_view what);

// mkdir -p.
absl::Status MakeDirs(const std::string& dir);

// Writes `content` to `path` through a temporary file in the same
// directory and rename(2), so a reader sees the old or the new content.
absl::Status WriteFileAtomically(const std::string& path,
                                 absl::string_view content);

// The whole file; NOT_FOUND when it does not exist.
absl::StatusOr<std::string> ReadFile(const std::string& path);

// stat(2) succeeds (a link is followed: false for a dangling link).
bool Exists(const std::string& path);

// Every file under `dir`, as '/'-separated paths relative to it
// (directories descended into; links listed as files). Empty when `dir`
// cannot be read.
std::vector<std::string> ListFiles(const std::string& dir);

// The digest a blob's etag is: sha256 of the bytes for an LFS file (64
// hex), git's blob sha1 ("blob <size>\0" then the bytes) for a regular
// one (40 hex); plain sha1 for other uses.
class BlobHasher {
 public:
  enum Kind { kNone, kSha256, kGitSha1, kSha1 };
  // kSha256 for a 64-hex etag, kGitSha1 for a 40-hex one of a file whose
  // size is known; kNone (nothing checked) for others.
  static Kind ForEtag(const std::string& etag, int64_t size);

  BlobHasher(Kind kind, int64_t size);
  ~BlobHasher();
  BlobHasher(const BlobHasher&) = delete;
  BlobHasher& operator=(const BlobHasher&) = delete;

  bool checks() const { return kind_ != kNone; }
  const char* name() const;
  void Reset();
  void Update(const char* data, size_t n);
  std::string HexDigest();

 private:
  Kind kind_;
  void* ctx_ = nullptr;  // EVP_MD_CTX
  std::string git_header_;
};

}  // namespace encoder::hub::internal

#endif  // ENCODER_SERVER_HUB_HUB_LAYOUT_H_
