// encoder-client's subcommands: each Add* registers one on the command line
// and returns the action main runs when it was selected. One file per
// group: cli_embed.cc, cli_diagnose.cc, cli_bench.cc (bench, report),
// cli_calls.cc (models, health, tokenize, decode), cli_score.cc (rerank,
// classify, sparse); the flags they share are
// in cli_flags.cc.
#ifndef ENCODER_CLIENT_CLI_COMMANDS_H_
#define ENCODER_CLIENT_CLI_COMMANDS_H_

#include <CLI/CLI.hpp>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "client/connection.h"

namespace encoder_client {

// A subcommand and its action, run when the command line selected it. The
// action returns the process exit code; flag values it rejects are usage
// errors.
struct Command {
  CLI::App* app;
  std::function<int()> run;
};

// --target, --deadline-ms and the TLS and token flags.
void AddConnectionFlags(CLI::App* command, ConnectionOptions* connection);
// --pretty and --json-camel-case of the subcommands that print JSON.
void AddJsonFlags(CLI::App* command);
// Parses a comma-separated int32 flag value; false (after printing the
// error) when it is malformed.
bool ParseInt32Flag(const std::string& flag, const std::string& text,
                    std::vector<int32_t>* values);

Command AddEmbed(CLI::App* app, ConnectionOptions* connection);
Command AddModels(CLI::App* app, ConnectionOptions* connection);
Command AddHealth(CLI::App* app, ConnectionOptions* connection);
Command AddDiagnose(CLI::App* app, ConnectionOptions* connection);
Command AddTokenize(CLI::App* app, ConnectionOptions* connection);
Command AddDecode(CLI::App* app, ConnectionOptions* connection);
Command AddRerank(CLI::App* app, ConnectionOptions* connection);
Command AddClassify(CLI::App* app, ConnectionOptions* connection);
Command AddSparse(CLI::App* app, ConnectionOptions* connection);
Command AddBench(CLI::App* app, ConnectionOptions* connection);
Command AddReport(CLI::App* app, ConnectionOptions* connection);

}  // namespace encoder_client

#endif  // ENCODER_CLIENT_CLI_COMMANDS_H_
