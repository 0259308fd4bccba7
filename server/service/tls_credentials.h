// Server credentials from the TLS flags: plaintext, TLS, or mutual TLS.
//
// The certificate, key and client CA are watched by gRPC's
// FileWatcherCertificateProvider: files replaced on disk are re-read every
// `reload_seconds` and new handshakes use them, without a restart and
// without dropping established connections. That polling is the reload
// gRPC 1.51's C++ API offers; it has no call to force a re-read, so SIGHUP
// cannot trigger one.
#ifndef ENCODER_SERVER_SERVICE_TLS_CREDENTIALS_H_
#define ENCODER_SERVER_SERVICE_TLS_CREDENTIALS_H_

#include <grpcpp/security/server_credentials.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace encoder::service {

struct TlsFiles {
  std::string cert_file;       // PEM certificate chain; empty: plaintext
  std::string key_file;        // PEM private key of its first certificate
  std::string client_ca_file;  // PEM CAs that sign client certificates
  // none | request | require; empty: require with a client CA, else none.
  std::string client_auth;
  int reload_seconds = 10;
};

// Checks the files (readable PEM, the key matches the certificate, a
// client CA for request/require) and builds the credentials.
// InvalidArgument or NotFound naming the flag and file otherwise.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const TlsFiles& files);

}  // namespace encoder::service

#endif  // ENCODER_SERVER_SERVICE_TLS_CREDENTIALS_H_
