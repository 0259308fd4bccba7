#include "server/tracing/trace_context.h"

#include <gtest/gtest.h>

#include <string>

namespace encoder::tracing {
namespace {

constexpr char kValid[] =
    "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

TEST(Traceparent, ReadsTheW3CExample) {
  auto c = ParseTraceparent(kValid);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(Hex(c->trace_id.data(), 16), "4bf92f3577b34da6a3ce929d0e0e4736");
  EXPECT_EQ(Hex(c->span_id.data(), 8), "00f067aa0ba902b7");
  EXPECT_TRUE(c->sampled);
  EXPECT_EQ(FormatTraceparent(*c), kValid);
  auto unsampled = ParseTraceparent(
      "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00");
  ASSERT_TRUE(unsampled.has_value());
  EXPECT_FALSE(unsampled->sampled);
}

TEST(Traceparent, RefusesWhatTheRecommendationRefuses) {
  for (const char* bad : {
           "",
           "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
           "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
           "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
           "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
           "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
           "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
           "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
       }) {
    EXPECT_FALSE(ParseTraceparent(bad).has_value()) << bad;
  }
  // A later version may carry more fields after a '-'.
  EXPECT_TRUE(ParseTraceparent("01-4bf92f3577b34da6a3ce929d0e0e4736-"
                               "00f067aa0ba902b7-01-future")
                  .has_value());
}

TEST(Ids, AreRandomAndNeverZero) {
  const TraceId a = NewTraceId(), b = NewTraceId();
  EXPECT_NE(a, b);
  EXPECT_NE(a, TraceId{});
  EXPECT_NE(NewSpanId(), SpanId{});
}

// A trace id whose last 8 bytes, big-endian, are `low`.
TraceId WithLow(uint64_t low) {
  TraceId id{};
  id[0] = 1;
  for (int i = 15; i >= 8; --i, low >>= 8) id[i] = static_cast<uint8_t>(low);
  return id;
}

TEST(Sampler, ParentBasedFollowsTheCallerAndRatioCutsAtItsBound) {
  auto on = ParseSampler("parentbased_always_on", "");
  ASSERT_TRUE(on.ok());
  SpanContext parent;
  parent.sampled = false;
  EXPECT_FALSE(ShouldSample(*on, parent, WithLow(0)));
  parent.sampled = true;
  EXPECT_TRUE(ShouldSample(*on, parent, WithLow(0)));
  EXPECT_TRUE(ShouldSample(*on, std::nullopt, WithLow(0)));

  auto off = ParseSampler("always_off", "");
  ASSERT_TRUE(off.ok());
  EXPECT_FALSE(ShouldSample(*off, parent, WithLow(0)));

  // ratio 0.25: ids below 2^62 are in, from 2^62 on out.
  auto quarter = ParseSampler("traceidratio", "0.25");
  ASSERT_TRUE(quarter.ok());
  EXPECT_TRUE(ShouldSample(*quarter, parent, WithLow((uint64_t{1} << 62) - 1)));
  EXPECT_FALSE(ShouldSample(*quarter, parent, WithLow(uint64_t{1} << 62)));
  auto all = ParseSampler("parentbased_traceidratio", "1");
  ASSERT_TRUE(all.ok());
  EXPECT_TRUE(ShouldSample(*all, std::nullopt, WithLow(~uint64_t{0})));
  auto none = ParseSampler("parentbased_traceidratio", "0");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(ShouldSample(*none, std::nullopt, WithLow(0)));
  EXPECT_TRUE(ShouldSample(*none, parent, WithLow(0)));
  EXPECT_EQ(DescribeSampler(*quarter), "traceidratio 0.25");
}

TEST(Sampler, RefusesUnknownNamesAndRatios) {
  EXPECT_EQ(ParseSampler("jaeger_remote", "").status().code(),
            absl::StatusCode::kInvalidArgument);
  for (const char* ratio : {"1.5", "-0.1", "half"}) {
    EXPECT_EQ(ParseSampler("traceidratio", ratio).status().code(),
              absl::StatusCode::kInvalidArgument)
        << ratio;
  }
}

TEST(ResourceAttributes, AreKeyValuePairsPercentDecoded) {
  auto a = ParseResourceAttributes(
      " deployment.environment = prod ,service.namespace=a%2Cb,,k=");
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_EQ(a->size(), 3u);
  EXPECT_EQ((*a)[0].first, "deployment.environment");
  EXPECT_EQ((*a)[0].second, "prod");
  EXPECT_EQ((*a)[1].second, "a,b");
  EXPECT_EQ((*a)[2].second, "");
  EXPECT_FALSE(ParseResourceAttributes("novalue").ok());
  EXPECT_FALSE(ParseResourceAttributes("=v").ok());
}

}  // namespace
}  // namespace encoder::tracing
