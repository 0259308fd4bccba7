#include "server/auth/token_auth.h"

#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "server/common/status_macros.h"

namespace encoder::auth {

const char* AuthResultName(AuthResult result) {
  switch (result) {
    case AuthResult::kOk:
      return "ok";
    case AuthResult::kMissing:
      return "missing";
    case AuthResult::kInvalid:
      return "invalid";
  }
  return "invalid";
}

absl::StatusOr<std::vector<std::string>> ParseTokens(absl::string_view text) {
  std::vector<std::string> tokens;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line.front() == '#') continue;
    for (unsigned char c : line) {
      if (c <= ' ' || c == 0x7f) {
        return absl::InvalidArgumentError(
            absl::StrCat("line ", line_number,
                         ": a token may not hold blanks or control "
                         "characters"));
      }
    }
    tokens.emplace_back(line);
  }
  if (tokens.empty()) {
    return absl::InvalidArgumentError("no token (one per line expected)");
  }
  return tokens;
}

bool MatchesAnyToken(absl::string_view presented,
                     const std::vector<std::string>& tokens) {
  unsigned match = 0;
  for (const std::string& token : tokens) {
    // Lengths differ: a mismatch, found without an early exit.
    unsigned diff = presented.size() == token.size() ? 0u : 1u;
    if (token.empty()) diff = 1u;
    const size_t n = token.empty() ? 1 : token.size();
    for (size_t i = 0; i < presented.size(); ++i) {
      const unsigned char expected =
          token.empty() ? 0 : static_cast<unsigned char>(token[i % n]);
      diff |= static_cast<unsigned char>(presented[i]) ^ expected;
    }
    match |= static_cast<unsigned>(diff == 0);
  }
  return match != 0 && !presented.empty();
}

TokenAuthenticator::TokenAuthenticator(std::vector<std::string> tokens)
    : tokens_(std::move(tokens)) {}

absl::StatusOr<std::unique_ptr<TokenAuthenticator>>
TokenAuthenticator::FromFile(const std::string& path) {
  auto auth = std::make_unique<TokenAuthenticator>(std::vector<std::string>{});
  auth->path_ = path;
  RETURN_IF_ERROR(auth->Reload());
  return auth;
}

absl::Status TokenAuthenticator::Reload() {
  if (path_.empty()) return absl::OkStatus();  // tokens given, not a file
  std::ifstream in(path_, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(absl::StrCat("cannot open token file ", path_));
  }
  std::ostringstream text;
  text << in.rdbuf();
  auto tokens = ParseTokens(text.str());
  if (!tokens.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("token file ", path_, ": ", tokens.status().message()));
  }
  absl::MutexLock lock(&mu_);
  tokens_ = *std::move(tokens);
  return absl::OkStatus();
}

AuthResult TokenAuthenticator::Check(
    const std::vector<absl::string_view>& authorization) const {
  if (authorization.empty()) return AuthResult::kMissing;
  absl::ReaderMutexLock lock(&mu_);
  bool ok = false;
  for (absl::string_view value : authorization) {
    constexpr absl::string_view kScheme = "bearer ";
    if (value.size() <= kScheme.size() ||
        !absl::StartsWithIgnoreCase(value, kScheme)) {
      continue;
    }
    value.remove_prefix(kScheme.size());
    ok |= MatchesAnyToken(absl::StripAsciiWhitespace(value), tokens_);
  }
  return ok ? AuthResult::kOk : AuthResult::kInvalid;
}

size_t TokenAuthenticator::token_count() const {
  absl::ReaderMutexLock lock(&mu_);
  return tokens_.size();
}

}  // namespace encoder::auth
