// One syntax for every duration and size a flag, an ENCODER_ variable or a
// --config key takes (docs/configuration.md, "Values"):
//
//   duration  a decimal number and a unit, ns us µs ms s m h, several
//             summed ("1m30s"), or 0: "250ms", "5s", "2m" (absl's
//             ParseDuration). A bare number is the old spelling: it is
//             read in the option's old unit (--max-queue-delay: µs) with a
//             warning, until 1.0 refuses it.
//   size      bytes: a decimal number alone, or with a unit: KiB MiB GiB
//             TiB (1024^n; Ki Mi Gi Ti as Kubernetes writes them), KB MB GB
//             TB (1000^n; K M G T), B. Case is ignored: "16MiB", "64mib",
//             "512Ki", "1e6" is refused (write 1MB).
//
// Options keep the number type they are bound to: the syntax is a CLI11
// transform that rewrites the value as a plain number in the option's
// unit before CLI11 converts it, so ranges and defaults stay as they were.
#ifndef ENCODER_SERVER_APP_FLAG_UNITS_H_
#define ENCODER_SERVER_APP_FLAG_UNITS_H_

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace encoder {

// A duration (above); refuses negatives, infinity and bare numbers other
// than 0.
absl::StatusOr<absl::Duration> ParseDurationValue(std::string_view text);

// A size in bytes (above); refuses negatives and sizes past 2^62.
absl::StatusOr<int64_t> ParseSizeValue(std::string_view text);

// "250ms", "5s", "2m", "1h30m", "0s" (absl::FormatDuration).
std::string FormatDurationValue(absl::Duration d);

// The largest binary unit that divides `bytes` exactly ("16MiB", "1GiB",
// "1536KiB"); plain bytes otherwise ("1000", "0").
std::string FormatSizeValue(int64_t bytes);

// A duration option: its names, new first then the old one it replaces
// (whose ENCODER_ variable is still read, with a warning), the unit its
// bound number counts in (the old spelling's unit), and whether that
// number is an integer (a value finer than the unit is then refused).
struct DurationOption {
  const char* name;      // "max-queue-delay"
  const char* old_name;  // "max-queue-delay-us"; null: not renamed
  absl::Duration unit;
  const char* unit_name;  // "µs", for messages
  bool whole;
};

// The environment variable an option of encoder-server can also come from:
// the long name upper-cased with '-' as '_', after ENCODER_
// ("max-batch-tokens" -> "ENCODER_MAX_BATCH_TOKENS").
std::string EnvironmentName(const std::string& long_name);

// The duration options of encoder-server, by their new names.
const std::vector<DurationOption>& DurationOptions();

// Applies the syntax above to `app`'s options: the duration options of
// DurationOptions() and every option whose name ends in "-bytes" (or
// "-bytes-per-connection"). Their
// defaults are shown in it ("2ms", "16MiB"). For a renamed option whose
// new ENCODER_ variable is unset, the old one's value is used (setenv),
// with a note. `notes` gathers the warnings of old spellings met while
// parsing; it must outlive app.parse. Call after every option is defined
// and after AddEnvironmentNames.
void AddValueSyntax(CLI::App& app, std::vector<std::string>* notes);

}  // namespace encoder

#endif  // ENCODER_SERVER_APP_FLAG_UNITS_H_
