// Download: the model info, each file's metadata (HEAD), the blobs, the
// snapshot links and the ref, in that order.
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <memory>
#include <set>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/common/status_macros.h"
#include "server/hub/file_selection.h"
#include "server/hub/hub.h"
#include "server/hub/hub_http.h"
#include "server/hub/hub_layout.h"

namespace encoder::hub {
namespace {

using internal::ErrnoStatus;
using internal::Exists;
using internal::RepoLayout;
using nlohmann::json;

constexpr int kMaxHubRedirects = 10;

// Where a file's bytes come from, and what they must be.
struct FilePlan {
  std::string path;  // in the repository
  std::string etag;  // normalized: the blob's name
  int64_t size = -1;
  std::string url;       // the resolve URL, or the storage it redirects to
  bool counted = false;  // its size is in the progress total
};

// A file descriptor closed on scope exit.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

// An exclusive flock(2) on <cache>/.locks/<repo>/<etag>.lock, the file the
// filelock package (huggingface_hub's) locks the same way: a Python
// download and this one of the same blob exclude each other. The file
// stays after release, as filelock leaves it, so every waiter locks one
// inode.
class BlobLock {
 public:
  static absl::StatusOr<std::unique_ptr<BlobLock>> Acquire(
      const std::string& path, double timeout_s) {
    const int fd =
        open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0664);
    if (fd < 0) return ErrnoStatus(errno, absl::StrCat("cannot open ", path));
    // Group-writable, as huggingface_hub makes it, so users sharing a
    // cache can wait on each other's locks (fails harmlessly when the file
    // is another user's).
    fchmod(fd, 0664);
    auto lock = std::unique_ptr<BlobLock>(new BlobLock(fd));
    const auto start = std::chrono::steady_clock::now();
    for (;;) {
      if (flock(fd, LOCK_EX | LOCK_NB) == 0) return lock;
      if (errno == EINTR) continue;
      if (errno != EWOULDBLOCK) {
        return ErrnoStatus(errno, absl::StrCat("cannot lock ", path));
      }
      const double waited = std::chrono::duration<double>(
                                std::chrono::steady_clock::now() - start)
                                .count();
      if (timeout_s > 0 && waited >= timeout_s) {
        return absl::DeadlineExceededError(absl::StrCat(
            "another process has held ", path, " for over ", timeout_s,
            " s (the lock timeout); it is probably downloading the same "
            "file"));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  ~BlobLock() {
    flock(fd_, LOCK_UN);
    close(fd_);
  }

 private:
  explicit BlobLock(int fd) : fd_(fd) {}
  int fd_;
};

absl::StatusOr<int64_t> ParseSize(const std::string& text) {
  int64_t v = -1;
  if (text.empty()) return int64_t{-1};
  if (!absl::SimpleAtoi(text, &v) || v < 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("the Hub sent a file size \"", text, "\""));
  }
  return v;
}

// One Download call's settings and connection.
class Session {
 public:
  Session(std::string repo_id, std::string revision, std::string cache,
          std::string endpoint, std::string token, std::string token_path,
          const DownloadOptions& options)
      : repo_id_(std::move(repo_id)),
        revision_(std::move(revision)),
        label_(absl::StrCat(repo_id_, "@", revision_)),
        layout_(cache, repo_id_),
        endpoint_(std::move(endpoint)),
        endpoint_origin_(UrlOrigin(endpoint_)),
        token_(std::move(token)),
        token_path_(std::move(token_path)),
        options_(options),
        http_(HttpLimits{options.connect_timeout_s, options.metadata_timeout_s,
                         options.low_speed_bytes_per_s,
                         options.low_speed_time_s}) {}

  absl::StatusOr<std::string> Run();

 private:
  // Headers for a request to `url`: the token only to the Hub's origin.
  std::vector<std::string> Headers(const std::string& url) const;
  // A transport failure, with what to do without a network.
  absl::Status Unreachable(const absl::Status& status) const;
  // A non-success HTTP answer about `what` as a status.
  absl::Status HttpError(const HttpResponse& r, const std::string& what) const;

