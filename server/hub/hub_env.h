// The Hugging Face Hub's names and settings as the huggingface_hub Python
// library computes them, so that this library and a Python process share
// one cache: where the cache is, which endpoint and token to use, whether
// the network is off, how a repository is named on disk and in URLs.
//
// Pure functions of an environment lookup (EnvLookup), so the precedence
// rules are testable without touching the process environment.
#ifndef ENCODER_SERVER_HUB_HUB_ENV_H_
#define ENCODER_SERVER_HUB_HUB_ENV_H_

#include <functional>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace encoder::hub {

// The Hub huggingface_hub talks to when HF_ENDPOINT is not set.
inline constexpr const char kDefaultEndpoint[] = "https://huggingface.co";
// The revision of a repository when none is given.
inline constexpr const char kDefaultRevision[] = "main";

// An environment variable's value, or nullopt when it is not set. A
// variable set to the empty string counts as not set (huggingface_hub would
// take "" literally and put the cache in the working directory).
using EnvLookup = std::function<std::optional<std::string>(const char* name)>;

// The process environment (getenv).
EnvLookup ProcessEnv();

// os.path.expanduser then os.path.expandvars, as huggingface_hub applies
// them to HF_HOME, HF_HUB_CACHE and HF_TOKEN_PATH: a leading "~" or "~/"
// becomes $HOME (else the password database's home), and $NAME / ${NAME}
// become the variable's value; unknown variables are left as written.
std::string ExpandUserAndVars(absl::string_view path, const EnvLookup& env);

// $HF_HOME, else $XDG_CACHE_HOME/huggingface, else ~/.cache/huggingface.
std::string HfHome(const EnvLookup& env);

// The hub cache: `override_dir` when not empty, else $HF_HUB_CACHE, else the
// legacy $HUGGINGFACE_HUB_CACHE, else HfHome()/hub.
std::string HubCacheDir(absl::string_view override_dir, const EnvLookup& env);

// $HF_ENDPOINT without trailing slashes, else kDefaultEndpoint.
std::string Endpoint(const EnvLookup& env);

// HF_HUB_OFFLINE (or, when that is unset, TRANSFORMERS_OFFLINE) is one of
// 1, ON, YES, TRUE in any case.
bool OfflineMode(const EnvLookup& env);

// $HF_TOKEN_PATH, else HfHome()/token.
std::string TokenPath(const EnvLookup& env);

// The access token to send, or "" for none. In order: `token` when not
// empty; the contents of `token_file` when not empty (an unreadable file is
// an INVALID_ARGUMENT error: it was asked for); $HF_TOKEN (or the legacy
// $HUGGING_FACE_HUB_TOKEN); the contents of TokenPath() when it exists.
// Carriage returns and newlines are removed and surrounding blanks trimmed,
// as huggingface_hub does.
absl::StatusOr<std::string> FindToken(absl::string_view token,
                                      absl::string_view token_file,
                                      const EnvLookup& env);

// A model repository and revision, as written on a command line.
struct RepoRef {
  std::string repo_id;   // "ORG/NAME" or "NAME"
  std::string revision;  // branch, tag or 40-hex commit; kDefaultRevision
};

// "ORG/NAME" or "ORG/NAME@REV" (REV a branch, tag or commit hash). The id
// is checked with ValidateRepoId, the revision with ValidateRevision.
absl::StatusOr<RepoRef> ParseRepoRef(absl::string_view spec);

// The Hub's rules for a repository id, as huggingface_hub checks them: "NAME"
// or "NAMESPACE/NAME", each 1 to 96 of [A-Za-z0-9_.-], not starting or
// ending with '-' or '.', no "--" or "..", not ending in ".git".
absl::Status ValidateRepoId(absl::string_view repo_id);

// A revision names a file under refs/: not empty, not absolute, no "." or
// ".." component, no empty component, no NUL or backslash.
absl::Status ValidateRevision(absl::string_view revision);

// `revision`, or kDefaultRevision when empty, once `repo_id` passes
// ValidateRepoId and the revision ValidateRevision.
absl::StatusOr<std::string> CheckedRevision(absl::string_view repo_id,
                                            absl::string_view revision);

// A path inside a repository (a sibling's rfilename): relative, no "." or
// ".." component, no empty component, no NUL or backslash.
absl::Status ValidateRepoPath(absl::string_view path);

// 40 lowercase hex digits (what huggingface_hub takes for a commit).
bool IsCommitHash(absl::string_view revision);

// 64 lowercase hex digits: the sha256 an LFS file's etag is.
bool IsSha256Hex(absl::string_view etag);

// An ETag header's value as huggingface_hub stores it (the blob's file
// name): leading 'W' and '/' characters removed, then surrounding double
// quotes. `W/"abc"` and `"abc"` both give `abc`.
std::string NormalizeEtag(absl::string_view etag);

// "models--ORG--NAME": the repository's directory in the cache and under
// .locks.
std::string RepoFolderName(absl::string_view repo_id);

// Percent-encoding as Python's urllib.parse.quote: letters, digits and
// "_.-~" are kept, and the characters in `safe`; every other byte becomes
// %XX. The Hub's URLs quote a revision with safe="" and a file path with
// safe="/".
std::string UrlQuote(absl::string_view text, absl::string_view safe);

}  // namespace encoder::hub

#endif  // ENCODER_SERVER_HUB_HUB_ENV_H_
