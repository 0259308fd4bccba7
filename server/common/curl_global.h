// libcurl's process-wide set-up, shared by every part that makes handles
// (the Hub downloads, the OTLP/HTTP exporter). Header-only: its users
// already link libcurl.
#ifndef ENCODER_SERVER_COMMON_CURL_GLOBAL_H_
#define ENCODER_SERVER_COMMON_CURL_GLOBAL_H_

#include <curl/curl.h>

#include <mutex>

namespace encoder {

// curl_global_init is not thread-safe: once per process, before any handle.
inline void CurlGlobalInit() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

}  // namespace encoder

#endif  // ENCODER_SERVER_COMMON_CURL_GLOBAL_H_
