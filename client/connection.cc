#include "client/connection.h"

#include <grpcpp/support/client_interceptor.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <utility>
#include <vector>

namespace encoder_client {
namespace {

bool ReadFile(const std::string& flag, const std::string& path,
              std::string* out, std::string* error) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    *error = flag + ": cannot open " + path;
    return false;
  }
  std::ostringstream text;
  text << in.rdbuf();
  *out = text.str();
  return true;
}

// The first line of `text` that is neither blank nor a '#' comment,
// trimmed.
std::string FirstToken(const std::string& text) {
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    const size_t begin = line.find_first_not_of(" \t\r");
    if (begin == std::string::npos || line[begin] == '#') continue;
    const size_t end = line.find_last_not_of(" \t\r");
    return line.substr(begin, end - begin + 1);
  }
  return "";
}

// Adds the bearer token to every call's initial metadata. An interceptor
// rather than call credentials: those are sent over TLS only, and a token
// also guards plaintext servers behind a TLS-terminating proxy.
class TokenInterceptor : public grpc::experimental::Interceptor {
 public:
  explicit TokenInterceptor(const std::string* header) : header_(header) {}
  void Intercept(grpc::experimental::InterceptorBatchMethods* m) override {
    if (m->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::
                PRE_SEND_INITIAL_METADATA)) {
      m->GetSendInitialMetadata()->insert({"authorization", *header_});
    }
    m->Proceed();
  }

 private:
  const std::string* header_;
};

class TokenInterceptorFactory
    : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit TokenInterceptorFactory(const std::string& token)
      : header_("Bearer " + token) {}
  grpc::experimental::Interceptor* CreateClientInterceptor(
      grpc::experimental::ClientRpcInfo*) override {
    return new TokenInterceptor(&header_);
  }

 private:
  const std::string header_;
};

}  // namespace

bool LoadCredentials(ConnectionOptions* o, std::string* error) {
  if (o->cert_file.empty() != o->key_file.empty()) {
    *error = "--cert and --key go together";
    return false;
  }
  if (!o->ca_file.empty() || !o->cert_file.empty()) o->tls = true;
  if (!o->ca_file.empty() && !ReadFile("--ca", o->ca_file, &o->ca_pem, error)) {
    return false;
  }
  if (!o->cert_file.empty() &&
      (!ReadFile("--cert", o->cert_file, &o->cert_pem, error) ||
       !ReadFile("--key", o->key_file, &o->key_pem, error))) {
    return false;
  }
  if (!o->token_file.empty()) {
    std::string text;
    if (!ReadFile("--token-file", o->token_file, &text, error)) return false;
    o->token = FirstToken(text);
    if (o->token.empty()) {
      *error = "--token-file: no token in " + o->token_file;
      return false;
    }
  }
  return true;
}

std::shared_ptr<grpc::Channel> CreateChannel(const ConnectionOptions& options) {
  grpc::ChannelArguments arguments;
  arguments.SetMaxReceiveMessageSize(-1);
  std::shared_ptr<grpc::ChannelCredentials> credentials =
      grpc::InsecureChannelCredentials();
  if (options.tls) {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = options.ca_pem;
    ssl.pem_cert_chain = options.cert_pem;
    ssl.pem_private_key = options.key_pem;
    credentials = grpc::SslCredentials(ssl);
  }
  std::vector<
      std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>>
      interceptors;
  if (!options.token.empty()) {
    interceptors.push_back(
        std::make_unique<TokenInterceptorFactory>(options.token));
  }
  return grpc::experimental::CreateCustomChannelWithInterceptors(
      options.target, credentials, arguments, std::move(interceptors));
}

void SetDeadline(int64_t deadline_ms, grpc::ClientContext* context) {
  context->set_deadline(std::chrono::system_clock::now() +
                        std::chrono::milliseconds(deadline_ms));
}

}  // namespace encoder_client
