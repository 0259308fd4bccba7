#include "server/transport/gzip.h"

#include <zlib.h>

#include <stdexcept>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"

namespace encoder::http {

bool AcceptsGzip(std::string_view accept_encoding) {
  bool gzip = false;
  bool gzip_refused = false;
  bool any = false;
  for (absl::string_view item : absl::StrSplit(
           absl::string_view(accept_encoding.data(), accept_encoding.size()),
           ',')) {
    std::vector<absl::string_view> parts = absl::StrSplit(item, ';');
    const absl::string_view coding = absl::StripAsciiWhitespace(parts[0]);
    double q = 1.0;
    for (size_t i = 1; i < parts.size(); ++i) {
      const absl::string_view param = absl::StripAsciiWhitespace(parts[i]);
      if (param.size() > 2 && absl::ascii_tolower(param[0]) == 'q' &&
          param[1] == '=') {
        if (!absl::SimpleAtod(param.substr(2), &q)) q = 0;
      }
    }
    if (absl::EqualsIgnoreCase(coding, "gzip") ||
        absl::EqualsIgnoreCase(coding, "x-gzip")) {
      (q > 0 ? gzip : gzip_refused) = true;
    } else if (coding == "*" && q > 0) {
      any = true;
    }
  }
  return gzip || (any && !gzip_refused);
}

std::string Gzip(std::string_view data) {
  z_stream z{};
  // 15 window bits + 16: a gzip header and trailer instead of zlib's.
  if (deflateInit2(&z, Z_BEST_SPEED, Z_DEFLATED, 15 + 16, 8,
                   Z_DEFAULT_STRATEGY) != Z_OK) {
    throw std::runtime_error("zlib: deflateInit2 failed");
  }
  std::string out;
  out.resize(deflateBound(&z, static_cast<uLong>(data.size())));
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = static_cast<uInt>(data.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  const int rc = deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  if (rc != Z_STREAM_END) throw std::runtime_error("zlib: deflate failed");
  return out;
}

}  // namespace encoder::http
