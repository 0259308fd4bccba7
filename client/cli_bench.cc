// encoder-client bench and report: load generation and the HTML comparison.
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "client/bench.h"
#include "client/cli_commands.h"
#include "client/errors.h"
#include "client/inputs.h"
#include "client/report.h"

namespace encoder_client {

Command AddBench(CLI::App* app, ConnectionOptions* connection) {
  CLI::App* command = app->add_subcommand(
      "bench",
      "Closed-loop load on Embed or EmbedStream; prints a table "
      "(and JSON with --json)");
  AddConnectionFlags(command, connection);
  auto options = std::make_shared<BenchOptions>();
  auto length = std::make_shared<int>(0);
  auto layers = std::make_shared<std::string>();
  command->add_option("--model", options->model,
                      "Model name (default: the server's default model)");
  command
      ->add_option("--concurrency", options->concurrency,
                   "Callers, each waiting for its response before the "
                   "next request")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  command
      ->add_option("--duration-s", options->duration_s,
                   "Stop after this many seconds (default 10 when "
                   "--requests is not given)")
      ->check(CLI::NonNegativeNumber);
  command
      ->add_option("--requests", options->requests,
                   "Stop after this many requests in total")
      ->check(CLI::NonNegativeNumber);
  CLI::Option* length_flag =
      command
          ->add_option("--length", *length,
                       "Token ids per input (sets min and max length)")
          ->check(CLI::PositiveNumber);
  command
      ->add_option("--min-length", options->min_length, "Shortest random input")
      ->check(CLI::PositiveNumber)
      ->excludes(length_flag)
      ->capture_default_str();
  command
      ->add_option("--max-length", options->max_length, "Longest random input")
      ->check(CLI::PositiveNumber)
      ->excludes(length_flag)
      ->capture_default_str();
  command
      ->add_option("--inputs-per-request", options->inputs_per_request,
                   "Inputs in each request")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  command->add_flag("--stream", options->stream,
                    "Use one EmbedStream per caller instead of unary calls");
  command->add_flag("--tokens", options->token_embeddings,
                    "Ask for the token embeddings [S, D] of every input");
  command->add_option("--attention-layers", *layers,
                      "Ask for the attention maps of these layers (all "
                      "heads), e.g. 0,1");
  command
      ->add_option("--warmup-requests", options->warmup_requests,
                   "Unmeasured requests sent one by one first")
      ->check(CLI::NonNegativeNumber);
  command
      ->add_option("--seed", options->seed,
                   "Seed of the random inputs (caller i uses seed + i)")
      ->capture_default_str();
  command->add_flag("--json", options->json,
                    "Print the report as JSON on stdout (the table goes to "
                    "stderr)");
  return {command, [=]() {
            if (length_flag->count() > 0) {
              options->min_length = *length;
              options->max_length = *length;
            }
            if (options->min_length > options->max_length) {
              PrintError("--min-length exceeds --max-length");
              return kExitUsage;
            }
            if (!ParseInt32Flag("--attention-layers", *layers,
                                &options->attention_layers)) {
              return kExitUsage;
            }
            return RunBench(*connection, *options);
          }};
}

Command AddReport(CLI::App* app, ConnectionOptions* connection) {
  CLI::App* command = app->add_subcommand(
      "report",
      "Diagnose one input on several models and write one self-contained "
      "HTML page comparing them");
  AddConnectionFlags(command, connection);
  auto options = std::make_shared<ReportOptions>();
  auto text = std::make_shared<std::string>();
  auto ids = std::make_shared<std::string>();
  command->add_option("--out", options->out, "HTML file to write")
      ->type_name("FILE")
      ->required();
  CLI::Option* text_flag = command->add_option(
      "--text", *text,
      std::string("Text input (default: \"") + kDefaultReportText + "\")");
  CLI::Option* ids_flag =
      command->add_option("--ids", *ids, "Token-id input such as 1,2,3")
          ->type_name("ID,...");
  text_flag->excludes(ids_flag);
  command
      ->add_option("--models", options->models,
                   "Models to compare, comma-separated (default: all)")
      ->delimiter(',');
  command
      ->add_option("--structure-positions", options->structure_positions,
                   "N of the positional matrices")
      ->check(CLI::Range(2, 4096))
      ->capture_default_str();
  command
      ->add_option("--max-layers", options->max_layers,
                   "Layers shown in the heatmap grid (0: all)")
      ->check(CLI::NonNegativeNumber);
  command->add_flag("--extrapolation", options->extrapolation,
                    "Add the extrapolation probe: curves of every model on "
                    "shared axes");
  command
      ->add_option("--max-multiple", options->max_multiple,
                   "Extrapolation grid up to this multiple of each model's "
                   "trained length (0: server default, 2)")
      ->check(CLI::NonNegativeNumber);
  command->add_flag("--side-by-side", options->side_by_side,
                    "Model sections in columns next to each other");
  command
      ->add_option("--max-heads", options->max_heads,
                   "Heads shown in the heatmap grid (0: all)")
      ->check(CLI::NonNegativeNumber);
  return {
      command, [=]() {
        if (text_flag->count() > 0) options->text = *text;
        if (ids_flag->count() > 0) {
          std::vector<int64_t> values;
          std::string error;
          if (!ParseIntList(*ids, &values, &error) || values.empty()) {
            PrintError("--ids: " + (error.empty() ? "no token ids" : error));
            return kExitUsage;
          }
          options->ids = values;
        }
        return RunReport(*connection, *options);
      }};
}

}  // namespace encoder_client
