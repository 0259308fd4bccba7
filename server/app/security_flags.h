// encoder-server's transport and identity flags: TLS and mutual TLS on the
// gRPC port, bearer tokens, reflection, and the HTTP port's bind address,
// TLS, body limit, connections and /metrics basic auth.
#ifndef ENCODER_SERVER_APP_SECURITY_FLAGS_H_
#define ENCODER_SERVER_APP_SECURITY_FLAGS_H_

#include <CLI/CLI.hpp>

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "server/auth/token_auth.h"
#include "server/http/metrics_http_server.h"
#include "server/service/server.h"
#include "server/service/tls_credentials.h"

namespace encoder {

struct SecurityFlags {
  service::TlsFiles tls;
  std::string auth_token_file;
  std::string api_key;  // --api-key: one token (TEI's flag)
  bool auth_health = false;
  bool reflection = true;
  std::string health_listen;
  // The HTTP port (--http-listen; the --metrics-* names are aliases).
  std::string metrics_address = "127.0.0.1";
  std::string metrics_tls_cert;
  std::string metrics_tls_key;
  std::string metrics_basic_auth_file;
  int metrics_max_connections = 1024;
  int64_t http_max_body_bytes = 16 << 20;
  int64_t http_max_header_bytes = 16 << 10;
  double http_request_timeout_seconds = 300;
  bool http_docs = true;  // /openapi.json and /docs
  double http_keep_alive_seconds = 2;
  int http_max_pipelined_requests = 16;
  int http_threads = 2;
};

void DefineSecurityFlags(CLI::App& app, SecurityFlags& flags);

// Fills the security part of `options` from `flags`; reads the token file
// into `*tokens` (left null without --auth-token-file), which must outlive
// the server.
absl::Status ApplySecurityFlags(
    const SecurityFlags& flags, service::ServerOptions* options,
    std::unique_ptr<auth::TokenAuthenticator>* tokens);

// The HTTP port's options for --http-listen=`listen`: its own TLS files
// when given, else the gRPC port's (--tls-cert, --tls-key, and
// --tls-client-ca when client certificates are required).
http::MetricsHttpOptions MetricsHttpOptions(const SecurityFlags& flags,
                                            const std::string& listen);

}  // namespace encoder

#endif  // ENCODER_SERVER_APP_SECURITY_FLAGS_H_