  absl::StatusOr<std::string> ModelInfo(std::vector<std::string>* files);
  absl::StatusOr<FilePlan> Head(const std::string& path);
  // The file is in the snapshot (fetched when its blob is not cached).
  absl::Status Materialize(const FilePlan& plan);
  absl::Status FetchBlob(const FilePlan& plan);
  absl::Status Link(const FilePlan& plan);
  void Report(const std::string& file, int64_t file_done, int64_t file_total);

  const std::string repo_id_, revision_, label_;
  const RepoLayout layout_;
  const std::string endpoint_, endpoint_origin_, token_, token_path_;
  const DownloadOptions& options_;
  HttpClient http_;
  std::string commit_;
  int64_t done_ = 0, total_ = 0;
};

std::vector<std::string> Session::Headers(const std::string& url) const {
  std::vector<std::string> h = {
      "User-Agent: encoder-hub/1 (huggingface_hub cache layout)",
      // Sizes and checksums are of the stored bytes, never a compressed
      // form.
      "Accept-Encoding: identity"};
  if (!token_.empty() && UrlOrigin(url) == endpoint_origin_) {
    h.push_back("Authorization: Bearer " + token_);
  }
  return h;
}

absl::Status Session::Unreachable(const absl::Status& status) const {
  if (status.code() != absl::StatusCode::kUnavailable &&
      status.code() != absl::StatusCode::kDeadlineExceeded) {
    return status;
  }
  return absl::Status(
      status.code(),
      absl::StrCat("cannot reach the Hub at ", endpoint_, " for ", label_, ": ",
                   status.message(),
                   ". Without network access, set HF_HUB_OFFLINE=1 to use "
                   "the models already in the cache ",
                   layout_.cache));
}

absl::Status Session::HttpError(const HttpResponse& r,
                                const std::string& what) const {
  const std::string code = r.Header("X-Error-Code");
  std::string detail = r.Header("X-Error-Message");
  if (detail.empty() && !r.body.empty() && r.body.size() < 300) {
    detail = std::string(absl::StripAsciiWhitespace(r.body));
  }
  const std::string answer =
      absl::StrCat("HTTP ", r.status, code.empty() ? "" : " " + code,
                   detail.empty() ? "" : ": " + detail, " from ", r.url);
  const std::string token_hint = absl::StrCat(
      "set HF_TOKEN to a token with access, or give a token file "
      "(--token-file, DownloadOptions::token_file; default ",
      token_path_, ")");
  if (r.status == 404) {
    if (code == "RevisionNotFound") {
      return absl::NotFoundError(absl::StrCat("revision \"", revision_,
                                              "\" of ", repo_id_,
                                              " not found (", answer, ")"));
    }
    if (code == "EntryNotFound") {
      return absl::NotFoundError(
          absl::StrCat(what, " not found in ", label_, " (", answer, ")"));
    }
    return absl::NotFoundError(
        absl::StrCat("repository ", repo_id_,
                     code == "RepoNotFound"
                         ? ""
                         : absl::StrCat(" or its revision \"", revision_, "\""),
                     " not found at ", endpoint_, " (", answer, ")"));
  }
  if (r.status == 401 || r.status == 403) {
    if (code == "GatedRepo") {
      return absl::PermissionDeniedError(absl::StrCat(
          repo_id_, " is gated: accept its conditions on the Hub and ",
          token_.empty() ? "" : "check that the token has access; ", token_hint,
          " (", answer, ")"));
    }
    if (!token_.empty()) {
      return absl::PermissionDeniedError(
          absl::StrCat("the token was refused for ", what, " of ", label_,
                       ": it lacks access, or has expired (", answer, ")"));
    }
    return absl::PermissionDeniedError(
        absl::StrCat(repo_id_,
                     " needs a token (it is private or gated, or does not "
                     "exist): ",
                     token_hint, " (", answer, ")"));
  }
  if (r.status == 429 || r.status / 100 == 5) {
    return absl::UnavailableError(
        absl::StrCat("the Hub is busy or failing (", answer, ")"));
  }
  return absl::UnknownError(absl::StrCat("unexpected answer for ", what, " of ",
                                         label_, ": ", answer));
}

absl::StatusOr<std::string> Session::ModelInfo(
    std::vector<std::string>* files) {
  const std::string url = absl::StrCat(endpoint_, "/api/models/", repo_id_,
                                       "/revision/", UrlQuote(revision_, ""));
  auto r = http_.Fetch("GET", url, Headers(url));
  if (!r.ok()) return Unreachable(r.status());
  if (r->status != 200) return Unreachable(HttpError(*r, "the model info"));
  json info = json::parse(r->body, nullptr, /*allow_exceptions=*/false);
  const auto not_hub = [&](absl::string_view why) {
    return absl::FailedPreconditionError(
        absl::StrCat(url, " is not the Hub's model info (", why,
                     "): does HF_ENDPOINT point at a Hugging Face Hub?"));
  };
  if (!info.is_object()) return not_hub("not a JSON object");
  if (!info.contains("sha") || !info["sha"].is_string() ||
      !IsCommitHash(info["sha"].get<std::string>())) {
    return not_hub("no 40-hex \"sha\"");
  }
  if (!info.contains("siblings") || !info["siblings"].is_array()) {
    return not_hub("no \"siblings\" list");
  }
  for (const json& s : info["siblings"]) {
    if (s.is_object() && s.contains("rfilename") &&
        s["rfilename"].is_string()) {
      std::string name = s["rfilename"].get<std::string>();
      // A name that could leave the snapshot is never used.
      if (ValidateRepoPath(name).ok()) files->push_back(std::move(name));
    }
  }
  return info["sha"].get<std::string>();
}

absl::StatusOr<FilePlan> Session::Head(const std::string& path) {
  std::string url = absl::StrCat(endpoint_, "/", repo_id_, "/resolve/", commit_,
                                 "/", UrlQuote(path, "/"));
  const std::string what = absl::StrCat("file ", path);
  // Redirects that stay on the Hub's server (a renamed repository) are
  // followed; one to another server (LFS storage, a CDN) is where the bytes
  // are, and its response carries the file's metadata.
  for (int hop = 0;; ++hop) {
    auto r = http_.Fetch("HEAD", url, Headers(url));
    if (!r.ok()) return Unreachable(r.status());
    const bool redirect =
        r->status / 100 == 3 && !r->Header("Location").empty();
    if (!redirect && r->status / 100 != 2) {
      return Unreachable(HttpError(*r, what));
    }
    std::string target =
        redirect ? ResolveUrl(url, r->Header("Location")) : url;
    if (redirect && UrlOrigin(target) == UrlOrigin(url)) {
      if (hop >= kMaxHubRedirects) {
        return absl::FailedPreconditionError(absl::StrCat(
            what, ": over ", kMaxHubRedirects, " redirects from ", endpoint_));
      }
      url = target;
      continue;
    }
    FilePlan plan;
    plan.path = path;
    plan.url = target;
    if (r->Header("X-Repo-Commit").empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          url, " answered without an X-Repo-Commit header: does HF_ENDPOINT ",
          "point at a Hugging Face Hub?"));
    }
    std::string etag = r->Header("X-Linked-Etag");
    if (etag.empty()) etag = r->Header("ETag");
    plan.etag = NormalizeEtag(etag);
    // The etag names a file in blobs/: nothing that could leave it.
    if (plan.etag.empty() || plan.etag.find('/') != std::string::npos ||
        plan.etag.front() == '.') {
      return absl::FailedPreconditionError(
          absl::StrCat(url, " answered with no usable ETag (\"", etag, "\")"));
    }
    std::string size = r->Header("X-Linked-Size");
    if (size.empty() && !redirect) size = r->Header("Content-Length");
    ASSIGN_OR_RETURN(plan.size, ParseSize(size));
    return plan;
  }
}

void Session::Report(const std::string& file, int64_t file_done,
                     int64_t file_total) {
  if (!options_.progress) return;
  DownloadProgress p;
  p.file = file;
  p.file_done = file_done;
  p.file_total = file_total;
  p.done = done_;
  p.total = total_;
  options_.progress(p);
}

absl::Status Session::Link(const FilePlan& plan) {
  const std::string pointer = layout_.Pointer(commit_, plan.path);
  const std::string target = internal::PointerTarget(plan.path, plan.etag);
  char existing[4096];
  const ssize_t n = readlink(pointer.c_str(), existing, sizeof existing);
  if (n >= 0 && absl::string_view(existing, n) == target) {
    return absl::OkStatus();
  }
  RETURN_IF_ERROR(internal::MakeDirs(pointer.substr(0, pointer.rfind('/'))));
  // A new link under a temporary name, renamed over the old entry: a
  // reader sees the old link or the new one, never none.
  const std::string tmp = absl::StrCat(pointer, ".", getpid(), ".link");
  unlink(tmp.c_str());
  if (symlink(target.c_str(), tmp.c_str()) != 0) {
    return ErrnoStatus(errno, absl::StrCat("cannot create the link ", tmp));
  }
  if (rename(tmp.c_str(), pointer.c_str()) != 0) {
    const int err = errno;
    unlink(tmp.c_str());
    return ErrnoStatus(err, absl::StrCat("cannot create the link ", pointer));
  }
  return absl::OkStatus();
}

absl::Status Session::Materialize(const FilePlan& plan) {
  const std::string blob = layout_.Blob(plan.etag);
  RETURN_IF_ERROR(internal::MakeDirs(layout_.repo_dir + "/blobs"));
  RETURN_IF_ERROR(internal::MakeDirs(layout_.lock_dir));
  ASSIGN_OR_RETURN(auto lock, BlobLock::Acquire(layout_.Lock(plan.etag),
                                                options_.lock_timeout_s));
  // Checked under the lock: another process may have just finished it.
  if (!Exists(blob)) {
    RETURN_IF_ERROR(FetchBlob(plan));
  } else if (plan.counted) {
    done_ += plan.size;  // another process fetched it meanwhile
  }
  return Link(plan);
}

absl::Status Session::FetchBlob(const FilePlan& plan) {
  const std::string blob = layout_.Blob(plan.etag);
  const std::string incomplete = blob + ".incomplete";
  Fd fd(open(incomplete.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666));
  if (fd.get() < 0) {
    return ErrnoStatus(errno, absl::StrCat("cannot create ", incomplete));
  }
  struct stat st;
  if (fstat(fd.get(), &st) != 0) {
    return ErrnoStatus(errno, absl::StrCat("cannot stat ", incomplete));
  }
  int64_t have = st.st_size;
  internal::BlobHasher hasher(
      internal::BlobHasher::ForEtag(plan.etag, plan.size), plan.size);
  const auto restart = [&]() -> absl::Status {
    if (ftruncate(fd.get(), 0) != 0 || lseek(fd.get(), 0, SEEK_SET) != 0) {
      return ErrnoStatus(errno, absl::StrCat("cannot truncate ", incomplete));
    }
    done_ -= have;
    have = 0;
    hasher.Reset();
    return absl::OkStatus();
  };
  if (plan.size >= 0 && have > plan.size) {
    RETURN_IF_ERROR(restart());
  }
  // The kept prefix of an earlier attempt goes into the digest first.
  if (have > 0 && hasher.checks()) {
    std::vector<char> buf(1 << 20);
    int64_t off = 0;
    while (off < have) {
      const ssize_t n = pread(fd.get(), buf.data(), buf.size(), off);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0)
        return ErrnoStatus(errno, absl::StrCat("cannot read ", incomplete));
      hasher.Update(buf.data(), static_cast<size_t>(n));
      off += n;
    }
  }
  if (lseek(fd.get(), have, SEEK_SET) != have) {
    return ErrnoStatus(errno, absl::StrCat("cannot seek in ", incomplete));
  }
  done_ += have;
  if (plan.size > have) {
    struct statvfs vfs;
    if (fstatvfs(fd.get(), &vfs) == 0) {
      const int64_t free_bytes = static_cast<int64_t>(vfs.f_bavail) *
                                 static_cast<int64_t>(vfs.f_frsize);
      if (free_bytes < plan.size - have) {
        return absl::ResourceExhaustedError(
            absl::StrCat(plan.path, " needs ", plan.size - have,
                         " more bytes and ", layout_.cache, " has ", free_bytes,
                         " free: free some space or choose another cache with "
                         "HF_HUB_CACHE or --cache"));
      }
    }
  }
  Report(plan.path, have, plan.size);

