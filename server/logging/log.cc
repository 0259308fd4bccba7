#include "server/logging/log.h"

#include <spdlog/details/log_msg.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <ctime>

#include "absl/strings/str_cat.h"

namespace encoder::logging {
namespace {

// The structured fields of the line being logged on this thread, rendered
// for JSON (',"key":value' pairs), and its rate-limit key. Set by LogFields
// around the logger call; the sink and formatter run on the same thread.
thread_local const std::string* tl_json_fields = nullptr;
thread_local const std::string* tl_rate_key = nullptr;

std::atomic<LogFormat> g_format{LogFormat::kText};

// Restores the thread's fields and key when a scope ends.
class ScopedLineContext {
 public:
  ScopedLineContext(const std::string* fields, const std::string* key)
      : fields_(tl_json_fields), key_(tl_rate_key) {
    tl_json_fields = fields;
    tl_rate_key = key;
  }
  ~ScopedLineContext() {
    tl_json_fields = fields_;
    tl_rate_key = key_;
  }
  ScopedLineContext(const ScopedLineContext&) = delete;
  ScopedLineContext& operator=(const ScopedLineContext&) = delete;

 private:
  const std::string* fields_;
  const std::string* key_;
};

// Length of the valid UTF-8 sequence at s[i], or 0 when it is not one.
size_t Utf8SequenceLength(std::string_view s, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = byte(i);
  size_t n;
  uint32_t cp;
  if (c < 0x80) return 1;
  if ((c & 0xE0) == 0xC0) {
    n = 2;
    cp = c & 0x1F;
  } else if ((c & 0xF0) == 0xE0) {
    n = 3;
    cp = c & 0x0F;
  } else if ((c & 0xF8) == 0xF0) {
    n = 4;
    cp = c & 0x07;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (byte(i + k) & 0x3F);
  }
  // Overlong forms, surrogates and values past U+10FFFF are invalid.
  static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMin[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
    return 0;
  }
  return n;
}

void AppendJsonValue(const Field& f, std::string* out) {
  if (const auto* s = std::get_if<std::string>(&f.value)) {
    out->append(JsonQuote(*s));
  } else if (const auto* i = std::get_if<int64_t>(&f.value)) {
    out->append(std::to_string(*i));
  } else {
    const double d = std::get<double>(f.value);
    // JSON has no NaN or infinity.
    out->append(std::isfinite(d) ? fmt::format("{:.3f}", d) : "null");
  }
}

bool NeedsQuotes(std::string_view v) {
  if (v.empty()) return true;
  for (char c : v) {
    if (c == ' ' || c == '"' || c == '=' || c == '\\' ||
        static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      return true;
    }
  }
  return false;
}

void AppendTextValue(const Field& f, std::string* out) {
  if (const auto* s = std::get_if<std::string>(&f.value)) {
    out->append(NeedsQuotes(*s) ? JsonQuote(*s) : *s);
  } else if (const auto* i = std::get_if<int64_t>(&f.value)) {
    out->append(std::to_string(*i));
  } else {
    out->append(fmt::format("{:.3f}", std::get<double>(f.value)));
  }
}

}  // namespace

std::string JsonQuote(std::string_view value) {
  std::string out;
  out.reserve(value.size() + 2);
  out.push_back('"');
  for (size_t i = 0; i < value.size();) {
    const unsigned char c = static_cast<unsigned char>(value[i]);
    if (c >= 0x80) {
      const size_t n = Utf8SequenceLength(value, i);
      if (n == 0) {
        out.append("\xEF\xBF\xBD");  // U+FFFD
        ++i;
      } else {
        out.append(value.substr(i, n));
        i += n;
      }
      continue;
    }
    switch (c) {
      case '"':
        out.append("\\\"");
        break;
      case '\\':
        out.append("\\\\");
        break;
      case '\n':
        out.append("\\n");
        break;
      case '\r':
        out.append("\\r");
        break;
      case '\t':
        out.append("\\t");
        break;
      default:
        if (c < 0x20 || c == 0x7f) {
          out.append(fmt::format("\\u{:04x}", c));
        } else {
          out.push_back(static_cast<char>(c));
        }
    }
    ++i;
  }
  out.push_back('"');
  return out;
}

void JsonFormatter::format(const spdlog::details::log_msg& msg,
                           spdlog::memory_buf_t& dest) {
  using std::chrono::duration_cast;
  using std::chrono::microseconds;
  const auto since_epoch = msg.time.time_since_epoch();
  const auto seconds = duration_cast<std::chrono::seconds>(since_epoch);
  const std::time_t t = static_cast<std::time_t>(seconds.count());
  std::tm utc{};
  gmtime_r(&t, &utc);
  char ts[32];
  const size_t n = std::strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%S", &utc);
  const auto micros = duration_cast<microseconds>(since_epoch - seconds);
  std::string line = fmt::format(
      "{{\"ts\":\"{}.{:06d}Z\",\"level\":\"{}\",\"msg\":{}",
      std::string_view(ts, n), static_cast<int>(micros.count()),
      spdlog::level::to_string_view(msg.level),
      JsonQuote(std::string_view(msg.payload.data(), msg.payload.size())));
  if (tl_json_fields != nullptr) line.append(*tl_json_fields);
  line.append("}\n");
  dest.append(line.data(), line.data() + line.size());
}

std::unique_ptr<spdlog::formatter> JsonFormatter::clone() const {
  return std::make_unique<JsonFormatter>();
}

RateLimitedSink::RateLimitedSink(std::shared_ptr<spdlog::sinks::sink> inner,
                                 int64_t per_second, Clock clock,
                                 size_t max_keys)
    : inner_(std::move(inner)),
      per_second_(per_second),
      clock_(clock ? std::move(clock)
                   : [] { return std::chrono::steady_clock::now(); }),
      max_keys_(max_keys) {}

void RateLimitedSink::ReportLocked(const std::string& key, const Window& w) {
  const std::string fields = absl::StrCat(",\"suppressed\":", w.suppressed,
                                          ",\"key\":", JsonQuote(key));
  ScopedLineContext context(&fields, nullptr);
  const std::string text =
      absl::StrCat("suppressed ", w.suppressed, " similar log lines: ", key);
  spdlog::details::log_msg summary(spdlog::source_loc{}, "",
                                   spdlog::level::warn, text);
  inner_->log(summary);
}

void RateLimitedSink::SweepLocked(std::chrono::steady_clock::time_point now) {
  last_sweep_ = now;
  for (auto it = windows_.begin(); it != windows_.end();) {
    if (now - it->second.start < std::chrono::seconds(1)) {
      ++it;
      continue;
    }
    if (it->second.suppressed > 0) ReportLocked(it->first, it->second);
    it = windows_.erase(it);
  }
}

void RateLimitedSink::log(const spdlog::details::log_msg& msg) {
  std::lock_guard<std::mutex> lock(mu_);
  const auto now = clock_();
  if (now - last_sweep_ >= std::chrono::seconds(1)) SweepLocked(now);
  if (per_second_ <= 0 || msg.level < spdlog::level::warn) {
    inner_->log(msg);
    return;
  }
  std::string key = tl_rate_key != nullptr
                        ? *tl_rate_key
                        : std::string(msg.payload.data(), msg.payload.size());
  if (windows_.size() >= max_keys_ && windows_.count(key) == 0) {
    key = "(keys beyond the rate limiter's table)";
  }
  auto [it, inserted] = windows_.try_emplace(key);
  Window& w = it->second;
  if (inserted) {
    w.start = now;
  } else if (now - w.start >= std::chrono::seconds(1)) {
    if (w.suppressed > 0) ReportLocked(key, w);
    w = Window{now, 0, 0};
  }
  if (w.count >= per_second_) {
    ++w.suppressed;
    return;
  }
  ++w.count;
  inner_->log(msg);
}

void RateLimitedSink::flush() {
  std::lock_guard<std::mutex> lock(mu_);
  // Flushes come after every warning too: sweep at most once a second.
  const auto now = clock_();
  if (now - last_sweep_ >= std::chrono::seconds(1)) SweepLocked(now);
  inner_->flush();
}

void RateLimitedSink::set_pattern(const std::string& pattern) {
  inner_->set_pattern(pattern);
}

void RateLimitedSink::set_formatter(
    std::unique_ptr<spdlog::formatter> formatter) {
  inner_->set_formatter(std::move(formatter));
}

void SetupLogging(const LogOptions& options) {
  SetupLogging(options,
               std::make_shared<spdlog::sinks::stdout_color_sink_mt>());
}

void SetupLogging(const LogOptions& options,
                  std::shared_ptr<spdlog::sinks::sink> out) {
  if (options.format == LogFormat::kJson) {
    out->set_formatter(std::make_unique<JsonFormatter>());
  }
  auto limited = std::make_shared<RateLimitedSink>(
      out, options.rate_limit_per_second, nullptr,
      static_cast<size_t>(std::max<int64_t>(options.rate_limit_keys, 1)));
  auto logger = std::make_shared<spdlog::logger>("", limited);
  logger->set_level(options.level);
  logger->flush_on(spdlog::level::warn);
  spdlog::set_default_logger(logger);
  g_format.store(options.format);
  spdlog::flush_every(std::chrono::seconds(1));
}

LogFormat CurrentFormat() { return g_format.load(); }

void LogFields(spdlog::level::level_enum level, std::string_view msg,
               const std::vector<Field>& fields, std::string_view rate_key) {
  spdlog::logger* logger = spdlog::default_logger_raw();
  if (!logger->should_log(level)) return;
  const std::string key(rate_key.empty() ? msg : rate_key);
  if (CurrentFormat() == LogFormat::kJson) {
    std::string json;
    for (const Field& f : fields) {
      absl::StrAppend(&json, ",", JsonQuote(f.key), ":");
      AppendJsonValue(f, &json);
    }
    ScopedLineContext context(&json, &key);
    logger->log(level, msg);
    return;
  }
  std::string line(msg);
  for (const Field& f : fields) {
    absl::StrAppend(&line, " ", f.key, "=");
    AppendTextValue(f, &line);
  }
  ScopedLineContext context(nullptr, &key);
  logger->log(level, line);
}

}  // namespace encoder::logging
