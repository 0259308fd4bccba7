// The one syntax of durations and sizes (server/app/flag_units.h): what parses
// to what, by exact arithmetic; what is refused, with a message naming the
// syntax; the old spellings (a bare number in the old unit, an old
// ENCODER_ name) accepted with a note; defaults shown in the syntax.
#include "server/app/flag_units.h"

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "server/app/serve_flags.h"

namespace encoder {
namespace {

TEST(FlagUnits, Durations) {
  EXPECT_EQ(*ParseDurationValue("250ms"), absl::Milliseconds(250));
  EXPECT_EQ(*ParseDurationValue("5s"), absl::Seconds(5));
  EXPECT_EQ(*ParseDurationValue("2m"), absl::Minutes(2));
  EXPECT_EQ(*ParseDurationValue("1h"), absl::Hours(1));
  EXPECT_EQ(*ParseDurationValue("1m30s"), absl::Seconds(90));
  EXPECT_EQ(*ParseDurationValue("1.5s"), absl::Milliseconds(1500));
  EXPECT_EQ(*ParseDurationValue("100us"), absl::Microseconds(100));
  EXPECT_EQ(*ParseDurationValue("100µs"), absl::Microseconds(100));
  EXPECT_EQ(*ParseDurationValue("7ns"), absl::Nanoseconds(7));
  EXPECT_EQ(*ParseDurationValue("0"), absl::ZeroDuration());
  for (const char* bad : {"", "5", "5 s", "5sec", "-1s", "inf", "s", "1d"}) {
    auto parsed = ParseDurationValue(bad);
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_NE(std::string(parsed.status().message()).find("250ms"),
              std::string::npos)
        << parsed.status();
  }
}

TEST(FlagUnits, Sizes) {
  EXPECT_EQ(*ParseSizeValue("0"), 0);
  EXPECT_EQ(*ParseSizeValue("1000"), 1000);
  EXPECT_EQ(*ParseSizeValue("16MiB"), 16 * 1024 * 1024);
  EXPECT_EQ(*ParseSizeValue("16mib"), 16 * 1024 * 1024);
  EXPECT_EQ(*ParseSizeValue("512Ki"), 512 * 1024);
  EXPECT_EQ(*ParseSizeValue("1.5KiB"), 1536);
  EXPECT_EQ(*ParseSizeValue("2GB"), 2000000000);
  EXPECT_EQ(*ParseSizeValue("2G"), 2000000000);
  EXPECT_EQ(*ParseSizeValue("3TiB"), int64_t{3} << 40);
  EXPECT_EQ(*ParseSizeValue("64B"), 64);
  EXPECT_EQ(*ParseSizeValue("0.5MB"), 500000);
  for (const char* bad : {"", "MiB", "-1", "1e6", "1.5B", "0.1KiB", "16 MiB",
                          "16MiBs", "1.KiB", "99999999999999999999", "8EiB"}) {
    auto parsed = ParseSizeValue(bad);
    ASSERT_FALSE(parsed.ok()) << bad << " -> " << *parsed;
    EXPECT_NE(std::string(parsed.status().message()).find("16MiB"),
              std::string::npos)
        << parsed.status();
  }
  EXPECT_EQ(*ParseSizeValue("4194304TiB"), int64_t{1} << 62);
  EXPECT_FALSE(ParseSizeValue("4194305TiB").ok());
}

TEST(FlagUnits, Formats) {
  EXPECT_EQ(FormatDurationValue(absl::Milliseconds(2)), "2ms");
  EXPECT_EQ(FormatDurationValue(absl::Seconds(90)), "1m30s");
  EXPECT_EQ(FormatSizeValue(16 << 20), "16MiB");
  EXPECT_EQ(FormatSizeValue(1536 * 1024), "1536KiB");
  EXPECT_EQ(FormatSizeValue(int64_t{1} << 30), "1GiB");
  EXPECT_EQ(FormatSizeValue(1000), "1000");
  EXPECT_EQ(FormatSizeValue(0), "0");
  // What is formatted parses back to the same value.
  for (int64_t bytes : {int64_t{1}, int64_t{4096}, int64_t{3} << 40}) {
    EXPECT_EQ(*ParseSizeValue(FormatSizeValue(bytes)), bytes);
  }
}

// The serve flags with the syntax applied, parsed from `args`.
struct Parsed {
  ServeFlags flags;
  std::string error;  // CLI11's message when parsing failed
};
Parsed ParseServe(std::vector<std::string> args) {
  Parsed p;
  CLI::App app("test", "encoder-server");
  DefineServeFlags(app, p.flags);
  AddEnvironmentNames(app);
  AddValueSyntax(app, &p.flags.spelling_notes);
  std::vector<const char*> argv = {"encoder-server"};
  for (const std::string& a : args) argv.push_back(a.c_str());
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::ParseError& e) {
    p.error = e.what();
  }
  return p;
}

TEST(FlagUnits, DurationFlagsTakeTheSyntaxInEveryUnit) {
  Parsed p = ParseServe({"--max-queue-delay=2ms", "--max-batch-time=1s",
                         "--drain-grace=1m30s", "--drain-unready=250ms",
                         "--batch-profile-time=1.5s", "--malloc-trim-idle=0"});
  ASSERT_EQ(p.error, "");
  EXPECT_EQ(p.flags.host.batching.max_queue_delay, absl::Milliseconds(2));
  EXPECT_EQ(p.flags.host.batching.max_batch_time, absl::Seconds(1));
  EXPECT_EQ(p.flags.drain_grace_seconds, 90.0);
  EXPECT_EQ(p.flags.drain_unready_seconds, 0.25);
  EXPECT_EQ(p.flags.host.batch_profile_budget, absl::Milliseconds(1500));
  EXPECT_EQ(p.flags.trim.idle_ms, 0);
  EXPECT_TRUE(p.flags.spelling_notes.empty());
}

TEST(FlagUnits, BareNumbersAreTheOldUnitWithANote) {
  Parsed p = ParseServe({"--max-queue-delay-us=250", "--drain-grace=7"});
  ASSERT_EQ(p.error, "");
  EXPECT_EQ(p.flags.host.batching.max_queue_delay, absl::Microseconds(250));
  EXPECT_EQ(p.flags.drain_grace_seconds, 7.0);
  ASSERT_EQ(p.flags.spelling_notes.size(), 2u);
  EXPECT_EQ(p.flags.spelling_notes[0],
            "--max-queue-delay 250: a number without a unit is read in µs "
            "(the old spelling, refused from 1.0); write 250us");
  EXPECT_NE(p.flags.spelling_notes[1].find("write 7s"), std::string::npos);
}

TEST(FlagUnits, RefusalsNameTheSyntax) {
  Parsed finer = ParseServe({"--max-batch-time=1500us"});
  EXPECT_NE(finer.error.find("not a whole number of ms"), std::string::npos)
      << finer.error;
  Parsed word = ParseServe({"--drain-grace=soon"});
  EXPECT_NE(word.error.find("250ms"), std::string::npos) << word.error;
  Parsed negative = ParseServe({"--max-queue-delay=-1"});
  EXPECT_NE(negative.error, "");
  // The option's own range still applies after the unit is read.
  Parsed range = ParseServe({"--batch-profile-time=11m"});
  EXPECT_NE(range.error, "");
  Parsed size = ParseServe({"--memory-limit-bytes=lots"});
  EXPECT_NE(size.error.find("16MiB"), std::string::npos) << size.error;
}

TEST(FlagUnits, SizeFlagsTakeUnits) {
  Parsed p =
      ParseServe({"--memory-limit-bytes=2GiB", "--max-send-message-bytes=64KiB",
                  "--cpu-buffer-cache-bytes=1000000"});
  ASSERT_EQ(p.error, "");
  EXPECT_EQ(p.flags.host.memory_limit_bytes, int64_t{2} << 30);
  EXPECT_EQ(p.flags.limits.max_send_message_bytes, 64 * 1024);
  EXPECT_EQ(p.flags.cpu_buffer_cache_bytes, 1000000);
  EXPECT_TRUE(p.flags.spelling_notes.empty());
}

TEST(FlagUnits, EnvironmentTakesTheSyntaxAndTheOldNames) {
  ASSERT_EQ(setenv("ENCODER_MAX_BATCH_TIME", "20ms", 1), 0);
  ASSERT_EQ(setenv("ENCODER_MEMORY_LIMIT_BYTES", "1GiB", 1), 0);
  ASSERT_EQ(setenv("ENCODER_DRAIN_UNREADY_SECONDS", "3", 1), 0);
  Parsed p = ParseServe({});
  unsetenv("ENCODER_MAX_BATCH_TIME");
  unsetenv("ENCODER_MEMORY_LIMIT_BYTES");
  unsetenv("ENCODER_DRAIN_UNREADY_SECONDS");
  unsetenv("ENCODER_DRAIN_UNREADY");  // set from the old name
  ASSERT_EQ(p.error, "");
  EXPECT_EQ(p.flags.host.batching.max_batch_time, absl::Milliseconds(20));
  EXPECT_EQ(p.flags.host.memory_limit_bytes, int64_t{1} << 30);
  EXPECT_EQ(p.flags.drain_unready_seconds, 3.0);
  ASSERT_EQ(p.flags.spelling_notes.size(), 2u);
  EXPECT_EQ(p.flags.spelling_notes[0],
            "ENCODER_DRAIN_UNREADY_SECONDS is the old name of "
            "ENCODER_DRAIN_UNREADY (read until 1.0)");
}

TEST(FlagUnits, DefaultsAreShownInTheSyntax) {
  CLI::App app("test", "encoder-server");
  ServeFlags flags;
  DefineServeFlags(app, flags);
  AddEnvironmentNames(app);
  AddValueSyntax(app, &flags.spelling_notes);
  EXPECT_EQ(app.get_option("--drain-grace")->get_default_str(), "20s");
  EXPECT_EQ(app.get_option("--max-receive-message-bytes")->get_type_name(),
            "SIZE");
  EXPECT_EQ(app.get_option("--max-queue-delay")->get_type_name(), "DURATION");
  EXPECT_EQ(app.get_option("--max-queue-delay")->get_envname(),
            "ENCODER_MAX_QUEUE_DELAY");
  // Each default, read back through the syntax, is the field's default.
  const std::string queue =
      app.get_option("--max-queue-delay")->get_default_str();
  EXPECT_EQ(*ParseDurationValue(queue),
            runner::HostOptions{}.batching.max_queue_delay);
  const std::string receive =
      app.get_option("--max-receive-message-bytes")->get_default_str();
  EXPECT_EQ(*ParseSizeValue(receive),
            service::ServerOptions{}.max_receive_message_bytes);
}

TEST(FlagUnits, OneBooleanStyle) {
  // Every flag that takes no value has its --no- form.
  CLI::App app("test", "encoder-server");
  ServeFlags flags;
  DefineServeFlags(app, flags);
  for (CLI::Option* option : app.get_options()) {
    if (option->get_type_size() != 0) continue;  // takes a value
    const std::string name = option->get_single_name();
    if (name == "help" || name == "json-output") continue;  // TEI's switch
    bool negated = false;
    for (const std::string& f : option->get_fnames()) {
      if (f == "no-" + name) negated = true;
    }
    EXPECT_TRUE(negated) << "--" << name << " has no --no-" << name;
  }
  EXPECT_EQ(ParseServe({"--share-intra-op-threads"}).flags.share_intra_op,
            "true");
  Parsed old = ParseServe({"--share-intra-op-threads=off"});
  EXPECT_EQ(old.flags.share_intra_op, "false");
  ASSERT_EQ(old.flags.spelling_notes.size(), 1u);
}

TEST(FlagUnits, RepeatableFlagsTakeCommaSeparatedValues) {
  ASSERT_EQ(setenv("ENCODER_MODEL_ID", "org/a,b=org/b", 1), 0);
  ASSERT_EQ(setenv("ENCODER_MODEL_ALIAS", "x=a,y=b", 1), 0);
  Parsed env = ParseServe({});
  unsetenv("ENCODER_MODEL_ID");
  unsetenv("ENCODER_MODEL_ALIAS");
  ASSERT_EQ(env.error, "");
  EXPECT_EQ(env.flags.model_ids,
            (std::vector<std::string>{"org/a", "b=org/b"}));
  EXPECT_EQ(env.flags.model_aliases, (std::vector<std::string>{"x=a", "y=b"}));
  Parsed line = ParseServe({"--model-dir=/m/one,two=/m/2", "--model-dir=/m/3"});
  ASSERT_EQ(line.error, "");
  EXPECT_EQ(line.flags.model_dirs,
            (std::vector<std::string>{"/m/one", "two=/m/2", "/m/3"}));
}

}  // namespace
}  // namespace encoder
