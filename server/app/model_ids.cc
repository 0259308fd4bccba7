#include "server/app/model_ids.h"

#include <sys/stat.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace encoder {

namespace {

bool IsDirectory(const std::string& path) {
  struct stat st;
  return !path.empty() && ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

absl::Status WithId(const std::string& id, const absl::Status& status) {
  return absl::Status(status.code(),
                      absl::StrCat("--model-id ", id, ": ", status.message()));
}

}  // namespace

absl::StatusOr<ModelIdSpec> ParseModelId(const std::string& flag,
                                         const std::string& default_revision) {
  ModelIdSpec spec;
  // NAME=...: a name may hold '/', an id or a path no '=' before its last
  // part, so the first '=' splits.
  const size_t eq = flag.find('=');
  const std::string value =
      eq == std::string::npos ? flag : flag.substr(eq + 1);
  if (eq != std::string::npos) spec.name = flag.substr(0, eq);
  if (value.empty() || (eq != std::string::npos && spec.name.empty())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--model-id \"", flag,
        "\": give ORG/ID[@REVISION], NAME=ORG/ID[@REVISION] or a directory"));
  }
  if (IsDirectory(value)) {
    spec.dir = value;
    if (spec.name.empty()) {
      std::string dir = value;
      while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
      const size_t slash = dir.find_last_of('/');
      spec.name = slash == std::string::npos ? dir : dir.substr(slash + 1);
    }
    return spec;
  }
  std::string ref = value;
  if (ref.find('@') == std::string::npos && !default_revision.empty()) {
    ref = absl::StrCat(ref, "@", default_revision);
  }
  auto parsed = hub::ParseRepoRef(ref);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--model-id \"", flag, "\": ", parsed.status().message(),
                     " (neither a Hub id nor an existing directory)"));
  }
  spec.repo_id = parsed->repo_id;
  spec.revision = parsed->revision;
  if (spec.name.empty()) spec.name = spec.repo_id;
  return spec;
}

absl::StatusOr<std::string> FetchModel(const ModelIdSpec& spec,
                                       const hub::DownloadOptions& options,
                                       std::string* warning) {
  if (!spec.dir.empty()) return spec.dir;
  const std::string id = absl::StrCat(spec.repo_id, "@", spec.revision);
  auto dir = hub::Download(spec.repo_id, spec.revision, options);
  if (dir.ok()) return dir;
  if (absl::IsUnavailable(dir.status())) {
    auto cached =
        hub::ResolveCached(spec.repo_id, spec.revision, options.cache_dir);
    if (cached.ok()) {
      *warning = absl::StrCat(id, ": the Hub cannot be reached (",
                              dir.status().message(),
                              "); serving the cached snapshot ", *cached,
                              " (HF_HUB_OFFLINE=1 skips the attempt)");
      return cached;
    }
  }
  return WithId(id, dir.status());
}

std::string DescribeProgress(const std::string& id,
                             const hub::DownloadProgress& progress,
                             double seconds) {
  const double mb = 1e6;
  const double rate = seconds > 0 ? progress.done / seconds : 0;
  std::string line = absl::StrFormat("%s: %.1f of %.1f MB", id,
                                     progress.done / mb, progress.total / mb);
  if (!progress.file.empty()) absl::StrAppend(&line, " (", progress.file, ")");
  if (rate > 0 && seconds >= 1) {  // a rate over less is noise
    absl::StrAppendFormat(&line, ", %.1f MB/s", rate / mb);
    if (progress.total > progress.done) {
      absl::StrAppendFormat(&line, ", about %.0f s left",
                            (progress.total - progress.done) / rate);
    }
  }
  return line;
}

}  // namespace encoder
