// encoder-client diagnose: the positional probes of one model.
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "client/cli_commands.h"
#include "client/commands.h"
#include "client/errors.h"
#include "client/inputs.h"

namespace encoder_client {
namespace {

void AddExtrapolationFlags(CLI::App* command, DiagnoseOptions* options) {
  command->add_flag("--extrapolation", options->extrapolation,
                    "Run the extrapolation probe: the input repeated (or "
                    "random ids) at lengths up to past the trained length "
                    "(only this probe unless --probes names others)");
  command
      ->add_option("--lengths", options->extrapolation_lengths,
                   "Extrapolation lengths, increasing (default: the "
                   "server's grid)")
      ->delimiter(',')
      ->check(CLI::PositiveNumber);
  command
      ->add_option("--max-multiple", options->max_multiple,
                   "Default grid: up to this multiple of the trained length "
                   "(0: 2)")
      ->check(CLI::NonNegativeNumber);
  command
      ->add_option("--points", options->points,
                   "Default grid: number of lengths (0: 6)")
      ->check(CLI::Range(0, 32));
  command
      ->add_option("--prefix-length", options->prefix_length,
                   "Tokens compared across lengths (0: min(8, shortest))")
      ->check(CLI::NonNegativeNumber);
}

}  // namespace

Command AddDiagnose(CLI::App* app, ConnectionOptions* connection) {
  CLI::App* command = app->add_subcommand(
      "diagnose", "Run positional diagnostics on one input (JSON)");
  AddConnectionFlags(command, connection);
  AddJsonFlags(command);
  auto options = std::make_shared<DiagnoseOptions>();
  auto text = std::make_shared<std::string>();
  auto ids = std::make_shared<std::string>();
  auto order = std::make_shared<std::string>();
  command->add_option("--model", options->model,
                      "Model name (default: the server's default model)");
  CLI::Option* text_flag = command->add_option("--text", *text, "Text input");
  CLI::Option* ids_flag =
      command->add_option("--ids", *ids, "Token-id input such as 1,2,3")
          ->type_name("ID,...");
  CLI::Option* random_flag =
      command
          ->add_option("--random-length", options->random_length,
                       "Random token-id input of this length")
          ->check(CLI::PositiveNumber);
  text_flag->excludes(ids_flag)->excludes(random_flag);
  ids_flag->excludes(random_flag);
  command->add_option("--seed", options->seed, "Seed of the random input")
      ->capture_default_str();
  command
      ->add_option("--probes", options->probes,
                   "Probes to run, comma-separated: permutation, shift, "
                   "structure, attention_stats (default: all)")
      ->delimiter(',')
      ->check(CLI::IsMember(
          {"permutation", "shift", "structure", "attention_stats"}));
  command->add_option("--permutation-order", *order,
                      "Permutation of input positions, e.g. 2,0,1 "
                      "(default: a seeded random one)");
  command->add_option("--permutation-seed", options->permutation_seed,
                      "Seed of the random permutation");
  command->add_option("--shift-offset", options->shift_offset,
                      "Position offset of the shift probe (0: server default)");
  command
      ->add_option("--structure-positions", options->structure_positions,
                   "N of the Gram/bias matrices (0: server default)")
      ->check(CLI::NonNegativeNumber);
  command->add_flag("--attention-maps", options->attention_maps,
                    "Also return the attention maps [L, H, S, S]");
  command
      ->add_option("--tolerance", options->tolerance,
                   "Verdict tolerance (0: server default)")
      ->check(CLI::NonNegativeNumber);
  AddExtrapolationFlags(command, options.get());
  return {
      command, [=]() {
        if (text_flag->count() > 0) options->text = *text;
        if (ids_flag->count() > 0) {
          std::vector<int64_t> values;
          std::string error;
          if (!ParseIntList(*ids, &values, &error)) {
            PrintError("--ids: " + error);
            return kExitUsage;
          }
          options->ids = values;
        }
        if (text_flag->count() + ids_flag->count() + random_flag->count() ==
            0) {
          PrintError("diagnose needs one of --text, --ids or --random-length");
          return kExitUsage;
        }
        if (!ParseInt32Flag("--permutation-order", *order,
                            &options->permutation_order)) {
          return kExitUsage;
        }
        return RunDiagnose(*connection, *options);
      }};
}

}  // namespace encoder_client
