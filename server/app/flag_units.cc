#include "server/app/flag_units.h"

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"

namespace encoder {

std::string EnvironmentName(const std::string& long_name) {
  std::string env = "ENCODER_";
  for (char c : long_name) {
    env.push_back(c == '-' ? '_' : static_cast<char>(std::toupper(c)));
  }
  return env;
}

namespace {

constexpr int64_t kMaxSize = int64_t{1} << 62;

struct SizeUnit {
  const char* name;  // lower case
  int64_t bytes;
};

constexpr int64_t kKi = 1024;
constexpr SizeUnit kSizeUnits[] = {
    {"", 1},
    {"b", 1},
    {"k", 1000},
    {"kb", 1000},
    {"m", 1000 * 1000},
    {"mb", 1000 * 1000},
    {"g", int64_t{1000} * 1000 * 1000},
    {"gb", int64_t{1000} * 1000 * 1000},
    {"t", int64_t{1000} * 1000 * 1000 * 1000},
    {"tb", int64_t{1000} * 1000 * 1000 * 1000},
    {"ki", kKi},
    {"kib", kKi},
    {"mi", kKi* kKi},
    {"mib", kKi* kKi},
    {"gi", kKi* kKi* kKi},
    {"gib", kKi* kKi* kKi},
    {"ti", kKi* kKi* kKi* kKi},
    {"tib", kKi* kKi* kKi* kKi},
};

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// `value` (a number in `unit`) as the option's bound number.
std::string AsNumber(absl::Duration value, const DurationOption& d,
                     std::string* error) {
  if (d.whole) {
    absl::Duration rest;
    const int64_t n = absl::IDivDuration(value, d.unit, &rest);
    if (rest != absl::ZeroDuration()) {
      *error = absl::StrCat(FormatDurationValue(value),
                            " is not a whole number of ", d.unit_name);
      return "";
    }
    return absl::StrCat(n);
  }
  return absl::StrFormat("%.17g", absl::FDivDuration(value, d.unit));
}

CLI::Validator DurationTransform(const DurationOption& d,
                                 std::vector<std::string>* notes) {
  return CLI::Validator(
      [d, notes](std::string& value) -> std::string {
        absl::Duration parsed;
        double bare = 0;
        if (value != "0" && absl::SimpleAtod(value, &bare)) {
          // The old spelling: a number in the option's old unit.
          if (!(bare >= 0) || std::isinf(bare)) {
            return "a duration is a finite number, not negative";
          }
          parsed = d.unit * bare;
          notes->push_back(
              absl::StrCat("--", d.name, " ", value,
                           ": a number without a unit is read "
                           "in ",
                           d.unit_name,
                           " (the old spelling, refused from 1.0); "
                           "write ",
                           FormatDurationValue(parsed)));
        } else {
          absl::StatusOr<absl::Duration> read = ParseDurationValue(value);
          if (!read.ok()) return std::string(read.status().message());
          parsed = *read;
        }
        std::string error;
        std::string number = AsNumber(parsed, d, &error);
        if (!error.empty()) return error;
        value = std::move(number);
        return std::string();
      },
      "", "duration");
}

CLI::Validator SizeTransform() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        absl::StatusOr<int64_t> bytes = ParseSizeValue(value);
        if (!bytes.ok()) return std::string(bytes.status().message());
        value = absl::StrCat(*bytes);
        return std::string();
      },
      "", "size");
}

}  // namespace

absl::StatusOr<absl::Duration> ParseDurationValue(std::string_view view) {
  const std::string text(view);
  const std::string spelt = absl::StrReplaceAll(text, {{"µs", "us"}});
  absl::Duration d;
  if (!absl::ParseDuration(spelt, &d) || d == absl::InfiniteDuration() ||
      d == -absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", text,
                     "\" is no duration: give a number and a unit "
                     "(ns, us, ms, s, m, h), e.g. 250ms, 5s, 2m, 1m30s"));
  }
  if (d < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", text,
                     "\": a duration is not negative (e.g. "
                     "250ms, 5s, 2m)"));
  }
  return d;
}

