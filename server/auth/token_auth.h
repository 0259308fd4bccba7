// Bearer-token authentication: the accepted tokens, read from a file (one a
// line, several at once so that keys can rotate), and the check of an
// `authorization: Bearer <token>` header value in constant time. No gRPC
// here: the edge (auth_interceptor, EncoderServiceImpl) calls Check.
#ifndef ENCODER_SERVER_AUTH_TOKEN_AUTH_H_
#define ENCODER_SERVER_AUTH_TOKEN_AUTH_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace encoder::auth {

enum class AuthResult { kOk, kMissing, kInvalid };

// "ok", "missing", "invalid": the metrics label of a result.
const char* AuthResultName(AuthResult result);

// The tokens in `text`: one a line, surrounding blanks trimmed; empty lines
// and lines starting with '#' are skipped. InvalidArgument when no token is
// left or a token holds a blank or a control character.
absl::StatusOr<std::vector<std::string>> ParseTokens(absl::string_view text);

// Whether `presented` equals one of `tokens`. Takes the same time whichever
// token matches, and for a mismatch wherever it is: every token is compared
// over the full length of `presented`.
bool MatchesAnyToken(absl::string_view presented,
                     const std::vector<std::string>& tokens);

class TokenAuthenticator {
 public:
  explicit TokenAuthenticator(std::vector<std::string> tokens);

  // Reads the token file. The message names the file, never a token.
  static absl::StatusOr<std::unique_ptr<TokenAuthenticator>> FromFile(
      const std::string& path);

  // Re-reads the file this authenticator came from (on SIGHUP); on error
  // the old tokens stay in force.
  absl::Status Reload();

  // Checks the values of the `authorization` header: kMissing when there
  // is none, kOk when one is "Bearer <token>" ("bearer" in any case) with
  // an accepted token, else kInvalid.
  AuthResult Check(const std::vector<absl::string_view>& authorization) const;

  size_t token_count() const;

 private:
  std::string path_;
  mutable absl::Mutex mu_;
  std::vector<std::string> tokens_ ABSL_GUARDED_BY(mu_);
};

}  // namespace encoder::auth

#endif  // ENCODER_SERVER_AUTH_TOKEN_AUTH_H_
