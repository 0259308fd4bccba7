// encoder-client: command-line client of encoder.v1.EncoderService.
// Wires the command line to the subcommands; see --help for every flag.
#include <functional>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "client/bench.h"
#include "client/commands.h"
#include "client/connection.h"
#include "client/embed_stream.h"
#include "client/errors.h"
#include "client/health.h"
#include "client/inputs.h"
#include "client/json_output.h"
#include "client/report.h"
#include "client/tokenize.h"

namespace encoder_client {
namespace {

// A subcommand and its action, run when the command line selected it. The
// action returns the process exit code; flag values it rejects are usage
// errors.
struct Command {
  CLI::App* app;
  std::function<int()> run;
};

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

// --pretty and --json-camel-case of the subcommands that print JSON.
void AddJsonFlags(CLI::App* command) {
  command->add_flag("--pretty", OutputJsonStyle().pretty,
                    "Indent the JSON output (default: one compact line)");
  command->add_flag("--json-camel-case", OutputJsonStyle().camel_case,
                    "lowerCamelCase field names (protobuf's JSON names, as "
                    "grpcurl prints them) instead of the .proto names");
}

// Parses a comma-separated int32 flag value; false (after printing the
// error) when it is malformed.
bool ParseInt32Flag(const std::string& flag, const std::string& text,
                    std::vector<int32_t>* values) {
  std::string error;
  if (ParseInt32List(text, values, &error)) return true;
  PrintError(flag + ": " + error);
  return false;
}

Command AddEmbed(CLI::App* app, ConnectionOptions* connection) {
  CLI::App* command = app->add_subcommand(
      "embed",
      "Embed inputs with one model. --text/--ids: prints the EmbedResponse "
      "as JSON. --input FILE: many inputs over EmbedStream, written as JSON "
      "Lines, JSON or .npy in input order");
  AddConnectionFlags(command, connection);
  AddJsonFlags(command);
  auto bulk = std::make_shared<BulkEmbedOptions>();
  auto options = std::make_shared<EmbedOptions>();
  auto texts = std::make_shared<std::vector<std::string>>();
  auto id_lists = std::make_shared<std::vector<std::string>>();
  auto layers = std::make_shared<std::string>();
  auto heads = std::make_shared<std::string>();
  auto hidden = std::make_shared<std::string>();
  command->add_option("--model", options->model,
                      "Model name (default: the server's default model)");
  CLI::Option* text = command->add_option(
      "--text", *texts, "A UTF-8 text input; repeat the flag for more inputs");
  text->allow_extra_args(false);
  CLI::Option* ids = command->add_option(
      "--ids", *id_lists,
      "A token-id input such as 1,2,3 (no special tokens added); repeat the "
      "flag for more inputs. Inputs keep their command-line order");
  ids->type_name("ID,...")->allow_extra_args(false);
  command
      ->add_option("--pooling", options->pooling,
                   "mean or first (default: the model's)")
      ->check(CLI::IsMember({"mean", "first"}));
  CLI::Option* normalize =
      command->add_flag("--normalize", "L2-normalize the pooled embedding");
  CLI::Option* no_normalize = command->add_flag(
      "--no-normalize", "Do not normalize (default: the model's setting)");
  no_normalize->excludes(normalize);
  command->add_flag("--tokens", options->token_embeddings,
                    "Also return the token embeddings [S, D]");
  command->add_option("--attention-layers", *layers,
                      "Return attention maps of these layers, e.g. 0,1");
  command->add_option("--attention-heads", *heads,
                      "Only these heads, e.g. 0,3 (default: all)");
  command->add_flag("--average-heads", options->average_heads,
                    "Average the maps over the selected heads");
  command->add_flag("--attention-stats", options->attention_stats,
                    "Return per layer and head attention statistics");
  command->add_option(
      "--hidden-states", *hidden,
      "Return the hidden states after these layers, e.g. 0,-1 (0: the "
      "embedding output, -1: the last layer's output; write "
      "--hidden-states=-1 for a list that starts with a minus)");
  command->add_flag("--pool-hidden-states", options->pool_hidden_states,
                    "Pool each hidden state like the embedding: [layers, D] "
                    "instead of [layers, S, D]");
  command->add_flag("--truncate", options->truncate,
                    "Cut inputs longer than the model's limit");
  CLI::Option* input =
      command
          ->add_option("--input", bulk->input_path,
                       "Read inputs from FILE ('-': stdin): .txt one text a "
                       "line, .jsonl one {\"text\": ...} or {\"ids\": [...]} "
                       "object a line (with an optional \"id\" echoed back); "
                       "blank lines are skipped")
          ->type_name("FILE");
  input->excludes(text)->excludes(ids);
  command
      ->add_option("--input-format", bulk->input_format,
                   "auto (.jsonl/.ndjson: jsonl, else txt), txt or jsonl")
      ->check(CLI::IsMember({"auto", "txt", "jsonl"}))
      ->default_val("auto");
  command
      ->add_option("--batch-size", bulk->batch_size,
                   "Inputs per EmbedStream request")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  command
      ->add_option("--max-in-flight", bulk->max_in_flight,
                   "EmbedStream requests sent and not yet answered")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  CLI::Option* output_format =
      command
          ->add_option("--output-format", bulk->output_format,
                       "jsonl (a line per input: index, line, id, "
                       "num_tokens, embedding), json (one document) or npy "
                       "(float32 [N, D] to --out); selects the EmbedStream "
                       "mode also for --text/--ids")
          ->check(CLI::IsMember({"jsonl", "json", "npy"}));
  command
      ->add_option("--out", bulk->out,
                   "Output file of --input / --output-format (default: "
                   "stdout; required for npy)")
      ->type_name("FILE");
  command->add_flag("--progress", bulk->progress,
                    "Progress on stderr (inputs done, rate, ETA) even when "
                    "stderr is not a terminal");
  return {command, [=]() {
            size_t next_text = 0;
            size_t next_ids = 0;
            for (const CLI::Option* option : command->parse_order()) {
              if (option == text) {
                options->inputs.emplace_back().set_text((*texts)[next_text++]);
              } else if (option == ids) {
                std::vector<int64_t> values;
                std::string error;
                if (!ParseIntList((*id_lists)[next_ids++], &values, &error)) {
                  PrintError("--ids: " + error);
                  return kExitUsage;
                }
                auto* input =
                    options->inputs.emplace_back().mutable_token_ids();
                for (int64_t id : values) input->add_ids(id);
              }
            }
            if (normalize->count() > 0) options->normalize = true;
            if (no_normalize->count() > 0) options->normalize = false;
            if (input->count() > 0 || output_format->count() > 0) {
              if (options->token_embeddings || !layers->empty() ||
                  options->attention_stats || !hidden->empty()) {
                PrintError(
                    "--input and --output-format write pooled embeddings "
                    "only; --tokens, --attention-*, --hidden-states are for "
                    "--text/--ids");
                return kExitUsage;
              }
              if (input->count() == 0 && options->inputs.empty()) {
                PrintError("embed needs --input, --text or --ids");
                return kExitUsage;
              }
              bulk->embed = *options;
              for (const encoder::v1::Input& one : options->inputs) {
                bulk->inputs.emplace_back().input = one;
              }
              return RunBulkEmbed(*connection, *bulk);
            }
            if (options->inputs.empty()) {
              PrintError("embed needs at least one --text, --ids or --input");
              return kExitUsage;
            }
            if (!ParseInt32Flag("--attention-layers", *layers,
                                &options->attention_layers) ||
                !ParseInt32Flag("--attention-heads", *heads,
                                &options->attention_heads) ||
                !ParseInt32Flag("--hidden-states", *hidden,
                                &options->hidden_states)) {
              return kExitUsage;
            }
            return RunEmbed(*connection, *options);
          }};
}

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

int Main(int argc, char** argv) {
  CLI::App app(
      "Command-line client of the encoder.v1.EncoderService gRPC server.",
      "encoder-client");
  app.require_subcommand(1);
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