  for (int attempt = 0; plan.size < 0 || have < plan.size; ++attempt) {
    std::vector<std::string> headers = Headers(plan.url);
    const int64_t asked_from = have;
    if (asked_from > 0)
      headers.push_back(absl::StrCat("Range: bytes=", asked_from, "-"));
    absl::Status abort;
    const auto on_status = [&](const HttpResponse& head) {
      // 200 to a Range request: the server sends the whole file.
      if (asked_from > 0 && head.status != 206) {
        abort = restart();
        return abort.ok();
      }
      // A 206 must continue where the kept prefix ends.
      if (head.status == 206 &&
          head.Header("Content-Range")
                  .rfind(absl::StrCat("bytes ", asked_from, "-"), 0) != 0) {
        abort = restart();
        if (abort.ok()) {
          abort = absl::UnavailableError(
              absl::StrCat(plan.url, " resumed at the wrong offset (",
                           head.Header("Content-Range"), ")"));
        }
        return false;
      }
      return true;
    };
    auto last_report = std::chrono::steady_clock::now();
    const auto sink = [&](const char* data, size_t n) {
      size_t written = 0;
      while (written < n) {
        const ssize_t w = write(fd.get(), data + written, n - written);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) {
          abort = ErrnoStatus(errno, absl::StrCat("cannot write ", incomplete));
          return false;
        }
        written += static_cast<size_t>(w);
      }
      hasher.Update(data, n);
      have += static_cast<int64_t>(n);
      done_ += static_cast<int64_t>(n);
      if (plan.size >= 0 && have > plan.size) {
        abort = absl::DataLossError(
            absl::StrCat(plan.path, ": the server sent more than its size, ",
                         plan.size, " bytes"));
        return false;
      }
      const auto now = std::chrono::steady_clock::now();
      if (now - last_report >= std::chrono::milliseconds(100)) {
        last_report = now;
        Report(plan.path, have, plan.size);
      }
      return true;
    };
    auto r = http_.Stream(plan.url, headers, on_status, sink, &abort);
    Report(plan.path, have, plan.size);
    absl::Status failure;
    if (r.ok() && r->status / 100 == 2) {
      if (plan.size < 0) break;  // no size to resume towards: take what came
      if (have >= plan.size) break;
      failure = absl::UnavailableError(
          absl::StrCat(plan.url, ": the transfer ended after ", have, " of ",
                       plan.size, " bytes"));
    } else if (r.ok() && r->status == 416 && asked_from > 0) {
      // The kept prefix is not a prefix of this file: start over.
      RETURN_IF_ERROR(restart());
      failure = absl::UnavailableError(
          absl::StrCat(plan.url, ": the server refused to resume"));
    } else if (r.ok()) {
      absl::Status s = HttpError(*r, absl::StrCat("file ", plan.path));
      if (s.code() != absl::StatusCode::kUnavailable) return s;
      failure = s;
    } else {
      failure = r.status();
      if (failure.code() != absl::StatusCode::kUnavailable &&
          failure.code() != absl::StatusCode::kDeadlineExceeded) {
        return failure;  // disk full, a write error, DATA_LOSS
      }
    }
    if (attempt >= options_.max_retries) {
      return absl::Status(
          failure.code(),
          absl::StrCat(Unreachable(failure).message(), ". ", have, " bytes of ",
                       plan.path, " are kept in ", incomplete,
                       ": run the download again to resume"));
    }
  }

  // Whole and the right bytes, or nothing.
  const auto discard = [&](absl::Status why) {
    unlink(incomplete.c_str());
    return why;
  };
  if (plan.size >= 0 && have != plan.size) {
    return discard(absl::DataLossError(
        absl::StrCat(plan.path, ": received ", have, " bytes, expected ",
                     plan.size, "; the partial file was removed")));
  }
  if (hasher.checks()) {
    const std::string digest = hasher.HexDigest();
    if (digest != plan.etag) {
      return discard(absl::DataLossError(absl::StrCat(
          plan.path, " of ", label_, ": the ", hasher.name(),
          " of the received bytes is ", digest, ", the Hub says ", plan.etag,
          " (corrupted in transfer or storage); nothing was kept, run "
          "again")));
    }
  }
  // On disk before the name says it is whole.
  if (fsync(fd.get()) != 0) {
    return discard(
        ErrnoStatus(errno, absl::StrCat("cannot write ", incomplete)));
  }
  if (rename(incomplete.c_str(), blob.c_str()) != 0) {
    return discard(
        ErrnoStatus(errno, absl::StrCat("cannot rename ", incomplete)));
  }
  Report(plan.path, have, plan.size);
  return absl::OkStatus();
}

