// Bearer tokens at every front: the same tokens, the same rule for health
// probes and the same counted refusal, whichever wire format carries the
// token (gRPC metadata, an HTTP header).
#ifndef ENCODER_SERVER_CORE_EDGE_AUTH_H_
#define ENCODER_SERVER_CORE_EDGE_AUTH_H_

#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "server/auth/token_auth.h"
#include "server/metrics/metrics.h"

namespace encoder::core {

struct EdgeAuth {
  const auth::TokenAuthenticator* tokens = nullptr;  // null: no authentication
  bool protect_health = false;          // health probes need a token too
  metrics::Metrics* metrics = nullptr;  // counts failures; not null
};

// OK when no tokens are configured or `authorization` (the values of the
// call's authorization header or metadata) carries an accepted bearer
// token; else UNAUTHENTICATED, counted as an auth failure. `carrier` says
// where the token belongs, for the message ("\"Authorization: Bearer
// <token>\" header").
absl::Status CheckBearer(const EdgeAuth& edge,
                         const std::vector<absl::string_view>& authorization,
                         const char* carrier);

}  // namespace encoder::core

#endif  // ENCODER_SERVER_CORE_EDGE_AUTH_H_
