// gzip for HTTP responses (zlib), and the Accept-Encoding test that decides
// when to use it.
#ifndef ENCODER_SERVER_TRANSPORT_GZIP_H_
#define ENCODER_SERVER_TRANSPORT_GZIP_H_

#include <string>
#include <string_view>

namespace encoder::http {

// Whether an Accept-Encoding value admits gzip: "gzip" (or "x-gzip") or
// "*" with a q-value above 0, and gzip not refused with q=0.
bool AcceptsGzip(std::string_view accept_encoding);

// `data` as a gzip member (RFC 1952), at zlib's fastest level: responses
// are float vectors and metrics, where speed matters more than the last
// few percent of size.
std::string Gzip(std::string_view data);

}  // namespace encoder::http

#endif  // ENCODER_SERVER_TRANSPORT_GZIP_H_
