// encoder-client models, health, tokenize and decode.
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "client/cli_commands.h"
#include "client/commands.h"
#include "client/errors.h"
#include "client/health.h"
#include "client/inputs.h"
#include "client/tokenize.h"

namespace encoder_client {

Command AddModels(CLI::App* app, ConnectionOptions* connection) {
  CLI::App* command = app->add_subcommand(
      "models", "List the served models and their positional schemes (JSON)");
  AddConnectionFlags(command, connection);
  AddJsonFlags(command);
  return {command, [=]() { return RunModels(*connection); }};
}

Command AddHealth(CLI::App* app, ConnectionOptions* connection) {
  CLI::App* command = app->add_subcommand(
      "health",
      "grpc.health.v1 Check; prints the status, exits 0 only when SERVING");
  AddConnectionFlags(command, connection);
  auto service = std::make_shared<std::string>();
  command->add_option("--service", *service,
                      "Service to check (default \"\": the whole server)");
  return {command, [=]() { return RunHealth(*connection, *service); }};
}

Command AddTokenize(CLI::App* app, ConnectionOptions* connection) {
  CLI::App* command = app->add_subcommand(
      "tokenize", "Text -> the model's token ids, tokens and offsets (JSON)");
  AddConnectionFlags(command, connection);
  AddJsonFlags(command);
  auto options = std::make_shared<TokenizeOptions>();
  command->add_option("--model", options->model,
                      "Model name (default: the server's default model)");
  command->add_option("--text", options->texts, "Text (repeatable)")
      ->required();
  command->add_flag("--no-special-tokens", options->no_special_tokens,
                    "Leave out the model's special tokens");
  command->add_flag("--truncate", options->truncate,
                    "Cut to --max-length (or the model's limit)");
  command
      ->add_option("--max-length", options->max_length,
                   "Truncation length (0: the model's limit)")
      ->check(CLI::NonNegativeNumber);
  command
      ->add_option("--truncation-side", options->truncation_side,
                   "right or left")
      ->check(CLI::IsMember({"right", "left"}))
      ->capture_default_str();
  return {command, [=]() { return RunTokenize(*connection, *options); }};
}

Command AddDecode(CLI::App* app, ConnectionOptions* connection) {
  CLI::App* command = app->add_subcommand(
      "decode", "Token ids -> text with the model's tokenizer (JSON)");
  AddConnectionFlags(command, connection);
  AddJsonFlags(command);
  auto options = std::make_shared<DecodeOptions>();
  auto ids = std::make_shared<std::string>();
  command->add_option("--model", options->model,
                      "Model name (default: the server's default model)");
  command->add_option("--ids", *ids, "Token ids such as 1,2,3")
      ->type_name("ID,...")
      ->required();
  command->add_flag("--skip-special-tokens", options->skip_special_tokens,
                    "Leave special tokens out of the text");
  return {command, [=]() {
            std::string error;
            if (!ParseIntList(*ids, &options->ids, &error)) {
              PrintError("--ids: " + error);
              return kExitUsage;
            }
            return RunDecode(*connection, *options);
          }};
}

}  // namespace encoder_client
