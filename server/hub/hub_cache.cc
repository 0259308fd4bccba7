// The cache layout and ResolveCached: everything that needs no network.
#include <dirent.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <random>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/common/status_macros.h"
#include "server/hub/file_selection.h"
#include "server/hub/hub.h"
#include "server/hub/hub_layout.h"

namespace encoder::hub {
namespace internal {

RepoLayout::RepoLayout(absl::string_view cache_dir, absl::string_view repo_id)
    : cache(cache_dir),
      repo_dir(absl::StrCat(cache_dir, "/", RepoFolderName(repo_id))),
      lock_dir(absl::StrCat(cache_dir, "/.locks/", RepoFolderName(repo_id))) {}

std::string RepoLayout::Blob(absl::string_view etag) const {
  return absl::StrCat(repo_dir, "/blobs/", etag);
}
std::string RepoLayout::Snapshot(absl::string_view commit) const {
  return absl::StrCat(repo_dir, "/snapshots/", commit);
}
std::string RepoLayout::Pointer(absl::string_view commit,
                                absl::string_view path) const {
  return absl::StrCat(Snapshot(commit), "/", path);
}
std::string RepoLayout::Ref(absl::string_view revision) const {
  return absl::StrCat(repo_dir, "/refs/", revision);
}
std::string RepoLayout::Lock(absl::string_view etag) const {
  return absl::StrCat(lock_dir, "/", etag, ".lock");
}

std::string PointerTarget(absl::string_view path, absl::string_view etag) {
  // From snapshots/<commit>/<dirs of path>/ up to the repository directory.
  std::string target = "../../";
  for (char c : path) {
    if (c == '/') target += "../";
  }
  return absl::StrCat(target, "blobs/", etag);
}

absl::Status ErrnoStatus(int err, absl::string_view what) {
  const std::string message = absl::StrCat(what, ": ", std::strerror(err));
  switch (err) {
    case ENOSPC:
    case EDQUOT:
      return absl::ResourceExhaustedError(
          absl::StrCat(message,
                       " (free some space or choose another cache "
                       "with HF_HUB_CACHE or --cache)"));
    case EACCES:
    case EPERM:
    case EROFS:
      return absl::PermissionDeniedError(message);
    case ENOENT:
      return absl::NotFoundError(message);
    default:
      return absl::InternalError(message);
  }
}

absl::Status MakeDirs(const std::string& dir) {
  if (dir.empty()) return absl::OkStatus();
  struct stat st;
  if (stat(dir.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return absl::OkStatus();
    return absl::FailedPreconditionError(
        absl::StrCat(dir, " exists and is not a directory"));
  }
  const size_t slash = dir.rfind('/');
  if (slash != std::string::npos && slash > 0) {
    RETURN_IF_ERROR(MakeDirs(dir.substr(0, slash)));
  }
  if (mkdir(dir.c_str(), 0777) != 0 && errno != EEXIST) {
    return ErrnoStatus(errno, absl::StrCat("cannot create ", dir));
  }
  return absl::OkStatus();
}

absl::Status WriteFileAtomically(const std::string& path,
                                 absl::string_view content) {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  const std::string tmp =
      absl::StrCat(path, ".", getpid(), ".", rng() % 1000000000, ".tmp");
  const int fd =
      open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd < 0) return ErrnoStatus(errno, absl::StrCat("cannot create ", tmp));
  size_t written = 0;
  while (written < content.size()) {
    const ssize_t n =
        write(fd, content.data() + written, content.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      close(fd);
      unlink(tmp.c_str());
      return ErrnoStatus(err, absl::StrCat("cannot write ", tmp));
    }
    written += static_cast<size_t>(n);
  }
  if (close(fd) != 0 || rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    unlink(tmp.c_str());
    return ErrnoStatus(err, absl::StrCat("cannot write ", path));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(errno, absl::StrCat("cannot read ", path));
  std::string out;
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      close(fd);
      return ErrnoStatus(err, absl::StrCat("cannot read ", path));
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  return out;
}

bool Exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

// Every entry under `dir` (relative paths), directories descended into.
static void ListTree(const std::string& dir, const std::string& prefix,
                     std::vector<std::string>* out) {
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return;
  while (const dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    const std::string full = dir + "/" + name;
    const std::string rel = prefix.empty() ? name : prefix + "/" + name;
    struct stat st;
    if (lstat(full.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
      ListTree(full, rel, out);
    } else {
      out->push_back(rel);
    }
  }
  closedir(d);
}

std::vector<std::string> ListFiles(const std::string& dir) {
  std::vector<std::string> out;
  ListTree(dir, "", &out);
  std::sort(out.begin(), out.end());
  return out;
}

BlobHasher::Kind BlobHasher::ForEtag(const std::string& etag, int64_t size) {
  if (IsSha256Hex(etag)) return kSha256;
  if (IsCommitHash(etag) && size >= 0) return kGitSha1;
  return kNone;
}

BlobHasher::BlobHasher(Kind kind, int64_t size) : kind_(kind) {
  if (kind_ == kGitSha1) {
    git_header_ = absl::StrCat("blob ", size, std::string(1, '\0'));
  }
  Reset();
}

BlobHasher::~BlobHasher() { EVP_MD_CTX_free(static_cast<EVP_MD_CTX*>(ctx_)); }

const char* BlobHasher::name() const {
  switch (kind_) {
    case kSha256:
      return "sha256";
    case kGitSha1:
      return "git blob sha1";
    case kSha1:
      return "sha1";
    case kNone:
      break;
  }
  return "none";
}

void BlobHasher::Reset() {
  if (kind_ == kNone) return;
  if (ctx_ == nullptr) ctx_ = EVP_MD_CTX_new();
  EVP_DigestInit_ex(static_cast<EVP_MD_CTX*>(ctx_),
                    kind_ == kSha256 ? EVP_sha256() : EVP_sha1(), nullptr);
  Update(git_header_.data(), git_header_.size());
}

void BlobHasher::Update(const char* data, size_t n) {
  if (kind_ != kNone && n > 0) {
    EVP_DigestUpdate(static_cast<EVP_MD_CTX*>(ctx_), data, n);
  }
}

std::string BlobHasher::HexDigest() {
  if (kind_ == kNone) return "";
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_DigestFinal_ex(static_cast<EVP_MD_CTX*>(ctx_), digest, &len);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  for (unsigned int i = 0; i < len; ++i) {
    hex += kHex[digest[i] >> 4];
    hex += kHex[digest[i] & 15];
  }
  return hex;
}

}  // namespace internal

namespace {

using internal::Exists;
using internal::RepoLayout;
using nlohmann::json;

bool IsTokenizerName(absl::string_view base) {
  return base == "tokenizer.json" || base == "vocab.txt" ||
         base == "vocab.json" ||
         (absl::EndsWith(base, ".model") && base.size() > 6);
}

// What the snapshot lacks for the server to load it.
std::vector<std::string> MissingModelFiles(const std::string& snapshot) {
  std::vector<std::string> missing;
  const std::vector<std::string> entries = internal::ListFiles(snapshot);
  // The directories where weights and tokenizers may be: the root and the
  // sentence-transformers modules'.
  std::vector<std::string> dirs = {""};
  if (Exists(snapshot + "/modules.json")) {
    auto text = internal::ReadFile(snapshot + "/modules.json");
    auto paths = text.ok() ? ModulePaths(*text) : text.status();
    if (paths.ok()) {
      dirs.insert(dirs.end(), paths->begin(), paths->end());
    } else {
      missing.push_back(absl::StrCat("a readable modules.json (",
                                     paths.status().message(), ")"));
    }
  }
  bool weights = false, tokenizer = false;
  for (const std::string& rel : entries) {
    if (!Exists(snapshot + "/" + rel)) {
      missing.push_back(absl::StrCat(rel, " (its link leads to no blob)"));
      continue;
    }
    const size_t slash = rel.rfind('/');
    const std::string dir =
        slash == std::string::npos ? "" : rel.substr(0, slash);
    const absl::string_view base =
        slash == std::string::npos ? absl::string_view(rel)
                                   : absl::string_view(rel).substr(slash + 1);
    bool in_model_dir = false;
    for (const std::string& d : dirs) in_model_dir = in_model_dir || d == dir;
    if (!in_model_dir) continue;
    weights = weights || (absl::EndsWith(base, ".safetensors") &&
                          base.size() > std::strlen(".safetensors"));
    tokenizer = tokenizer || IsTokenizerName(base);
  }
  if (!Exists(snapshot + "/config.json")) missing.push_back("config.json");
  if (!weights) missing.push_back("safetensors weights (*.safetensors)");
  if (!tokenizer) {
    missing.push_back(
        "a tokenizer (tokenizer.json, vocab.txt, vocab.json or a "
        "SentencePiece .model)");
  }
  // A sharded checkpoint: every shard its index names.
  const std::string index = snapshot + "/model.safetensors.index.json";
  if (Exists(index)) {
    auto text = internal::ReadFile(index);
    json parsed = text.ok() ? json::parse(*text, nullptr, false) : json();
    if (!parsed.is_object() || !parsed.contains("weight_map") ||
        !parsed["weight_map"].is_object()) {
      missing.push_back("a readable model.safetensors.index.json");
    } else {
      std::vector<std::string> shards;
      for (const auto& [name, shard] : parsed["weight_map"].items()) {
        if (!shard.is_string()) continue;
        const std::string file = shard.get<std::string>();
        if (std::find(shards.begin(), shards.end(), file) == shards.end()) {
          shards.push_back(file);
        }
      }
      for (const std::string& shard : shards) {
        if (ValidateRepoPath(shard).ok() && !Exists(snapshot + "/" + shard)) {
          missing.push_back(shard);
        }
      }
    }
  }
  return missing;
}

}  // namespace

absl::StatusOr<std::string> ResolveCached(absl::string_view repo_id,
                                          absl::string_view revision,
                                          absl::string_view cache_dir,
                                          const EnvLookup& env) {
  ASSIGN_OR_RETURN(const std::string rev, CheckedRevision(repo_id, revision));
  const RepoLayout layout(HubCacheDir(cache_dir, env), repo_id);
  const std::string label = absl::StrCat(repo_id, "@", rev);
  if (!Exists(layout.repo_dir)) {
    return absl::NotFoundError(
        absl::StrCat(label, " is not in the Hugging Face cache ", layout.cache,
                     " (no ", layout.repo_dir,
                     "); download it first (encoder-hub download, or "
                     "huggingface_hub with the network on)"));
  }
  std::string commit = rev;
  if (!IsCommitHash(rev)) {
    auto ref = internal::ReadFile(layout.Ref(rev));
    if (!ref.ok()) {
      return absl::NotFoundError(absl::StrCat(
          label, ": revision \"", rev, "\" was never downloaded into ",
          layout.cache, " (no ", layout.Ref(rev),
          "); download it first, or name a cached commit"));
    }
    commit = std::string(absl::StripAsciiWhitespace(*ref));
    if (!IsCommitHash(commit)) {
      return absl::NotFoundError(absl::StrCat(label, ": ", layout.Ref(rev),
                                              " holds \"", commit,
                                              "\", not a commit hash"));
    }
  }
  const std::string snapshot = layout.Snapshot(commit);
  struct stat st;
  if (stat(snapshot.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return absl::NotFoundError(
        absl::StrCat(label, ": commit ", commit, " has no snapshot in ",
                     layout.cache, " (no ", snapshot, ")"));
  }
  std::vector<std::string> missing = MissingModelFiles(snapshot);
  if (!missing.empty()) {
    return absl::NotFoundError(
        absl::StrCat(label, ": the cached snapshot ", snapshot,
                     " is incomplete; missing: ", absl::StrJoin(missing, ", "),
                     ". Download it again with the network on"));
  }
  return snapshot;
}

}  // namespace encoder::hub
