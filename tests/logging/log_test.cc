// The log formats and the rate limiter, read back from an in-memory sink.
// JSON lines are parsed with nlohmann::json, an independent parser.
#include "server/logging/log.h"

#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace encoder::logging {
namespace {

using ::testing::HasSubstr;

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::stringstream in(text);
  std::string line;
  while (std::getline(in, line)) lines.push_back(line);
  return lines;
}

// Logs through SetupLogging into a string.
class CapturedLog {
 public:
  explicit CapturedLog(LogOptions options) {
    auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(out_);
    SetupLogging(options, sink);
  }
  ~CapturedLog() {
    SetupLogging(LogOptions{});  // back to stdout, text
  }
  std::vector<std::string> lines() {
    spdlog::default_logger()->flush();
    return Lines(out_.str());
  }

 private:
  std::ostringstream out_;
};

TEST(JsonQuoteTest, RoundTripsThroughAJsonParser) {
  const std::string cases[] = {
      "plain",
      "quote \" backslash \\ slash /",
      "new\nline\ttab\rreturn",
      std::string("nul \0 and \x01 \x1f \x7f", 15),
      "caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80",  // é € 😀
      "",
  };
  for (const std::string& c : cases) {
    const std::string quoted = JsonQuote(c);
    EXPECT_EQ(nlohmann::json::parse(quoted).get<std::string>(), c) << quoted;
  }
}

TEST(JsonQuoteTest, InvalidUtf8BecomesReplacementCharacters) {
  const std::string bad[] = {
      "\xff",
      "\xC3",              // cut sequence
      "\xC0\xAF",          // overlong '/'
      "\xED\xA0\x80",      // a surrogate
      "\xF4\x90\x80\x80",  // past U+10FFFF
  };
  for (const std::string& b : bad) {
    const std::string decoded =
        nlohmann::json::parse(JsonQuote("a" + b + "z")).get<std::string>();
    // Each invalid byte is one U+FFFD (EF BF BD).
    std::string expected = "a";
    for (size_t i = 0; i < b.size(); ++i) expected += "\xEF\xBF\xBD";
    expected += "z";
    EXPECT_EQ(decoded, expected);
  }
}

TEST(LogFieldsTest, JsonLinesCarryTsLevelMsgAndFields) {
  LogOptions options;
  options.format = LogFormat::kJson;
  options.level = spdlog::level::debug;
  CapturedLog log(options);
  LogFields(spdlog::level::info, "access",
            {{"method", std::string("Embed")},
             {"inputs", int64_t{3}},
             {"total_ms", 1.25},
             {"odd", std::string("a \"b\"\n")}});
  spdlog::warn("plain {}", 7);
  spdlog::debug("shown at debug");
  spdlog::trace("not shown at debug");
  const auto lines = log.lines();
  ASSERT_EQ(lines.size(), 3u);
  const auto a = nlohmann::json::parse(lines[0]);
  EXPECT_EQ(a["level"], "info");
  EXPECT_EQ(a["msg"], "access");
  EXPECT_EQ(a["method"], "Embed");
  EXPECT_EQ(a["inputs"], 3);
  EXPECT_DOUBLE_EQ(a["total_ms"].get<double>(), 1.25);
  EXPECT_EQ(a["odd"], "a \"b\"\n");
  // RFC 3339 UTC with microseconds, close to now.
  const std::string ts = a["ts"];
  ASSERT_EQ(ts.size(), 27u) << ts;
  EXPECT_EQ(ts.back(), 'Z');
  std::tm parsed{};
  ASSERT_NE(strptime(ts.c_str(), "%Y-%m-%dT%H:%M:%S", &parsed), nullptr);
  const auto diff = std::abs(static_cast<double>(
      timegm(&parsed) -
      std::chrono::system_clock::to_time_t(std::chrono::system_clock::now())));
  EXPECT_LE(diff, 5.0);
  const auto b = nlohmann::json::parse(lines[1]);
  EXPECT_EQ(b["level"], "warning");
  EXPECT_EQ(b["msg"], "plain 7");
  EXPECT_EQ(b.size(), 3u);
  EXPECT_EQ(nlohmann::json::parse(lines[2])["level"], "debug");
}

TEST(LogFieldsTest, TextLinesAppendKeyValuePairs) {
  LogOptions options;
  CapturedLog log(options);
  LogFields(spdlog::level::info, "access",
            {{"method", std::string("Embed")},
             {"inputs", int64_t{3}},
             {"error", std::string("two words")},
             {"empty", std::string()}});
  const auto lines = log.lines();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_THAT(lines[0], HasSubstr("[info] access method=Embed inputs=3 "
                                  "error=\"two words\" empty=\"\""));
}

