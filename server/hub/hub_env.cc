#include "server/hub/hub_env.h"

#include <pwd.h>
#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "server/common/status_macros.h"

namespace encoder::hub {
namespace {

bool IsWordChar(char c) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_';
}

// The home directory of the user `name` ("" for the current one), from the
// password database; "" when unknown.
std::string PasswdHome(const std::string& name) {
  const passwd* pw = name.empty() ? getpwuid(getuid()) : getpwnam(name.c_str());
  return pw != nullptr && pw->pw_dir != nullptr ? pw->pw_dir : "";
}

std::string ExpandUser(absl::string_view path, const EnvLookup& env) {
  if (path.empty() || path[0] != '~') return std::string(path);
  const size_t slash = path.find('/');
  const std::string user(path.substr(1, slash == absl::string_view::npos
                                            ? absl::string_view::npos
                                            : slash - 1));
  std::string home;
  if (user.empty()) {
    home = env("HOME").value_or(PasswdHome(""));
  } else {
    home = PasswdHome(user);
  }
  if (home.empty()) return std::string(path);  // as Python: unchanged
  // "/" as the home keeps one slash, as posixpath.expanduser does.
  while (home.size() > 1 && home.back() == '/') home.pop_back();
  if (slash == absl::string_view::npos) return home;
  return home == "/" ? std::string(path.substr(slash))
                     : home + std::string(path.substr(slash));
}

std::string ExpandVars(absl::string_view path, const EnvLookup& env) {
  std::string out;
  size_t i = 0;
  while (i < path.size()) {
    if (path[i] != '$' || i + 1 >= path.size()) {
      out += path[i++];
      continue;
    }
    size_t name_begin, name_end, end;
    if (path[i + 1] == '{') {
      const size_t close = path.find('}', i + 2);
      if (close == absl::string_view::npos) {
        out += path[i++];
        continue;
      }
      name_begin = i + 2;
      name_end = close;
      end = close + 1;
    } else {
      name_begin = i + 1;
      name_end = name_begin;
      while (name_end < path.size() && IsWordChar(path[name_end])) ++name_end;
      if (name_end == name_begin) {
        out += path[i++];
        continue;
      }
      end = name_end;
    }
    const std::string name(path.substr(name_begin, name_end - name_begin));
    std::optional<std::string> value =
        name.empty() ? std::nullopt : env(name.c_str());
    if (value.has_value()) {
      out += *value;
    } else {
      absl::StrAppend(&out, path.substr(i, end - i));
    }
    i = end;
  }
  return out;
}

bool IsTrue(const std::optional<std::string>& value) {
  if (!value.has_value()) return false;
  const std::string upper = absl::AsciiStrToUpper(*value);
  return upper == "1" || upper == "ON" || upper == "YES" || upper == "TRUE";
}

// huggingface_hub's token cleaning: no CR or LF anywhere, blanks trimmed.
std::string CleanToken(absl::string_view raw) {
  std::string token;
  for (char c : raw) {
    if (c != '\r' && c != '\n') token += c;
  }
  return std::string(absl::StripAsciiWhitespace(token));
}

bool ReadWholeFile(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream text;
  text << in.rdbuf();
  *out = text.str();
  return !in.bad();
}

bool IsNameChar(char c) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_' ||
         c == '-' || c == '.';
}

