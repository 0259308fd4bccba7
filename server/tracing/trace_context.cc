#include "server/tracing/trace_context.h"

#include <cmath>
#include <random>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace encoder::tracing {
namespace {

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

// Lowercase hex into `out`; false on any other character.
template <size_t N>
bool ParseHex(std::string_view text, std::array<uint8_t, N>* out) {
  if (text.size() != 2 * N) return false;
  for (size_t i = 0; i < N; ++i) {
    const int hi = HexDigit(text[2 * i]), lo = HexDigit(text[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    (*out)[i] = static_cast<uint8_t>(hi * 16 + lo);
  }
  return true;
}

template <size_t N>
bool AllZero(const std::array<uint8_t, N>& id) {
  for (uint8_t b : id) {
    if (b != 0) return false;
  }
  return true;
}

std::mt19937_64& Generator() {
  thread_local std::mt19937_64 generator([] {
    std::random_device device;
    return (static_cast<uint64_t>(device()) << 32) ^ device();
  }());
  return generator;
}

template <size_t N>
std::array<uint8_t, N> RandomId() {
  std::array<uint8_t, N> id{};
  while (AllZero(id)) {
    for (size_t i = 0; i < N; i += 8) {
      uint64_t bits = Generator()();
      for (size_t j = i; j < N && j < i + 8; ++j, bits >>= 8) {
        id[j] = static_cast<uint8_t>(bits);
      }
    }
  }
  return id;
}

int FromHexPair(char hi, char lo) {
  const int a = HexDigit(absl::ascii_tolower(hi));
  const int b = HexDigit(absl::ascii_tolower(lo));
  return a < 0 || b < 0 ? -1 : a * 16 + b;
}

std::string PercentDecoded(absl::string_view text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    const int v = text[i] == '%' && i + 2 < text.size()
                      ? FromHexPair(text[i + 1], text[i + 2])
                      : -1;
    if (v >= 0) {
      out.push_back(static_cast<char>(v));
      i += 2;
    } else {
      out.push_back(text[i]);
    }
  }
  return out;
}

}  // namespace

std::optional<SpanContext> ParseTraceparent(std::string_view v) {
  // version "-" trace-id "-" parent-id "-" flags: 2 + 1 + 32 + 1 + 16 + 1 + 2.
  constexpr size_t kLength = 55;
  if (v.size() < kLength) return std::nullopt;
  if (v[2] != '-' || v[35] != '-' || v[52] != '-') return std::nullopt;
  std::array<uint8_t, 1> version{}, flags{};
  SpanContext c;
  if (!ParseHex(v.substr(0, 2), &version) ||
      !ParseHex(v.substr(3, 32), &c.trace_id) ||
      !ParseHex(v.substr(36, 16), &c.span_id) ||
      !ParseHex(v.substr(53, 2), &flags)) {
    return std::nullopt;
  }
  if (version[0] == 0xff || AllZero(c.trace_id) || AllZero(c.span_id)) {
    return std::nullopt;
  }
  // Version 00 has exactly these fields; later versions may add more.
  if (v.size() > kLength && (version[0] == 0 || v[kLength] != '-')) {
    return std::nullopt;
  }
  c.sampled = (flags[0] & 1) != 0;
  return c;
}

std::string FormatTraceparent(const SpanContext& c) {
  return absl::StrCat("00-", Hex(c.trace_id.data(), c.trace_id.size()), "-",
                      Hex(c.span_id.data(), c.span_id.size()),
                      c.sampled ? "-01" : "-00");
}

std::string Hex(const uint8_t* bytes, size_t size) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out(2 * size, '0');
  for (size_t i = 0; i < size; ++i) {
    out[2 * i] = kDigits[bytes[i] >> 4];
    out[2 * i + 1] = kDigits[bytes[i] & 15];
  }
  return out;
}

TraceId NewTraceId() { return RandomId<16>(); }
SpanId NewSpanId() { return RandomId<8>(); }

absl::StatusOr<Sampler> ParseSampler(const std::string& name,
                                     const std::string& arg) {
  Sampler s;
  std::string root = name;
  s.parent_based = root.rfind("parentbased_", 0) == 0;
  if (s.parent_based) root = root.substr(std::string("parentbased_").size());
  if (root == "always_on") {
    s.root = Sampler::Root::kAlwaysOn;
  } else if (root == "always_off") {
    s.root = Sampler::Root::kAlwaysOff;
  } else if (root == "traceidratio") {
    s.root = Sampler::Root::kRatio;
    if (!arg.empty() &&
        (!absl::SimpleAtod(arg, &s.ratio) || !(s.ratio >= 0 && s.ratio <= 1))) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the sampler's ratio must be a number from 0 to 1, got \"", arg,
          "\""));
    }
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("sampler must be always_on, always_off, traceidratio, "
                     "parentbased_always_on, parentbased_always_off or "
                     "parentbased_traceidratio, got \"",
                     name, "\""));
  }
  return s;
}

std::string DescribeSampler(const Sampler& s) {
  const char* root = s.root == Sampler::Root::kAlwaysOn    ? "always_on"
                     : s.root == Sampler::Root::kAlwaysOff ? "always_off"
                                                           : "traceidratio";
  std::string out = absl::StrCat(s.parent_based ? "parentbased_" : "", root);
  if (s.root == Sampler::Root::kRatio) absl::StrAppend(&out, " ", s.ratio);
  return out;
}

bool ShouldSample(const Sampler& s, const std::optional<SpanContext>& parent,
                  const TraceId& trace_id) {
  if (s.parent_based && parent.has_value()) return parent->sampled;
  switch (s.root) {
    case Sampler::Root::kAlwaysOn:
      return true;
    case Sampler::Root::kAlwaysOff:
      return false;
    case Sampler::Root::kRatio:
      break;
  }
  uint64_t low = 0;
  for (size_t i = 8; i < 16; ++i) low = (low << 8) | trace_id[i];
  // ratio x 2^64, saturated: a ratio of 1 samples every id.
  const long double bound = std::ldexp(static_cast<long double>(s.ratio), 64);
  return bound >= std::ldexp(1.0L, 64) || static_cast<long double>(low) < bound;
}

absl::StatusOr<std::vector<std::pair<std::string, std::string>>>
ParseResourceAttributes(std::string_view text) {
  std::vector<std::pair<std::string, std::string>> out;
  const absl::string_view all(text.data(), text.size());
  for (absl::string_view member : absl::StrSplit(all, ',', absl::SkipEmpty())) {
    if (absl::StripAsciiWhitespace(member).empty()) continue;
    const size_t eq = member.find('=');
    const absl::string_view key =
        absl::StripAsciiWhitespace(member.substr(0, eq));
    if (eq == absl::string_view::npos || key.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "resource attributes must be key=value pairs separated by commas, "
          "got \"",
          member, "\""));
    }
    out.emplace_back(
        PercentDecoded(key),
        PercentDecoded(absl::StripAsciiWhitespace(member.substr(eq + 1))));
  }
  return out;
}

}  // namespace encoder::tracing
