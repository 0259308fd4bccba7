// encoder-client embed: one call, a stream, or a file of inputs.
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "client/cli_commands.h"
#include "client/commands.h"
#include "client/embed_stream.h"
#include "client/errors.h"
#include "client/inputs.h"

namespace encoder_client {

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
      command->add_flag("--normalize")
          ->description("L2-normalize the pooled embedding");
  CLI::Option* no_normalize =
      command->add_flag("--no-normalize")
          ->description("Do not normalize (default: the model's setting)");
  no_normalize->excludes(normalize);
  command->add_flag("--tokens", options->token_embeddings,
                    "Also return the token embeddings [S, D]");
  command->add_flag("--project-tokens", options->project_tokens,
                    "Token embeddings through a multi-vector model's token "
                    "projection (with --tokens)");
  command
      ->add_option("--input-type", options->input_type,
                   "query or document: a ColBERT model's framing, which "
                   "--project-tokens needs on one")
      ->check(CLI::IsMember({"query", "document"}));
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
  command
      ->add_flag("--truncate", options->truncate,
                 "Cut inputs longer than the model's limit")
      ->excludes(command->add_flag(
          "--no-truncate", options->no_truncate,
          "Refuse inputs longer than the model's limit (neither flag: the "
          "server's default for the model, truncate unless configured "
          "otherwise)"));
  CLI::Option* prompt_name = command->add_option(
      "--prompt-name", options->prompt_name,
      "Prepend the model's prompt of this name to every text (see "
      "'models'; default: the model's default prompt)");
  command
      ->add_option("--prompt", options->prompt,
                   "Prepend this text to every text input instead of a "
                   "prompt of the model's ('' for none)")
      ->excludes(prompt_name);
  CLI::Option* chunk = command->add_flag(
      "--chunk", options->chunk,
      "Embed inputs longer than the model accepts in windows of its length "
      "and aggregate them (instead of refusing or --truncate)");
  CLI::Option* late =
      command
          ->add_flag(
              "--late-chunk", options->late_chunk,
              "Run each input whole (past the model's length where its scheme "
              "allows) and pool every window from that one run")
          ->excludes(chunk);
  command
      ->add_option("--chunk-overlap", options->chunk_overlap,
                   "Tokens each window repeats from the one before")
      ->check(CLI::Range(0, 1 << 20));
  command
      ->add_option("--chunk-aggregation", options->chunk_aggregation,
                   "mean (weighted by each window's tokens) or max")
      ->check(CLI::IsMember({"mean", "max"}));
  command
      ->add_option("--chunk-tokens", options->chunk_tokens,
                   "Input tokens per window (0: the model's length)")
      ->check(CLI::Range(0, 1 << 20));
  command
      ->add_option("--embedding-type", options->embedding_type,
                   "float, binary / ubinary (pooled vectors as their sign "
                   "bits packed eight to a byte, int8 / uint8), or int8 / "
                   "uint8 (a byte per value within the call's own "
                   "per-dimension ranges)")
      ->check(CLI::IsMember({"float", "binary", "ubinary", "int8", "uint8"}));
  command->add_flag("--return-chunks", options->return_chunks,
                    "Also print every window's vector with its token and "
                    "character spans (chunkVectors)");
  command
      ->add_flag("--extrapolate", options->extrapolate,
                 "Run inputs longer than the model's length whole, past it, "
                 "where its positional scheme allows (not a learned table)")
      ->excludes(chunk)
      ->excludes(late);
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

}  // namespace encoder_client
