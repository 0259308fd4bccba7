#include "server/http/metrics_http_server.h"

#include <fstream>
#include <sstream>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "server/auth/token_auth.h"
#include "server/common/status_macros.h"

namespace encoder::http {
namespace {

constexpr char kTextFormat[] = "text/plain; version=0.0.4; charset=utf-8";

absl::StatusOr<std::string> ReadFile(const std::string& path,
                                     const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return absl::NotFoundError(absl::StrCat("cannot open ", what, " ", path));
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// Whether `header` ("Basic base64(user:password)") names one of
// `credentials`, compared in constant time.
bool BasicAuthOk(std::string_view header_value,
                 const std::vector<std::string>& credentials) {
  const absl::string_view header(header_value.data(), header_value.size());
  constexpr absl::string_view kScheme = "basic ";
  if (!absl::StartsWithIgnoreCase(header, kScheme)) return false;
  std::string decoded;
  if (!absl::Base64Unescape(
          absl::StripAsciiWhitespace(header.substr(kScheme.size())),
          &decoded)) {
    return false;
  }
  return auth::MatchesAnyToken(decoded, credentials);
}

}  // namespace

absl::StatusOr<std::unique_ptr<MetricsHttpServer>> MetricsHttpServer::Start(
    const MetricsHttpOptions& options, Render render) {
  std::unique_ptr<MetricsHttpServer> s(new MetricsHttpServer());
  s->render_ = std::move(render);
  if (!options.basic_auth_file.empty()) {
    ASSIGN_OR_RETURN(auto text, ReadFile(options.basic_auth_file,
                                         "metrics basic auth file"));
    auto lines = auth::ParseTokens(text);
    if (!lines.ok() || !absl::StrContains(lines->front(), ':')) {
      return absl::InvalidArgumentError(
          absl::StrCat("metrics basic auth file ", options.basic_auth_file,
                       ": expected user:password lines"));
    }
    s->credentials_ = *std::move(lines);
  }
  MetricsHttpServer* self = s.get();
  Router router;
  router.Add("GET", "/metrics", [self](std::shared_ptr<Exchange> x) {
    Response r;
    if (!self->credentials_.empty() &&
        !BasicAuthOk(x->request().HeaderValue("Authorization"),
                     self->credentials_)) {
      r.status = 401;
      r.headers.push_back({"WWW-Authenticate", "Basic realm=\"metrics\""});
      r.body = "authentication required\n";
      return x->Respond(std::move(r));
    }
    r.content_type = kTextFormat;
    r.body = self->render_();
    x->Respond(std::move(r));
  });
  if (options.routes) options.routes(router);
  ServerOptions server_options = options;
  if (!server_options.render_error) {
    server_options.render_error = [](const Request* q, int status,
                                     const std::string& message) {
      Response r;
      r.status = status;
      r.body = message + "\n";
      if (status == 404 && q != nullptr && q->path != "/metrics") {
        r.body = "metrics are at /metrics\n";
      }
      return r;
    };
  }
  ASSIGN_OR_RETURN(s->server_,
                   HttpServer::Start(server_options, std::move(router)));
  return s;
}

MetricsHttpServer::~MetricsHttpServer() = default;

}  // namespace encoder::http
