// The access line's fields and level, request ids and traceparent
// validation (the examples of the W3C Trace Context recommendation).
#include "server/logging/access_log.h"

#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>

#include "gtest/gtest.h"
#include "server/logging/log.h"

namespace encoder::logging {
namespace {

TEST(TraceparentTest, AcceptsTheSpecExamples) {
  EXPECT_TRUE(IsValidTraceparent(
      "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"));
  EXPECT_TRUE(IsValidTraceparent(
      "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"));
  // A later version may carry more fields after a dash.
  EXPECT_TRUE(IsValidTraceparent(
      "01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-extra"));
}

TEST(TraceparentTest, RefusesMalformedValues) {
  const char* bad[] = {
      "",
      "garbage",
      // Upper-case hex.
      "00-0AF7651916CD43DD8448EB211C80319C-B7AD6B7169203331-01",
      // Version ff is invalid.
      "ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
      // All-zero trace id, all-zero parent id.
      "00-00000000000000000000000000000000-b7ad6b7169203331-01",
      "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",
      // Short trace id, wrong separators, non-hex.
      "00-0af7651916cd43dd8448eb211c80319-b7ad6b7169203331-01",
      "00_0af7651916cd43dd8448eb211c80319c_b7ad6b7169203331_01",
      "00-0af7651916cd43dd8448eb211c80319g-b7ad6b7169203331-01",
      // Version 00 has nothing after the flags.
      "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-extra",
      "01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01x",
  };
  for (const char* v : bad) EXPECT_FALSE(IsValidTraceparent(v)) << v;
}

TEST(RequestIdTest, GeneratedIdsAreHexAndDistinct) {
  std::set<std::string> seen;
  for (int i = 0; i < 1000; ++i) {
    const std::string id = NewRequestId();
    ASSERT_EQ(id.size(), 32u);
    EXPECT_EQ(id.find_first_not_of("0123456789abcdef"), std::string::npos);
    EXPECT_TRUE(IsUsableRequestId(id));
    seen.insert(id);
  }
  EXPECT_EQ(seen.size(), 1000u);
}

TEST(RequestIdTest, CallerIdsMustBeShortPrintableAscii) {
  EXPECT_TRUE(IsUsableRequestId("req-1 / retry 2"));
  EXPECT_EQ(MaxRequestIdBytes(), kDefaultMaxRequestIdBytes);
  EXPECT_TRUE(IsUsableRequestId(std::string(kDefaultMaxRequestIdBytes, 'a')));
  EXPECT_FALSE(IsUsableRequestId(""));
  EXPECT_FALSE(
      IsUsableRequestId(std::string(kDefaultMaxRequestIdBytes + 1, 'a')));
  EXPECT_FALSE(IsUsableRequestId("line\nbreak"));
  EXPECT_FALSE(IsUsableRequestId("caf\xC3\xA9"));
}

TEST(RequestIdTest, TheLengthLimitIsSettable) {
  SetMaxRequestIdBytes(16);
  const bool sixteen = IsUsableRequestId(std::string(16, 'a'));
  const bool seventeen = IsUsableRequestId(std::string(17, 'a'));
  SetMaxRequestIdBytes(kDefaultMaxRequestIdBytes);
  EXPECT_TRUE(sixteen);
  EXPECT_FALSE(seventeen);
  EXPECT_TRUE(IsUsableRequestId(std::string(17, 'a')));
}

TEST(AccessLogTest, LevelFollowsTheStatus) {
  EXPECT_EQ(AccessLogLevel("OK"), spdlog::level::info);
  EXPECT_EQ(AccessLogLevel("INVALID_ARGUMENT"), spdlog::level::warn);
  EXPECT_EQ(AccessLogLevel("RESOURCE_EXHAUSTED"), spdlog::level::warn);
  EXPECT_EQ(AccessLogLevel("INTERNAL"), spdlog::level::err);
  EXPECT_EQ(AccessLogLevel("UNKNOWN"), spdlog::level::err);
}

TEST(AccessLogTest, JsonLineHasEveryField) {
  std::ostringstream out;
  LogOptions options;
  options.format = LogFormat::kJson;
  SetupLogging(options, std::make_shared<spdlog::sinks::ostream_sink_mt>(out));
  AccessRecord r;
  r.method = "Embed";
  r.model = "rope";
  r.inputs = 2;
  r.tokens = 17;
  r.status = "NOT_FOUND";
  r.error = "no model \"x\"";
  r.queue_ms = 0.5;
  r.inference_ms = 2;
  r.total_ms = 3.25;
  r.request_id = "abc";
  r.peer = "ipv4:127.0.0.1:5000";
  r.traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
  LogAccess(r);
  r.status = "OK";
  r.error.clear();
  r.traceparent.clear();
  LogAccess(r);
  spdlog::default_logger()->flush();
  SetupLogging(LogOptions{});

  std::stringstream in(out.str());
  std::string first, second, extra;
  ASSERT_TRUE(std::getline(in, first));
  ASSERT_TRUE(std::getline(in, second));
  EXPECT_FALSE(std::getline(in, extra));
  const auto a = nlohmann::json::parse(first);
  EXPECT_EQ(a["level"], "warning");
  EXPECT_EQ(a["msg"], "access");
  EXPECT_EQ(a["protocol"], "grpc");
  EXPECT_EQ(a["method"], "Embed");
  EXPECT_EQ(a["model"], "rope");
  EXPECT_EQ(a["inputs"], 2);
  EXPECT_EQ(a["tokens"], 17);
  EXPECT_EQ(a["status"], "NOT_FOUND");
  EXPECT_EQ(a["error"], "no model \"x\"");
  EXPECT_DOUBLE_EQ(a["queue_ms"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(a["inference_ms"].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(a["total_ms"].get<double>(), 3.25);
  EXPECT_EQ(a["request_id"], "abc");
  EXPECT_EQ(a["peer"], "ipv4:127.0.0.1:5000");
  EXPECT_EQ(a["traceparent"],
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01");
  EXPECT_FALSE(a.contains("http_status"));
  const auto b = nlohmann::json::parse(second);
  EXPECT_EQ(b["level"], "info");
  EXPECT_EQ(b["status"], "OK");
  EXPECT_FALSE(b.contains("error"));
  EXPECT_FALSE(b.contains("traceparent"));
}

}  // namespace
}  // namespace encoder::logging
