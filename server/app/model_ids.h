// --model-id: models named by their Hugging Face Hub id, fetched into (or
// found in) the Hugging Face cache (server/hub), or local directories, as
// text-embeddings-inference's --model-id takes them.
#ifndef ENCODER_SERVER_APP_MODEL_IDS_H_
#define ENCODER_SERVER_APP_MODEL_IDS_H_

#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "server/hub/hub.h"

namespace encoder {

// One --model-id value: "[NAME=]ORG/ID[@REVISION]", or "[NAME=]DIR" for a
// directory that exists (as text-embeddings-inference takes a local path).
struct ModelIdSpec {
  std::string name;      // the served name: NAME, else ORG/ID (or DIR's)
  std::string repo_id;   // empty for a directory
  std::string revision;  // @REVISION, else --revision, else "main"
  std::string dir;       // the directory, for a local path
};

// Parses one --model-id value; `default_revision` (--revision) applies to
// an id without @REVISION. INVALID_ARGUMENT for a malformed id, naming the
// flag's value.
absl::StatusOr<ModelIdSpec> ParseModelId(const std::string& flag,
                                         const std::string& default_revision);

// The directory to serve `spec` from: a local directory as it is; else the
// snapshot in the Hugging Face cache, downloaded first unless offline
// (HF_HUB_OFFLINE or options.offline). When the Hub cannot be reached
// (UNAVAILABLE) and the cache holds the revision, that snapshot is served
// and `*warning` says so. Errors are hub::Download's, prefixed with the id.
absl::StatusOr<std::string> FetchModel(const ModelIdSpec& spec,
                                       const hub::DownloadOptions& options,
                                       std::string* warning);

// A progress line for a download: "<id>: <file> <done> of <total> MB
// (<rate> MB/s, about <eta> s left)".
std::string DescribeProgress(const std::string& id,
                             const hub::DownloadProgress& progress,
                             double seconds);

}  // namespace encoder

#endif  // ENCODER_SERVER_APP_MODEL_IDS_H_
