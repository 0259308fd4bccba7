#include "server/hub/hub_http.h"

#include <curl/curl.h>
#include <strings.h>

#include <memory>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "server/common/curl_global.h"

namespace encoder::hub {
namespace {

// State shared with curl's callbacks for one transfer.
struct Transfer {
  CURL* curl = nullptr;
  HttpResponse response;
  // Streaming: where 2xx bodies go; null keeps every body in memory.
  const HttpClient::OnStatus* on_status = nullptr;
  const HttpClient::Sink* sink = nullptr;
  bool status_seen = false;
  bool streaming_body = false;
  bool aborted = false;
};

size_t OnHeader(char* data, size_t size, size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const size_t n = size * count;
  absl::string_view line(data, n);
  line = absl::StripTrailingAsciiWhitespace(line);
  // A status line starts the headers of one response (a redirect's, a 100
  // Continue's or the final one's): keep only the last response's.
  if (absl::StartsWith(line, "HTTP/")) {
    t->response.headers.clear();
    return n;
  }
  const size_t colon = line.find(':');
  if (colon != absl::string_view::npos) {
    t->response.headers[std::string(line.substr(0, colon))] =
        std::string(absl::StripAsciiWhitespace(line.substr(colon + 1)));
  }
  return n;
}

size_t OnBody(char* data, size_t size, size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const size_t n = size * count;
  if (t->sink != nullptr && !t->status_seen) {
    t->status_seen = true;
    curl_easy_getinfo(t->curl, CURLINFO_RESPONSE_CODE, &t->response.status);
    char* url = nullptr;
    curl_easy_getinfo(t->curl, CURLINFO_EFFECTIVE_URL, &url);
    if (url != nullptr) t->response.url = url;
    t->streaming_body = t->response.status / 100 == 2;
    if (t->streaming_body && !(*t->on_status)(t->response)) {
      t->aborted = true;
      return 0;  // CURLE_WRITE_ERROR
    }
  }
  if (t->streaming_body) {
    if (!(*t->sink)(data, n)) {
      t->aborted = true;
      return 0;
    }
    return n;
  }
  // Error bodies are short; a misbehaving server's is cut at 64 KiB.
  if (t->response.body.size() < (64 << 10)) t->response.body.append(data, n);
  return n;
}

absl::Status TransportError(CURLcode code, const std::string& url,
                            const char* detail, const HttpLimits& limits,
                            bool body_transfer) {
  const std::string what = absl::StrCat(
      url, ": ", *detail != '\0' ? detail : curl_easy_strerror(code));
  switch (code) {
    case CURLE_OPERATION_TIMEDOUT:
      if (body_transfer) {
        return absl::DeadlineExceededError(absl::StrCat(
            what, " (the transfer stalled: under ",
            limits.low_speed_bytes_per_s, " bytes/s for ",
            limits.low_speed_time_s, " s, or the connection took over ",
            limits.connect_timeout_s, " s)"));
      }
      return absl::DeadlineExceededError(
          absl::StrCat(what, " (no answer within ", limits.request_timeout_s,
                       " s, connect limit ", limits.connect_timeout_s, " s)"));
    case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_CONNECT:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
      return absl::UnavailableError(what);
    case CURLE_TOO_MANY_REDIRECTS:
      return absl::FailedPreconditionError(what);
    default:
      return absl::UnknownError(what);
  }
}

struct SlistDeleter {
  void operator()(curl_slist* list) const { curl_slist_free_all(list); }
};
using HeaderList = std::unique_ptr<curl_slist, SlistDeleter>;

// What every transfer sets on the reset handle `t->curl`: the URL, the
// request headers (kept alive in `*list`), the error buffer, no signals,
// the connect limit, and the callbacks that fill `t`.
void StartTransfer(Transfer* t, const std::string& url,
                   const std::vector<std::string>& headers,
                   long connect_timeout_s, HeaderList* list, char* error) {
  CURL* curl = t->curl;
  curl_easy_reset(curl);
  for (const std::string& h : headers) {
    list->reset(curl_slist_append(list->release(), h.c_str()));
  }
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, list->get());
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, error);
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT, connect_timeout_s);
  curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, OnHeader);
  curl_easy_setopt(curl, CURLOPT_HEADERDATA, t);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, OnBody);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, t);
}

}  // namespace

bool CaseLess::operator()(const std::string& a, const std::string& b) const {
  return strcasecmp(a.c_str(), b.c_str()) < 0;
}

std::string HttpResponse::Header(const std::string& name) const {
  auto it = headers.find(name);
  return it == headers.end() ? "" : it->second;
}

HttpClient::HttpClient(HttpLimits limits) : limits_(limits) {
  CurlGlobalInit();
  curl_ = curl_easy_init();
}

HttpClient::~HttpClient() { curl_easy_cleanup(curl_); }