// A clock the test moves by hand.
struct FakeClock {
  std::chrono::steady_clock::time_point now{std::chrono::hours(1)};
  RateLimitedSink::Clock fn() {
    return [this] { return now; };
  }
};

class RateLimitTest : public ::testing::Test {
 protected:
  RateLimitTest() {
    inner_ = std::make_shared<spdlog::sinks::ostream_sink_mt>(out_);
    inner_->set_pattern("%l %v");
    sink_ = std::make_shared<RateLimitedSink>(inner_, 3, clock_.fn());
  }
  void Log(spdlog::level::level_enum level, const std::string& text) {
    spdlog::details::log_msg msg(spdlog::source_loc{}, "", level, text);
    sink_->log(msg);
  }
  std::vector<std::string> Take() {
    auto lines = Lines(out_.str());
    out_.str("");
    return lines;
  }

  FakeClock clock_;
  std::ostringstream out_;
  std::shared_ptr<spdlog::sinks::ostream_sink_mt> inner_;
  std::shared_ptr<RateLimitedSink> sink_;
};

TEST_F(RateLimitTest, AtMostNPerSecondPerKeyThenASummary) {
  for (int i = 0; i < 10; ++i) Log(spdlog::level::err, "disk full");
  for (int i = 0; i < 2; ++i) Log(spdlog::level::err, "other error");
  for (int i = 0; i < 5; ++i) Log(spdlog::level::info, "info is not limited");
  auto lines = Take();
  EXPECT_EQ(std::count(lines.begin(), lines.end(), "error disk full"), 3);
  EXPECT_EQ(std::count(lines.begin(), lines.end(), "error other error"), 2);
  EXPECT_EQ(std::count(lines.begin(), lines.end(), "info info is not limited"),
            5);
  EXPECT_EQ(lines.size(), 10u);

  // Within the same second: still held back, no summary yet.
  clock_.now += std::chrono::milliseconds(900);
  Log(spdlog::level::err, "disk full");
  EXPECT_TRUE(Take().empty());

  // The next window: the summary first, then the line.
  clock_.now += std::chrono::milliseconds(200);
  Log(spdlog::level::err, "disk full");
  lines = Take();
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0], "warning suppressed 8 similar log lines: disk full");
  EXPECT_EQ(lines[1], "error disk full");
}

TEST_F(RateLimitTest, FlushReportsEndedWindows) {
  for (int i = 0; i < 5; ++i) Log(spdlog::level::warn, "slow client");
  EXPECT_EQ(Take().size(), 3u);
  sink_->flush();  // window still open
  EXPECT_TRUE(Take().empty());
  clock_.now += std::chrono::seconds(2);
  sink_->flush();
  EXPECT_EQ(Take(), std::vector<std::string>{
                        "warning suppressed 2 similar log lines: slow client"});
  // Reported once.
  clock_.now += std::chrono::seconds(2);
  sink_->flush();
  EXPECT_TRUE(Take().empty());
}

TEST(RateLimitKeyTest, LogFieldsKeyGroupsDifferentMessages) {
  LogOptions options;
  options.format = LogFormat::kJson;
  options.rate_limit_per_second = 2;
  CapturedLog log(options);
  for (int i = 0; i < 6; ++i) {
    LogFields(spdlog::level::warn, "access",
              {{"request_id", std::to_string(i)}}, "Embed NOT_FOUND");
  }
  const auto lines = log.lines();
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(nlohmann::json::parse(lines[0])["request_id"], "0");
  EXPECT_EQ(nlohmann::json::parse(lines[1])["request_id"], "1");
}

TEST(RateLimitKeyTest, ZeroMeansNoLimit) {
  LogOptions options;
  options.rate_limit_per_second = 0;
  CapturedLog log(options);
  for (int i = 0; i < 50; ++i) spdlog::error("same");
  EXPECT_EQ(log.lines().size(), 50u);
}

TEST(RateLimitKeyTest, TableFullSharesOneOverflowKey) {
  std::ostringstream out;
  auto inner = std::make_shared<spdlog::sinks::ostream_sink_mt>(out);
  inner->set_pattern("%v");
  FakeClock clock;
  RateLimitedSink sink(inner, 1, clock.fn(), /*max_keys=*/2);
  for (int i = 0; i < 6; ++i) {
    // log_msg keeps a view of its text: the string must outlive it.
    const std::string text = "e" + std::to_string(i);
    spdlog::details::log_msg msg(spdlog::source_loc{}, "", spdlog::level::err,
                                 text);
    sink.log(msg);
  }
  // e0 and e1 fill the table; e2..e5 share the overflow key (1 per second).
  EXPECT_EQ(Lines(out.str()), (std::vector<std::string>{"e0", "e1", "e2"}));
}

}  // namespace
}  // namespace encoder::logging
