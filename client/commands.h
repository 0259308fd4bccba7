// The unary subcommands: embed, models and diagnose. Each sends one RPC,
// prints the response as indented JSON on stdout and returns a process exit
// code (see errors.h); failures are reported on stderr.
#ifndef ENCODER_CLIENT_COMMANDS_H_
#define ENCODER_CLIENT_COMMANDS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "client/connection.h"
#include "encoder/v1/encoder.pb.h"

namespace encoder_client {

struct EmbedOptions {
  std::string model;                       // empty: the server's default model
  std::vector<encoder::v1::Input> inputs;  // in command-line order
  std::string pooling;                     // "", "mean" or "first"
  std::optional<bool> normalize;           // unset: the model's default
  bool token_embeddings = false;
  bool project_tokens = false;  // through the model's token projection
  std::string input_type;       // "query" / "document": a ColBERT framing
  std::vector<int32_t> attention_layers;  // empty: no attention maps
  std::vector<int32_t> attention_heads;   // empty: all heads
  bool average_heads = false;
  bool attention_stats = false;
  std::vector<int32_t> hidden_states;  // layers; negative from the end
  bool pool_hidden_states = false;
  // --truncate / --no-truncate: cut or refuse inputs past the model's
  // length; neither: the server's default for the model.
  bool truncate = false;
  bool no_truncate = false;
  std::string prompt_name;            // one of the model's prompts
  std::optional<std::string> prompt;  // a prompt text of the caller's
  // Long inputs in windows (LongInput chunking).
  bool chunk = false;
  bool late_chunk = false;  // the whole input run once, windows pooled
  int32_t chunk_overlap = 0;
  std::string chunk_aggregation = "mean";  // or "max"
  int32_t chunk_tokens = 0;                // 0: the model's length
  bool return_chunks = false;
  std::string embedding_type = "float";  // or "binary", "ubinary"
  bool extrapolate = false;  // run them whole past the model's length
};

// The EmbedRequest `options` describe.
encoder::v1::EmbedRequest BuildEmbedRequest(const EmbedOptions& options);

int RunEmbed(const ConnectionOptions& connection, const EmbedOptions& options);

int RunModels(const ConnectionOptions& connection);

struct DiagnoseOptions {
  std::string model;
  // Exactly one input source: text, ids, or a seeded random sequence.
  std::optional<std::string> text;
  std::optional<std::vector<int64_t>> ids;
  int32_t random_length = 0;  // > 0 selects the random input
  uint64_t seed = 0;
  // Probe names: permutation, shift, structure, attention_stats. Empty:
  // the server runs all of them.
  std::vector<std::string> probes;
  std::vector<int32_t> permutation_order;  // empty: seeded random
  uint64_t permutation_seed = 0;
  int64_t shift_offset = 0;         // 0: server default
  int32_t structure_positions = 0;  // 0: server default
  bool attention_maps = false;
  double tolerance = 0.0;  // 0: server default
  // The extrapolation probe (alone unless probes are named too).
  bool extrapolation = false;
  std::vector<int32_t> extrapolation_lengths;  // empty: the server's grid
  double max_multiple = 0;                     // 0: server default (2)
  int32_t points = 0;                          // 0: server default (6)
  int32_t prefix_length = 0;                   // 0: server default
};

// The DiagnoseRequest `options` describe. Unknown probe names are ignored
// (the command line only admits known ones).
encoder::v1::DiagnoseRequest BuildDiagnoseRequest(
    const DiagnoseOptions& options);

int RunDiagnose(const ConnectionOptions& connection,
                const DiagnoseOptions& options);

}  // namespace encoder_client

#endif  // ENCODER_CLIENT_COMMANDS_H_
