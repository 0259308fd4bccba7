// encoder-client: command-line client of encoder.v1.EncoderService.
// Wires the command line to the subcommands (cli_commands.h); see --help for
// every flag.
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "client/cli_commands.h"
#include "client/connection.h"
#include "client/errors.h"

namespace encoder_client {
namespace {

int Main(int argc, char** argv) {
  CLI::App app(
      "Command-line client of the encoder.v1.EncoderService gRPC server.",
      "encoder-client");
  app.require_subcommand(1);
  app.set_version_flag("--version",
                       std::string("encoder-client ") + ENCODER_PROJECT_VERSION,
                       "print the version and exit");
  app.footer(
      "Exit status: 0 success; 1 an RPC failed (stderr: 'error: <CODE>: "
      "<message>') or health is not SERVING; 2 usage error.\n"
      "Run 'encoder-client <subcommand> --help' for its flags.");
  ConnectionOptions connection;
  const std::vector<Command> commands = {
      AddEmbed(&app, &connection),    AddModels(&app, &connection),
      AddHealth(&app, &connection),   AddDiagnose(&app, &connection),
      AddBench(&app, &connection),    AddReport(&app, &connection),
      AddTokenize(&app, &connection), AddDecode(&app, &connection),
      AddRerank(&app, &connection),   AddClassify(&app, &connection),
      AddSparse(&app, &connection),
  };
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    PrintError(std::string(e.what()) + " (see --help)");
    return kExitUsage;
  }
  std::string error;
  if (!LoadCredentials(&connection, &error)) {
    PrintError(error);
    return kExitUsage;
  }
  for (const Command& command : commands) {
    if (command.app->parsed()) return command.run();
  }
  PrintError("no subcommand given (see --help)");
  return kExitUsage;
}

}  // namespace
}  // namespace encoder_client

int main(int argc, char** argv) { return encoder_client::Main(argc, argv); }
