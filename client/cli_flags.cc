// encoder-client: the flags several subcommands share.
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "client/cli_commands.h"
#include "client/errors.h"
#include "client/inputs.h"
#include "client/json_output.h"

namespace encoder_client {

void AddConnectionFlags(CLI::App* command, ConnectionOptions* connection) {
  command->add_option("--target", connection->target, "Server address")
      ->type_name("HOST:PORT")
      ->capture_default_str();
  command
      ->add_option("--deadline-ms", connection->deadline_ms,
                   "Deadline of each call, in milliseconds")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  command->add_flag("--tls", connection->tls,
                    "Connect with TLS (implied by --ca, --cert, --key)");
  command->add_option("--ca", connection->ca_file,
                      "PEM CA certificates the server's certificate must "
                      "chain to (default: the system's)");
  command->add_option("--cert", connection->cert_file,
                      "PEM client certificate, for mutual TLS");
  command->add_option("--key", connection->key_file,
                      "PEM private key of --cert");
  command->add_option("--token-file", connection->token_file,
                      "File whose first line is the bearer token sent as "
                      "'authorization: Bearer <token>'");
}

void AddJsonFlags(CLI::App* command) {
  command->add_flag("--pretty", OutputJsonStyle().pretty,
                    "Indent the JSON output (default: one compact line)");
  command->add_flag("--json-camel-case", OutputJsonStyle().camel_case,
                    "lowerCamelCase field names (protobuf's JSON names, as "
                    "grpcurl prints them) instead of the .proto names");
}

bool ParseInt32Flag(const std::string& flag, const std::string& text,
                    std::vector<int32_t>* values) {
  std::string error;
  if (ParseInt32List(text, values, &error)) return true;
  PrintError(flag + ": " + error);
  return false;
}

}  // namespace encoder_client
