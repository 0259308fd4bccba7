#include "server/core/edge_auth.h"

#include "absl/strings/str_cat.h"

namespace encoder::core {

absl::Status CheckBearer(const EdgeAuth& edge,
                         const std::vector<absl::string_view>& authorization,
                         const char* carrier) {
  if (edge.tokens == nullptr) return absl::OkStatus();
  const auth::AuthResult result = edge.tokens->Check(authorization);
  if (result == auth::AuthResult::kOk) return absl::OkStatus();
  edge.metrics->AuthFailure(auth::AuthResultName(result));
  return absl::UnauthenticatedError(
      result == auth::AuthResult::kMissing
          ? absl::StrCat("missing ", carrier)
          : std::string("the bearer token is not accepted"));
}

}  // namespace encoder::core
