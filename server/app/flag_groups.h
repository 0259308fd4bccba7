// encoder-server's flags in groups for --help (models, listening, HTTP,
// batching and limits, precision and threads, security, observability,
// text-embeddings-inference's names), the expert ones shown only by
// --help-all, and the whole table as Markdown (docs/configuration.md is
// that output, checked by the configuration_doc test).
#ifndef ENCODER_SERVER_APP_FLAG_GROUPS_H_
#define ENCODER_SERVER_APP_FLAG_GROUPS_H_

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

namespace encoder {

// The group of the option whose first long name is `name` (without
// dashes); "" for a name no group lists.
std::string FlagGroup(const std::string& name);

// Puts every option of `app` in its group (--help and --version stay in
// CLI11's own) and sets a help formatter that leaves the "Advanced" group
// out unless `show_advanced` (its options parse either way, and errors
// name them). Returns the names of the
// options no group lists (a test keeps it empty).
std::vector<std::string> GroupFlags(CLI::App& app, bool show_advanced);

// Every option of `app` (grouped by GroupFlags first) as Markdown tables,
// one per group: the flag and its other names, its environment variable,
// its type and unit, its default, and its help text.
std::string FlagsMarkdown(CLI::App& app);

}  // namespace encoder

#endif  // ENCODER_SERVER_APP_FLAG_GROUPS_H_