absl::StatusOr<int64_t> ParseSizeValue(std::string_view view) {
  const std::string text(view);
  auto refuse = [&text](const char* why) {
    return absl::InvalidArgumentError(absl::StrCat(
        "\"", text, "\" is no size", why,
        ": give bytes, or a number and a unit (KiB, MiB, GiB, TiB; KB, MB, "
        "GB, TB), e.g. 16MiB, 512KiB, 2GB"));
  };
  size_t i = 0;
  unsigned __int128 whole = 0;
  while (i < text.size() && IsDigit(text[i])) {
    whole = whole * 10 + (text[i] - '0');
    if (whole > kMaxSize) return refuse(" (too large)");
    ++i;
  }
  if (i == 0) return refuse("");
  unsigned __int128 fraction = 0, scale = 1;
  if (i < text.size() && text[i] == '.') {
    ++i;
    const size_t first = i;
    while (i < text.size() && IsDigit(text[i]) && i - first < 18) {
      fraction = fraction * 10 + (text[i] - '0');
      scale *= 10;
      ++i;
    }
    if (i == first) return refuse("");
  }
  const std::string unit = absl::AsciiStrToLower(text.substr(i));
  for (const SizeUnit& u : kSizeUnits) {
    if (unit != u.name) continue;
    const unsigned __int128 scaled = fraction * u.bytes;
    if (scaled % scale != 0) return refuse(" (not a whole number of bytes)");
    const unsigned __int128 bytes = whole * u.bytes + scaled / scale;
    if (bytes > kMaxSize) return refuse(" (too large)");
    return static_cast<int64_t>(bytes);
  }
  return refuse("");
}

std::string FormatDurationValue(absl::Duration d) {
  return absl::FormatDuration(d);
}

std::string FormatSizeValue(int64_t bytes) {
  static constexpr std::pair<const char*, int64_t> kUnits[] = {
      {"TiB", kKi * kKi * kKi * kKi},
      {"GiB", kKi * kKi * kKi},
      {"MiB", kKi * kKi},
      {"KiB", kKi}};
  if (bytes > 0) {
    for (const auto& [name, size] : kUnits) {
      if (bytes % size == 0) return absl::StrCat(bytes / size, name);
    }
  }
  return absl::StrCat(bytes);
}

const std::vector<DurationOption>& DurationOptions() {
  static const auto* options = new std::vector<DurationOption>{
      {"max-queue-delay", "max-queue-delay-us", absl::Microseconds(1), "µs",
       true},
      {"max-batch-time", "max-batch-ms", absl::Milliseconds(1), "ms", true},
      {"batch-profile-time", "batch-profile-ms", absl::Milliseconds(1), "ms",
       true},
      {"malloc-trim-idle", "malloc-trim-idle-ms", absl::Milliseconds(1), "ms",
       true},
      {"drain-grace", "drain-grace-seconds", absl::Seconds(1), "s", false},
      {"drain-unready", "drain-unready-seconds", absl::Seconds(1), "s", false},
      {"tls-reload-interval", "tls-reload-seconds", absl::Seconds(1), "s",
       true},
      {"http-request-timeout", nullptr, absl::Seconds(1), "s", false},
      {"http-keep-alive", nullptr, absl::Seconds(1), "s", false},
      {"otlp-schedule-delay", nullptr, absl::Milliseconds(1), "ms", true},
      {"otlp-export-timeout", nullptr, absl::Milliseconds(1), "ms", true},
  };
  return *options;
}

namespace {

// Help shows the type name alone: the checks' own descriptions ("INT in
// [1 - 2147483648]") count in the bound number's unit, not the syntax's.
void HideCheckDescriptions(CLI::Option* option) {
  for (int i = 0;; ++i) {
    try {
      option->get_validator(i)->description("");
    } catch (const CLI::OptionNotFound&) {
      return;
    }
  }
}

}  // namespace

void AddValueSyntax(CLI::App& app, std::vector<std::string>* notes) {
  for (CLI::Option* option : app.get_options()) {
    const std::string name = option->get_single_name();
    const std::string default_str = option->get_default_str();
    for (const DurationOption& d : DurationOptions()) {
      if (name != d.name) continue;
      option->transform(DurationTransform(d, notes))->type_name("DURATION");
      HideCheckDescriptions(option);
      double number = 0;
      if (absl::SimpleAtod(default_str, &number)) {
        option->default_str(FormatDurationValue(d.unit * number));
      }
      if (d.old_name == nullptr || option->get_envname().empty()) continue;
      const std::string old_env = EnvironmentName(d.old_name);
      const char* old_value = std::getenv(old_env.c_str());
      if (old_value != nullptr &&
          std::getenv(option->get_envname().c_str()) == nullptr) {
        setenv(option->get_envname().c_str(), old_value, 1);
        notes->push_back(absl::StrCat(old_env, " is the old name of ",
                                      option->get_envname(),
                                      " (read until 1.0)"));
      }
    }
    if (absl::EndsWith(name, "-bytes") ||
        absl::EndsWith(name, "-bytes-per-connection")) {
      option->transform(SizeTransform())->type_name("SIZE");
      HideCheckDescriptions(option);
      int64_t bytes = 0;
      if (absl::SimpleAtoi(default_str, &bytes)) {
        option->default_str(FormatSizeValue(bytes));
      }
    }
  }
}

}  // namespace encoder
