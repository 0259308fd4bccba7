#include "server/app/security_flags.h"

#include <utility>

#include "server/common/status_macros.h"

namespace encoder {

void DefineSecurityFlags(CLI::App& app, SecurityFlags& f) {
  app.add_option("--tls-cert", f.tls.cert_file,
                 "PEM certificate chain of the gRPC port; with --tls-key "
                 "the port speaks TLS only");
  app.add_option("--tls-key", f.tls.key_file, "PEM private key of --tls-cert");
  app.add_option("--tls-client-ca", f.tls.client_ca_file,
                 "PEM CA certificates that sign client certificates "
                 "(mutual TLS)");
  app.add_option("--tls-client-auth", f.tls.client_auth,
                 "none | request | require a client certificate; default: "
                 "require with --tls-client-ca, else none");
  app.add_option("--tls-reload-interval,--tls-reload-seconds",
                 f.tls.reload_seconds,
                 "how often the TLS files are checked for changes; changed "
                 "files serve new handshakes without a restart")
      ->capture_default_str();
  app.add_option("--api-key", f.api_key,
                 "one bearer token (text-embeddings-inference's flag; prefer "
                 "--auth-token-file: a flag's value shows in the process "
                 "list, and SIGHUP cannot change it)");
  app.add_option("--auth-token-file", f.auth_token_file,
                 "file of accepted bearer tokens, one a line; calls need "
                 "`authorization: Bearer <token>` metadata, else "
                 "UNAUTHENTICATED. Re-read on SIGHUP");
  app.add_flag("--auth-health,!--no-auth-health", f.auth_health,
               "grpc.health.v1 needs a token too (open by default)")
      ->capture_default_str();
  app.add_flag("--reflection,!--no-reflection", f.reflection,
               "serve gRPC server reflection (--reflection=false: off)")
      ->capture_default_str();
  app.add_option("--health-listen", f.health_listen,
                 "HOST:PORT of an extra plaintext port serving only "
                 "grpc.health.v1, for probes that cannot speak TLS (the "
                 "kubelet's); empty: none");
  app.add_option("--http-address,--metrics-address,--hostname",
                 f.metrics_address,
                 "host the HTTP port binds when --http-listen gives none "
                 "(\":8080\")")
      ->capture_default_str();
  app.add_option("--http-tls-cert,--metrics-tls-cert", f.metrics_tls_cert,
                 "PEM certificate of the HTTP port (HTTPS only); default: "
                 "--tls-cert's");
  app.add_option("--http-tls-key,--metrics-tls-key", f.metrics_tls_key,
                 "PEM private key of --http-tls-cert; default: --tls-key's");
  app.add_option("--metrics-basic-auth-file", f.metrics_basic_auth_file,
                 "file of user:password lines; /metrics needs HTTP basic "
                 "auth");
  app.add_option("--http-max-connections,--metrics-max-connections",
                 f.metrics_max_connections,
                 "HTTP connections open at once; more wait in the listen "
                 "queue")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  app.add_option("--http-max-body-bytes,--payload-limit", f.http_max_body_bytes,
                 "largest HTTP request body, counted as it arrives (chunked "
                 "or not); larger ones get 413 and the connection closes")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 31))
      ->capture_default_str();
  app.add_option("--http-max-header-bytes", f.http_max_header_bytes,
                 "largest HTTP request line and headers; larger ones get 431")
      ->check(CLI::Range(int64_t{256}, int64_t{1} << 24))
      ->capture_default_str();
  app.add_option("--http-request-timeout", f.http_request_timeout_seconds,
                 "time from an HTTP request's last byte to its answer: "
                 "past it the request is cancelled and answered 504; 0: no "
                 "limit")
      ->check(CLI::Range(0.0, 86400.0 * 7))
      ->capture_default_str();
  app.add_option("--http-keep-alive", f.http_keep_alive_seconds,
                 "how long an idle HTTP connection stays open")
      ->check(CLI::Range(0.001, 3600.0))
      ->capture_default_str();
  app.add_flag("--http-docs,!--no-http-docs", f.http_docs,
               "serve the HTTP API's OpenAPI document at /openapi.json (and "
               "/api-doc/openapi.json) and Swagger UI at /docs, without a "
               "token: they describe the routes, nothing of the models")
      ->capture_default_str();
  app.add_option("--http-max-pipelined-requests", f.http_max_pipelined_requests,
                 "HTTP requests read ahead on one connection while an "
                 "earlier one is answered (answers keep their order)")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  app.add_option("--http-threads", f.http_threads,
                 "threads that run every HTTP connection (parsing, JSON, "
                 "TLS); no thread waits for a model")
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
}

absl::Status ApplySecurityFlags(
    const SecurityFlags& flags, service::ServerOptions* options,
    std::unique_ptr<auth::TokenAuthenticator>* tokens) {
  ASSIGN_OR_RETURN(auto credentials, service::MakeServerCredentials(flags.tls));
  options->credentials = std::move(credentials);
  if (!flags.auth_token_file.empty() && !flags.api_key.empty()) {
    return absl::InvalidArgumentError(
        "--api-key and --auth-token-file: give one");
  }
  if (!flags.auth_token_file.empty()) {
    ASSIGN_OR_RETURN(auto loaded,
                     auth::TokenAuthenticator::FromFile(flags.auth_token_file));
    *tokens = std::move(loaded);
  } else if (!flags.api_key.empty()) {
    *tokens = std::make_unique<auth::TokenAuthenticator>(
        std::vector<std::string>{flags.api_key});
  } else if (flags.auth_health) {
    return absl::InvalidArgumentError(
        "--auth-health needs --auth-token-file or --api-key");
  }
  options->reflection = flags.reflection;
  options->health_listen = flags.health_listen;
  return absl::OkStatus();
}

http::MetricsHttpOptions MetricsHttpOptions(const SecurityFlags& flags,
                                            const std::string& listen) {
  http::MetricsHttpOptions options;
  options.listen = listen;
  options.default_host = flags.metrics_address;
  options.max_connections = flags.metrics_max_connections;
  if (!flags.metrics_tls_cert.empty() || !flags.metrics_tls_key.empty()) {
    options.tls_cert_file = flags.metrics_tls_cert;
    options.tls_key_file = flags.metrics_tls_key;
  } else {
    options.tls_cert_file = flags.tls.cert_file;
    options.tls_key_file = flags.tls.key_file;
    const std::string& mode = flags.tls.client_auth;
    if (!flags.tls.client_ca_file.empty() &&
        (mode.empty() || mode == "require")) {
      options.tls_client_ca_file = flags.tls.client_ca_file;
    }
  }
  options.basic_auth_file = flags.metrics_basic_auth_file;
  options.max_body_bytes = flags.http_max_body_bytes;
  options.max_header_bytes = flags.http_max_header_bytes;
  options.request_timeout = absl::Seconds(flags.http_request_timeout_seconds);
  options.keep_alive_timeout = absl::Seconds(flags.http_keep_alive_seconds);
  options.max_pipelined_requests = flags.http_max_pipelined_requests;
  options.io_threads = flags.http_threads;
  return options;
}

}  // namespace encoder
