// Server logging on spdlog: the output format (text or one JSON object per
// line), structured fields, and a per-key rate limit for repeated warnings
// and errors. No gRPC or LibTorch here, so any front (gRPC, HTTP) and any
// tool can log the same way.
#ifndef ENCODER_SERVER_LOGGING_LOG_H_
#define ENCODER_SERVER_LOGGING_LOG_H_

#include <spdlog/common.h>
#include <spdlog/sinks/sink.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace encoder::logging {

enum class LogFormat { kText, kJson };

struct LogOptions {
  LogFormat format = LogFormat::kText;
  spdlog::level::level_enum level = spdlog::level::info;
  // Lines at warn or above that share a key (LogFields' rate_key, else the
  // message): at most this many per second; the rest are counted and
  // reported as one "suppressed K similar" line. 0: no limit.
  int64_t rate_limit_per_second = 10;
  // Keys the limiter tracks at once (--log-rate-limit-keys); lines of
  // further keys share one key while the table is full, so a flood of
  // distinct messages cannot grow it without bound.
  int64_t rate_limit_keys = 4096;
};

// Makes the default logger write to stdout in `options.format`, through
// the rate limiter, and flush (and report suppressed lines) every second.
// Starts spdlog's flusher thread: block signals that another thread waits
// for before calling it.
void SetupLogging(const LogOptions& options);
// The same with `out` in place of stdout (its formatter is replaced for
// JSON).
void SetupLogging(const LogOptions& options,
                  std::shared_ptr<spdlog::sinks::sink> out);

// The format SetupLogging installed (text before it is called).
LogFormat CurrentFormat();

// One key and value of a structured line.
struct Field {
  std::string key;
  std::variant<std::string, int64_t, double> value;
};

// Logs `msg` with `fields` on the default logger. Text: "msg key=value ...",
// a value quoted when it holds spaces, quotes or '=' or is empty. JSON: each
// field becomes a key of the line's object, next to ts, level and msg.
// Lines at warn or above are rate limited by `rate_key` (empty: by `msg`).
void LogFields(spdlog::level::level_enum level, std::string_view msg,
               const std::vector<Field>& fields,
               std::string_view rate_key = {});

// `value` as a JSON string literal, quotes included. Invalid UTF-8 bytes
// become U+FFFD, so the line stays valid JSON.
std::string JsonQuote(std::string_view value);

// The JSON object of one line: {"ts":..., "level":..., "msg":..., fields}.
// `extra` is the fields already rendered as ',"key":value' pairs.
class JsonFormatter final : public spdlog::formatter {
 public:
  void format(const spdlog::details::log_msg& msg,
              spdlog::memory_buf_t& dest) override;
  std::unique_ptr<spdlog::formatter> clone() const override;
};

// Passes lines to `inner`, holding back lines at warn or above whose key
// was seen `per_second` times in the key's current one-second window. When
// a window with suppressed lines ends, the next line of that key, the next
// flush(), or the next line of any key after a second, first writes
// "suppressed K similar log lines: KEY" at warn. Thread-safe.
class RateLimitedSink final : public spdlog::sinks::sink {
 public:
  using Clock = std::function<std::chrono::steady_clock::time_point()>;
  // At most `max_keys` keys are tracked at once; lines of further keys share
  // one overflow key while the table is full.
  RateLimitedSink(std::shared_ptr<spdlog::sinks::sink> inner,
                  int64_t per_second, Clock clock = nullptr,
                  size_t max_keys = 4096);

  void log(const spdlog::details::log_msg& msg) override;
  void flush() override;
  void set_pattern(const std::string& pattern) override;
  void set_formatter(std::unique_ptr<spdlog::formatter> formatter) override;

 private:
  struct Window {
    std::chrono::steady_clock::time_point start;
    int64_t count = 0;
    int64_t suppressed = 0;
  };
  // Require mu_.
  void ReportLocked(const std::string& key, const Window& w);
  void SweepLocked(std::chrono::steady_clock::time_point now);

  std::shared_ptr<spdlog::sinks::sink> inner_;
  const int64_t per_second_;
  Clock clock_;
  const size_t max_keys_;
  std::mutex mu_;
  std::map<std::string, Window> windows_;
  std::chrono::steady_clock::time_point last_sweep_{};
};

}  // namespace encoder::logging

#endif  // ENCODER_SERVER_LOGGING_LOG_H_
