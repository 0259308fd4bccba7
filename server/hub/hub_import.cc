// ImportDirectory: a model directory laid out in the cache as the Hub
// would have delivered it.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "server/common/status_macros.h"
#include "server/hub/file_selection.h"
#include "server/hub/hub.h"
#include "server/hub/hub_layout.h"

namespace encoder::hub {

namespace {

using internal::Exists;
using internal::RepoLayout;

// The suffixes the Hub's default .gitattributes stores in LFS (the weights,
// pickles, archives and SentencePiece models a model repository holds).
constexpr const char* kLfsSuffixes[] = {
    ".safetensors", ".bin",    ".pt",  ".pth",    ".ckpt",   ".h5",
    ".msgpack",     ".onnx",   ".ot",  ".model",  ".npy",    ".npz",
    ".pkl",         ".pickle", ".pb",  ".tflite", ".joblib", ".arrow",
    ".parquet",     ".zip",    ".gz",  ".tar",    ".xz",     ".zst",
    ".7z",          ".bz2",    ".rar", ".tgz",    ".wasm",   ".mlmodel",
    ".ftz"};
// Larger files the Hub refuses outside LFS.
constexpr int64_t kLfsMinBytes = 10 << 20;

bool StoredInLfs(const std::string& path, int64_t size) {
  if (size >= kLfsMinBytes) return true;
  for (const char* suffix : kLfsSuffixes) {
    if (absl::EndsWith(path, suffix)) return true;
  }
  return false;
}

// The file's etag as the Hub gives it: sha256 for an LFS file, the git
// blob sha1 otherwise.
absl::StatusOr<std::string> FileEtag(const std::string& file) {
  struct stat st;
  if (stat(file.c_str(), &st) != 0) {
    return internal::ErrnoStatus(errno, absl::StrCat("cannot read ", file));
  }
  const int64_t size = st.st_size;
  internal::BlobHasher hasher(StoredInLfs(file, size)
                                  ? internal::BlobHasher::kSha256
                                  : internal::BlobHasher::kGitSha1,
                              size);
  std::ifstream in(file, std::ios::binary);
  std::vector<char> buffer(1 << 20);
  while (in) {
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    hasher.Update(buffer.data(), static_cast<size_t>(in.gcount()));
  }
  if (in.bad()) return absl::DataLossError(absl::StrCat("cannot read ", file));
  return hasher.HexDigest();
}

// Copies `from` to `to` through a temporary name, renamed when whole.
absl::Status CopyFile(const std::string& from, const std::string& to) {
  const std::string tmp = absl::StrCat(to, ".", getpid(), ".incomplete");
  {
    std::ifstream in(from, std::ios::binary);
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!in || !out) {
      return internal::ErrnoStatus(
          errno, absl::StrCat("cannot copy ", from, " to ", tmp));
    }
    out << in.rdbuf();
    out.flush();
    if (!out) {
      const int err = errno;
      std::remove(tmp.c_str());
      return internal::ErrnoStatus(err, absl::StrCat("cannot write ", tmp));
    }
  }
  if (rename(tmp.c_str(), to.c_str()) != 0) {
    const int err = errno;
    std::remove(tmp.c_str());
    return internal::ErrnoStatus(err, absl::StrCat("cannot rename ", tmp));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::string> ImportDirectory(absl::string_view dir,
                                            absl::string_view repo_id,
                                            absl::string_view revision,
                                            absl::string_view cache_dir,
                                            const EnvLookup& env) {
  ASSIGN_OR_RETURN(const std::string rev, CheckedRevision(repo_id, revision));
  if (IsCommitHash(rev)) {
    return absl::InvalidArgumentError(
        absl::StrCat("import under a branch or tag, not the commit ", rev,
                     ": the snapshot's commit is computed from the files"));
  }
  const std::string source(dir);
  std::vector<std::string> listed = internal::ListFiles(source);
  if (listed.empty()) {
    return absl::NotFoundError(absl::StrCat(source, " holds no files"));
  }
  std::vector<std::string> module_paths;
  if (Exists(source + "/modules.json")) {
    ASSIGN_OR_RETURN(std::string text,
                     internal::ReadFile(source + "/modules.json"));
    ASSIGN_OR_RETURN(module_paths, ModulePaths(text));
  }
  ASSIGN_OR_RETURN(std::vector<std::string> files,
                   SelectModelFiles(listed, module_paths, source));
  std::sort(files.begin(), files.end());
  std::vector<std::pair<std::string, std::string>> etags;
  std::string listing = "encoder-hub import\n";
  for (const std::string& path : files) {
    ASSIGN_OR_RETURN(std::string etag, FileEtag(source + "/" + path));
    absl::StrAppend(&listing, path, " ", etag, "\n");
    etags.emplace_back(path, std::move(etag));
  }
  internal::BlobHasher commit_hash(internal::BlobHasher::kSha1, 0);
  commit_hash.Update(listing.data(), listing.size());
  const std::string commit = commit_hash.HexDigest();

  const RepoLayout layout(HubCacheDir(cache_dir, env), repo_id);
  const std::string ref = layout.Ref(rev);
  auto old = internal::ReadFile(ref);
  if (old.ok() && *old != commit) {
    return absl::AlreadyExistsError(absl::StrCat(
        ref, " already names commit ", *old, "; ", repo_id, "@", rev,
        " is cached (encoder-hub resolve finds it), so nothing is imported"));
  }
  RETURN_IF_ERROR(internal::MakeDirs(layout.repo_dir + "/blobs"));
  for (const auto& [path, etag] : etags) {
    const std::string blob = layout.Blob(etag);
    if (!Exists(blob)) RETURN_IF_ERROR(CopyFile(source + "/" + path, blob));
    const std::string pointer = layout.Pointer(commit, path);
    RETURN_IF_ERROR(internal::MakeDirs(pointer.substr(0, pointer.rfind('/'))));
    std::remove(pointer.c_str());
    const std::string target = internal::PointerTarget(path, etag);
    if (symlink(target.c_str(), pointer.c_str()) != 0) {
      return internal::ErrnoStatus(
          errno, absl::StrCat("cannot create the link ", pointer));
    }
  }
  RETURN_IF_ERROR(internal::MakeDirs(ref.substr(0, ref.rfind('/'))));
  RETURN_IF_ERROR(internal::WriteFileAtomically(ref, commit));
  return layout.Snapshot(commit);
}

}  // namespace encoder::hub
