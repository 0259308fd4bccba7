// Models from the Hugging Face Hub, in the Hugging Face cache, laid out
// exactly as the huggingface_hub Python library lays it out, so that either
// one finds what the other downloaded:
//
//   <cache>/models--ORG--NAME/blobs/<etag>           file contents, by etag
//          /models--ORG--NAME/snapshots/<commit>/<path>
//                                                    relative symlinks to
//                                                    ../../blobs/<etag>
//          /models--ORG--NAME/refs/<revision>        the revision's commit
//   <cache>/.locks/models--ORG--NAME/<etag>.lock     flock(2) per blob
//
// An etag is the git blob sha1 of a regular file and the sha256 of an LFS
// file. A blob is written as blobs/<etag>.incomplete under its lock, checked
// (size; sha256 or git sha1) and renamed into place only when whole, then
// linked from the snapshot; refs/<revision> is written last, so a reader
// that goes through refs/ never finds a snapshot still being filled.
//
// Only the files a model needs are fetched (file_selection.h).
#ifndef ENCODER_SERVER_HUB_HUB_H_
#define ENCODER_SERVER_HUB_HUB_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/hub/hub_env.h"

namespace encoder::hub {

// The snapshot directory of `repo_id` at `revision` (a branch or tag,
// through refs/, or a 40-hex commit) in `cache_dir` (HubCacheDir's rules
// when empty), without the network. NOT_FOUND, naming the cache path and
// what is missing, unless the snapshot has config.json, safetensors
// weights (every shard an index lists), a tokenizer file, and every link in
// it leads to a blob.
absl::StatusOr<std::string> ResolveCached(absl::string_view repo_id,
                                          absl::string_view revision,
                                          absl::string_view cache_dir = "",
                                          const EnvLookup& env = ProcessEnv());

// What Download has done so far, for a progress line.
struct DownloadProgress {
  std::string file;         // the file being transferred ("" at the end)
  int64_t file_done = 0;    // its bytes in blobs/<etag>.incomplete
  int64_t file_total = -1;  // its size; -1 when the server gave none
  int64_t done = 0;         // bytes of every file to transfer, so far
  int64_t total = 0;        // bytes of every file to transfer (those whose
                            // blob is not cached yet)
};

struct DownloadOptions {
  // The hub cache; HubCacheDir's rules when empty.
  std::string cache_dir;
  // The Hub's base URL; $HF_ENDPOINT or kDefaultEndpoint when empty.
  std::string endpoint;
  // The access token, or a file holding it; FindToken's order when both
  // are empty. Sent as "Authorization: Bearer" to the endpoint's origin
  // only, never to the storage a file is redirected to.
  std::string token;
  std::string token_file;
  // Never use the network (ResolveCached); also when HF_HUB_OFFLINE is set.
  bool offline = false;

  // Seconds to connect to a server (DNS, TCP, TLS).
  long connect_timeout_s = 10;
  // Seconds for a whole metadata request (model info, a file's HEAD).
  long metadata_timeout_s = 10;
  // A file transfer is abandoned when under low_speed_bytes_per_s bytes
  // arrive per second for low_speed_time_s seconds (0 bytes/s: never).
  long low_speed_bytes_per_s = 1024;
  long low_speed_time_s = 30;
  // Transfers of one file retried (resuming with a Range request) after a
  // dropped connection or a stall, before the error is returned.
  int max_retries = 3;
  // Seconds to wait for another process's lock on a blob; 0 waits forever
  // (the other process may be fetching a large file).
  double lock_timeout_s = 0;

  // Called as bytes arrive (often: throttle the output), at the start of
  // each file and once at the end.
  std::function<void(const DownloadProgress&)> progress;
};

// Downloads the model files of `repo_id` at `revision` (a branch, tag or
// commit; kDefaultRevision when empty) into the cache and returns the
// snapshot directory. Files whose blob is cached are not fetched again.
//
// Errors: INVALID_ARGUMENT for a malformed id or revision; NOT_FOUND for an
// unknown repository, revision or file; PERMISSION_DENIED for a gated or
// private repository (no token, or a token without access); UNAVAILABLE
// when the Hub cannot be reached (the message suggests HF_HUB_OFFLINE=1 and
// names the cache); DEADLINE_EXCEEDED for a timeout or stall;
// RESOURCE_EXHAUSTED when the disk is full; DATA_LOSS when a file's bytes
// do not match its size or checksum (nothing is kept); FAILED_PRECONDITION
// for a repository without safetensors weights or an endpoint that does not
// answer as the Hub does. In offline mode, ResolveCached's errors.
absl::StatusOr<std::string> Download(absl::string_view repo_id,
                                     absl::string_view revision,
                                     const DownloadOptions& options = {},
                                     const EnvLookup& env = ProcessEnv());

// Lays out the model directory `dir` (as a package or a copy ships it) in
// the cache as `repo_id` at `revision` (a branch or tag; default main), so
// that ResolveCached, the server's --model-id and huggingface_hub's
// local_files_only reads find it without the network. The files a model
// needs (SelectModelFiles) become blobs named by the etags the Hub gives
// such files (sha256 for what its default .gitattributes stores in LFS or
// files of 10 MiB and more, the git blob sha1 otherwise), so the blobs of
// byte-identical files are the ones a later download would fetch. No Hub
// commit is known: the snapshot is named by a sha1 over the file paths and
// etags. ALREADY_EXISTS when the revision's ref names another commit (the
// cache holds that revision already); the snapshot directory otherwise.
absl::StatusOr<std::string> ImportDirectory(
    absl::string_view dir, absl::string_view repo_id,
    absl::string_view revision, absl::string_view cache_dir = "",
    const EnvLookup& env = ProcessEnv());

}  // namespace encoder::hub

#endif  // ENCODER_SERVER_HUB_HUB_H_
