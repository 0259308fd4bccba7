// The HTTP requests the Hub client makes, on libcurl: HTTPS with the
// system's certificate store, proxies from the usual environment variables,
// redirects, connection reuse and transfer limits come with it, none of
// which is worth writing again. One HttpClient is one connection cache; it
// is not thread-safe.
#ifndef ENCODER_SERVER_HUB_HUB_HTTP_H_
#define ENCODER_SERVER_HUB_HUB_HTTP_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

typedef void CURL;

namespace encoder::hub {

// Transfer limits, in seconds and bytes per second.
struct HttpLimits {
  // Connecting (DNS, TCP, TLS) to a server.
  long connect_timeout_s = 10;
  // A whole metadata request (HEAD or an API GET).
  long request_timeout_s = 10;
  // A body transfer is abandoned when fewer than low_speed_bytes_per_s bytes
  // per second arrive for low_speed_time_s seconds (stall detection; 0 bytes/s
  // turns it off).
  long low_speed_bytes_per_s = 1024;
  long low_speed_time_s = 30;
};

// Header names compare without case.
struct CaseLess {
  bool operator()(const std::string& a, const std::string& b) const;
};

struct HttpResponse {
  long status = 0;
  // The last response's headers (after redirects followed by curl).
  std::map<std::string, std::string, CaseLess> headers;
  std::string body;
  // The URL the last response came from.
  std::string url;

  // A header's value, "" when absent.
  std::string Header(const std::string& name) const;
};

class HttpClient {
 public:
  explicit HttpClient(HttpLimits limits);
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // A request whose body is kept in memory (metadata); redirects are not
  // followed. `method` is "GET" or "HEAD". Only transport failures are
  // errors (see TransportError); any HTTP status is a response.
  absl::StatusOr<HttpResponse> Fetch(absl::string_view method,
                                     const std::string& url,
                                     const std::vector<std::string>& headers);

  // A GET whose body goes to `sink` as it arrives, following redirects.
  // `on_status` is called once with the final status and headers before the
  // first body byte of a 2xx response; a false return from it or from
  // `sink` aborts the transfer, which then returns `abort_status` (set by
  // the callback). Bodies of non-2xx responses are kept in the response
  // (for their messages), not given to `sink`.
  using Sink = std::function<bool(const char* data, size_t size)>;
  using OnStatus = std::function<bool(const HttpResponse& head)>;
  absl::StatusOr<HttpResponse> Stream(const std::string& url,
                                      const std::vector<std::string>& headers,
                                      const OnStatus& on_status,
                                      const Sink& sink,
                                      absl::Status* abort_status);

 private:
  HttpLimits limits_;
  CURL* curl_;
};

// The origin of a URL: scheme://host[:port], lowercased, with the scheme's
// default port made explicit, so two URLs of one server compare equal.
std::string UrlOrigin(absl::string_view url);

// `location` (a Location header, absolute or relative) resolved against
// `base`.
std::string ResolveUrl(absl::string_view base, absl::string_view location);

}  // namespace encoder::hub

#endif  // ENCODER_SERVER_HUB_HUB_HTTP_H_
