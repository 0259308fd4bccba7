#include "server/service/tls_credentials.h"

#include <grpcpp/security/tls_certificate_provider.h>
#include <grpcpp/security/tls_credentials_options.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <fstream>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "server/common/status_macros.h"

namespace encoder::service {
namespace {

absl::StatusOr<std::string> ReadPem(const std::string& flag,
                                    const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return absl::NotFoundError(absl::StrCat(flag, ": cannot open ", path));
  std::ostringstream text;
  text << in.rdbuf();
  if (text.str().find("-----BEGIN ") == std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, ": ", path, " is not PEM"));
  }
  return text.str();
}

// Whether the private key in `key_pem` belongs to the first certificate in
// `cert_pem`.
absl::Status CheckKeyMatches(const std::string& cert_pem,
                             const std::string& key_pem) {
  BIO* cert_bio =
      BIO_new_mem_buf(cert_pem.data(), static_cast<int>(cert_pem.size()));
  BIO* key_bio =
      BIO_new_mem_buf(key_pem.data(), static_cast<int>(key_pem.size()));
  X509* cert = PEM_read_bio_X509(cert_bio, nullptr, nullptr, nullptr);
  EVP_PKEY* key = PEM_read_bio_PrivateKey(key_bio, nullptr, nullptr, nullptr);
  absl::Status status;
  if (cert == nullptr) {
    status = absl::InvalidArgumentError("--tls-cert: no certificate in it");
  } else if (key == nullptr) {
    status = absl::InvalidArgumentError(
        "--tls-key: no unencrypted private key in it");
  } else if (X509_check_private_key(cert, key) != 1) {
    status = absl::InvalidArgumentError(
        "--tls-key does not belong to the certificate in --tls-cert");
  }
  EVP_PKEY_free(key);
  X509_free(cert);
  BIO_free(key_bio);
  BIO_free(cert_bio);
  return status;
}

absl::StatusOr<grpc_ssl_client_certificate_request_type> ClientAuthMode(
    const TlsFiles& files) {
  std::string mode = files.client_auth;
  if (mode.empty()) mode = files.client_ca_file.empty() ? "none" : "require";
  if (mode == "none") {
    if (!files.client_ca_file.empty()) {
      return absl::InvalidArgumentError(
          "--tls-client-ca is set but --tls-client-auth=none");
    }
    return GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE;
  }
  if (mode != "request" && mode != "require") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--tls-client-auth must be none, request or require, got ", mode));
  }
  if (files.client_ca_file.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--tls-client-auth=", mode, " needs --tls-client-ca"));
  }
  return mode == "request"
             ? GRPC_SSL_REQUEST_CLIENT_CERTIFICATE_AND_VERIFY
             : GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
}

}  // namespace

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const TlsFiles& files) {
  if (files.cert_file.empty() && files.key_file.empty()) {
    if (!files.client_ca_file.empty() ||
        (!files.client_auth.empty() && files.client_auth != "none")) {
      return absl::InvalidArgumentError(
          "client certificates need TLS: set --tls-cert and --tls-key");
    }
    return grpc::InsecureServerCredentials();
  }
  if (files.cert_file.empty() || files.key_file.empty()) {
    return absl::InvalidArgumentError(
        "TLS needs both --tls-cert and --tls-key");
  }
  if (files.reload_seconds < 1) {
    return absl::InvalidArgumentError(
        "--tls-reload-interval must be at least 1s");
  }
  ASSIGN_OR_RETURN(auto cert, ReadPem("--tls-cert", files.cert_file));
  ASSIGN_OR_RETURN(auto key, ReadPem("--tls-key", files.key_file));
  RETURN_IF_ERROR(CheckKeyMatches(cert, key));
  ASSIGN_OR_RETURN(auto mode, ClientAuthMode(files));
  if (!files.client_ca_file.empty()) {
    ASSIGN_OR_RETURN(auto ca, ReadPem("--tls-client-ca", files.client_ca_file));
  }
  auto provider =
      std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
          files.key_file, files.cert_file, files.client_ca_file,
          static_cast<unsigned>(files.reload_seconds));
  grpc::experimental::TlsServerCredentialsOptions options(provider);
  options.watch_identity_key_cert_pairs();
  if (!files.client_ca_file.empty()) options.watch_root_certs();
  options.set_cert_request_type(mode);
  return grpc::experimental::TlsServerCredentials(options);
}

}  // namespace encoder::service