bool IsLowerHex(absl::string_view s, size_t n) {
  if (s.size() != n) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

// A relative '/'-separated path with no empty, "." or ".." component.
absl::Status ValidateRelative(absl::string_view what, absl::string_view path) {
  if (path.empty())
    return absl::InvalidArgumentError(absl::StrCat(what, " is empty"));
  if (path.find('\0') != absl::string_view::npos ||
      path.find('\\') != absl::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " \"", path, "\" contains a NUL or a backslash"));
  }
  if (path.front() == '/') {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " \"", path, "\" is absolute"));
  }
  for (absl::string_view part : absl::StrSplit(path, '/')) {
    if (part.empty() || part == "." || part == "..") {
      return absl::InvalidArgumentError(absl::StrCat(
          what, " \"", path, "\" has an empty, \".\" or \"..\" component"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

EnvLookup ProcessEnv() {
  return [](const char* name) -> std::optional<std::string> {
    const char* value = std::getenv(name);
    if (value == nullptr || *value == '\0') return std::nullopt;
    return std::string(value);
  };
}

std::string ExpandUserAndVars(absl::string_view path, const EnvLookup& env) {
  return ExpandVars(ExpandUser(path, env), env);
}

std::string HfHome(const EnvLookup& env) {
  if (auto home = env("HF_HOME")) return ExpandUserAndVars(*home, env);
  // XDG_CACHE_HOME is taken as written; the whole path is then expanded,
  // as huggingface_hub expands the HF_HOME it computed.
  std::string base =
      env("XDG_CACHE_HOME").value_or(ExpandUser("~", env) + "/.cache");
  return ExpandUserAndVars(base + "/huggingface", env);
}

std::string HubCacheDir(absl::string_view override_dir, const EnvLookup& env) {
  if (!override_dir.empty()) return ExpandUser(override_dir, env);
  if (auto dir = env("HF_HUB_CACHE")) return ExpandUserAndVars(*dir, env);
  if (auto dir = env("HUGGINGFACE_HUB_CACHE")) {
    return ExpandUserAndVars(*dir, env);
  }
  return HfHome(env) + "/hub";
}

std::string Endpoint(const EnvLookup& env) {
  std::string endpoint = env("HF_ENDPOINT").value_or(kDefaultEndpoint);
  while (!endpoint.empty() && endpoint.back() == '/') endpoint.pop_back();
  return endpoint;
}

bool OfflineMode(const EnvLookup& env) {
  // `HF_HUB_OFFLINE or TRANSFORMERS_OFFLINE`: the first when it is set.
  if (auto value = env("HF_HUB_OFFLINE")) return IsTrue(value);
  return IsTrue(env("TRANSFORMERS_OFFLINE"));
}

std::string TokenPath(const EnvLookup& env) {
  if (auto path = env("HF_TOKEN_PATH")) return ExpandUserAndVars(*path, env);
  return HfHome(env) + "/token";
}

absl::StatusOr<std::string> FindToken(absl::string_view token,
                                      absl::string_view token_file,
                                      const EnvLookup& env) {
  if (!token.empty()) return CleanToken(token);
  std::string text;
  if (!token_file.empty()) {
    const std::string path = ExpandUser(token_file, env);
    if (!ReadWholeFile(path, &text)) {
      return absl::InvalidArgumentError(
          absl::StrCat("cannot read the token file ", path));
    }
    return CleanToken(text);
  }
  if (auto value = env("HF_TOKEN")) return CleanToken(*value);
  if (auto value = env("HUGGING_FACE_HUB_TOKEN")) return CleanToken(*value);
  if (ReadWholeFile(TokenPath(env), &text)) return CleanToken(text);
  return std::string();
}

absl::StatusOr<RepoRef> ParseRepoRef(absl::string_view spec) {
  RepoRef ref;
  const size_t at = spec.find('@');
  ref.repo_id = std::string(spec.substr(0, at));
  ref.revision = at == absl::string_view::npos
                     ? kDefaultRevision
                     : std::string(spec.substr(at + 1));
  if (absl::Status s = ValidateRepoId(ref.repo_id); !s.ok()) return s;
  if (absl::Status s = ValidateRevision(ref.revision); !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("in \"", spec, "\": ", s.message(),
                     " (expected ORG/NAME or ORG/NAME@REVISION)"));
  }
  return ref;
}

absl::Status ValidateRepoId(absl::string_view repo_id) {
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(
        "invalid repository id \"", repo_id, "\": ", why,
        " (expected NAME or ORG/NAME of letters, digits, '-', '_', '.')"));
  };
  std::vector<absl::string_view> parts = absl::StrSplit(repo_id, '/');
  if (parts.size() > 2) return bad("more than one '/'");
  for (absl::string_view part : parts) {
    if (part.empty() || part.size() > 96)
      return bad("a part is empty or over 96 characters");
    for (char c : part) {
      if (!IsNameChar(c))
        return bad(absl::StrCat("character '", std::string(1, c), "'"));
    }
    // The Hub's regex wants a word character at both ends of each part.
    if (!IsWordChar(part.front()) || !IsWordChar(part.back())) {
      return bad("a part starts or ends with '-' or '.'");
    }
  }
  if (absl::StrContains(repo_id, "--") || absl::StrContains(repo_id, "..")) {
    return bad("\"--\" and \"..\" are not allowed");
  }
  if (absl::EndsWith(repo_id, ".git")) return bad("it ends with \".git\"");
  return absl::OkStatus();
}

absl::StatusOr<std::string> CheckedRevision(absl::string_view repo_id,
                                            absl::string_view revision) {
  const std::string rev =
      revision.empty() ? kDefaultRevision : std::string(revision);
  RETURN_IF_ERROR(ValidateRepoId(repo_id));
  RETURN_IF_ERROR(ValidateRevision(rev));
  return rev;
}

absl::Status ValidateRevision(absl::string_view revision) {
  return ValidateRelative("revision", revision);
}

absl::Status ValidateRepoPath(absl::string_view path) {
  return ValidateRelative("repository path", path);
}

bool IsCommitHash(absl::string_view revision) {
  return IsLowerHex(revision, 40);
}

bool IsSha256Hex(absl::string_view etag) { return IsLowerHex(etag, 64); }

std::string NormalizeEtag(absl::string_view etag) {
  // Python's etag.lstrip("W/").strip('"'): a set of characters, not a prefix.
  while (!etag.empty() && (etag.front() == 'W' || etag.front() == '/')) {
    etag.remove_prefix(1);
  }
  while (!etag.empty() && etag.front() == '"') etag.remove_prefix(1);
  while (!etag.empty() && etag.back() == '"') etag.remove_suffix(1);
  return std::string(etag);
}

std::string RepoFolderName(absl::string_view repo_id) {
  std::string name = "models";
  for (absl::string_view part : absl::StrSplit(repo_id, '/')) {
    absl::StrAppend(&name, "--", part);
  }
  return name;
}

std::string UrlQuote(absl::string_view text, absl::string_view safe) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : text) {
    if (absl::ascii_isalnum(c) || c == '_' || c == '.' || c == '-' ||
        c == '~' ||
        safe.find(static_cast<char>(c)) != absl::string_view::npos) {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

}  // namespace encoder::hub