absl::StatusOr<HttpResponse> HttpClient::Fetch(
    absl::string_view method, const std::string& url,
    const std::vector<std::string>& headers) {
  if (curl_ == nullptr) return absl::InternalError("curl_easy_init failed");
  Transfer t;
  t.curl = curl_;
  HeaderList list;
  char error[CURL_ERROR_SIZE] = {0};
  StartTransfer(&t, url, headers, limits_.connect_timeout_s, &list, error);
  curl_easy_setopt(curl_, CURLOPT_TIMEOUT, limits_.request_timeout_s);
  curl_easy_setopt(curl_, CURLOPT_FOLLOWLOCATION, 0L);
  if (method == "HEAD") curl_easy_setopt(curl_, CURLOPT_NOBODY, 1L);
  const CURLcode code = curl_easy_perform(curl_);
  if (code != CURLE_OK) {
    return TransportError(code, url, error, limits_, false);
  }
  curl_easy_getinfo(curl_, CURLINFO_RESPONSE_CODE, &t.response.status);
  t.response.url = url;
  return std::move(t.response);
}

absl::StatusOr<HttpResponse> HttpClient::Stream(
    const std::string& url, const std::vector<std::string>& headers,
    const OnStatus& on_status, const Sink& sink, absl::Status* abort_status) {
  if (curl_ == nullptr) return absl::InternalError("curl_easy_init failed");
  Transfer t;
  t.curl = curl_;
  t.on_status = &on_status;
  t.sink = &sink;
  HeaderList list;
  char error[CURL_ERROR_SIZE] = {0};
  StartTransfer(&t, url, headers, limits_.connect_timeout_s, &list, error);
  curl_easy_setopt(curl_, CURLOPT_LOW_SPEED_LIMIT,
                   limits_.low_speed_bytes_per_s);
  curl_easy_setopt(curl_, CURLOPT_LOW_SPEED_TIME, limits_.low_speed_time_s);
  curl_easy_setopt(curl_, CURLOPT_FOLLOWLOCATION, 1L);
  curl_easy_setopt(curl_, CURLOPT_MAXREDIRS, 10L);
  // Larger reads mean fewer callbacks per byte on fast links (the largest
  // buffer curl allows).
  curl_easy_setopt(curl_, CURLOPT_BUFFERSIZE, CURL_MAX_READ_SIZE);
  const CURLcode code = curl_easy_perform(curl_);
  char* effective = nullptr;
  curl_easy_getinfo(curl_, CURLINFO_EFFECTIVE_URL, &effective);
  if (t.aborted) {
    return abort_status != nullptr && !abort_status->ok()
               ? *abort_status
               : absl::AbortedError(absl::StrCat(url, ": transfer aborted"));
  }
  if (code != CURLE_OK) {
    return TransportError(code, effective != nullptr ? effective : url, error,
                          limits_, true);
  }
  curl_easy_getinfo(curl_, CURLINFO_RESPONSE_CODE, &t.response.status);
  t.response.url = effective != nullptr ? effective : url;
  // An empty 2xx body never reached OnBody: the caller still hears of it.
  if (!t.status_seen && t.response.status / 100 == 2 &&
      !on_status(t.response)) {
    return abort_status != nullptr && !abort_status->ok()
               ? *abort_status
               : absl::AbortedError(absl::StrCat(url, ": transfer aborted"));
  }
  return std::move(t.response);
}

std::string UrlOrigin(absl::string_view url) {
  CURLU* u = curl_url();
  std::string origin;
  const std::string text(url);
  if (curl_url_set(u, CURLUPART_URL, text.c_str(), 0) == CURLUE_OK) {
    char *scheme = nullptr, *host = nullptr, *port = nullptr;
    curl_url_get(u, CURLUPART_SCHEME, &scheme, 0);
    curl_url_get(u, CURLUPART_HOST, &host, 0);
    curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT);
    origin = absl::AsciiStrToLower(absl::StrCat(
        scheme ? scheme : "", "://", host ? host : "", ":", port ? port : ""));
    curl_free(scheme);
    curl_free(host);
    curl_free(port);
  }
  curl_url_cleanup(u);
  return origin;
}

std::string ResolveUrl(absl::string_view base, absl::string_view location) {
  CURLU* u = curl_url();
  std::string out(location);
  const std::string b(base), l(location);
  char* full = nullptr;
  if (curl_url_set(u, CURLUPART_URL, b.c_str(), 0) == CURLUE_OK &&
      curl_url_set(u, CURLUPART_URL, l.c_str(), 0) == CURLUE_OK &&
      curl_url_get(u, CURLUPART_URL, &full, 0) == CURLUE_OK) {
    out = full;
  }
  curl_free(full);
  curl_url_cleanup(u);
  return out;
}

}  // namespace encoder::hub