absl::StatusOr<std::string> Session::Run() {
  std::vector<std::string> repo_files;
  ASSIGN_OR_RETURN(commit_, ModelInfo(&repo_files));
  // modules.json names the sentence-transformers modules whose directories
  // are wanted: it comes first.
  std::vector<std::string> module_paths;
  const std::set<std::string> listed(repo_files.begin(), repo_files.end());
  if (listed.count("modules.json") > 0) {
    ASSIGN_OR_RETURN(FilePlan plan, Head("modules.json"));
    RETURN_IF_ERROR(Materialize(plan));
    ASSIGN_OR_RETURN(std::string text, internal::ReadFile(layout_.Pointer(
                                           commit_, "modules.json")));
    auto paths = ModulePaths(text);
    if (!paths.ok()) {
      return absl::FailedPreconditionError(
          absl::StrCat(label_, ": ", paths.status().message()));
    }
    module_paths = *std::move(paths);
  }
  ASSIGN_OR_RETURN(std::vector<std::string> files,
                   SelectModelFiles(repo_files, module_paths, label_));

  // Every file's metadata before any transfer: the total for the progress
  // line, and no partial snapshot for a file the Hub refuses.
  std::vector<FilePlan> plans;
  for (const std::string& path : files) {
    // Linked in this commit's snapshot and its blob present: nothing to ask.
    if (Exists(layout_.Pointer(commit_, path))) continue;
    ASSIGN_OR_RETURN(FilePlan plan, Head(path));
    if (!Exists(layout_.Blob(plan.etag)) && plan.size > 0) {
      plan.counted = true;
      total_ += plan.size;
    }
    plans.push_back(std::move(plan));
  }
  for (const FilePlan& plan : plans) RETURN_IF_ERROR(Materialize(plan));

  // Last: the revision's ref, once its snapshot is whole.
  if (revision_ != commit_) {
    const std::string ref = layout_.Ref(revision_);
    auto old = internal::ReadFile(ref);
    if (!old.ok() || *old != commit_) {
      RETURN_IF_ERROR(internal::MakeDirs(ref.substr(0, ref.rfind('/'))));
      RETURN_IF_ERROR(internal::WriteFileAtomically(ref, commit_));
    }
  }
  // The cache directory tag backup tools skip, as huggingface_hub writes
  // it (best effort).
  const std::string tag = layout_.cache + "/CACHEDIR.TAG";
  if (!Exists(tag)) {
    (void)internal::WriteFileAtomically(
        tag,
        "Signature: 8a477f597d28d172789f06886806bc55\n"
        "# This file is a cache directory tag created by huggingface_hub.\n"
        "# For information about cache directory tags, see:\n"
        "#\thttps://bford.info/cachedir/\n");
  }
  Report("", 0, 0);
  return layout_.Snapshot(commit_);
}

}  // namespace

absl::StatusOr<std::string> Download(absl::string_view repo_id,
                                     absl::string_view revision,
                                     const DownloadOptions& options,
                                     const EnvLookup& env) {
  ASSIGN_OR_RETURN(const std::string rev, CheckedRevision(repo_id, revision));
  const std::string cache = HubCacheDir(options.cache_dir, env);
  if (options.offline || OfflineMode(env)) {
    auto snapshot = ResolveCached(repo_id, rev, cache, env);
    if (!snapshot.ok()) {
      return absl::Status(
          snapshot.status().code(),
          absl::StrCat(
              "offline (", options.offline ? "asked" : "HF_HUB_OFFLINE",
              "), so only the cache is used: ", snapshot.status().message()));
    }
    return snapshot;
  }
  std::string endpoint =
      options.endpoint.empty() ? Endpoint(env) : options.endpoint;
  while (!endpoint.empty() && endpoint.back() == '/') endpoint.pop_back();
  ASSIGN_OR_RETURN(std::string token,
                   FindToken(options.token, options.token_file, env));
  Session session(std::string(repo_id), rev, cache, endpoint, token,
                  TokenPath(env), options);
  return session.Run();
}

}  // namespace encoder::hub
