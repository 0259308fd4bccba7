// Named models: the built-in defaults (one per positional scheme) and a
// repository file that defines models and points at weights.
#ifndef ENCODER_SERVER_MODEL_WEIGHTS_MODEL_REPOSITORY_H_
#define ENCODER_SERVER_MODEL_WEIGHTS_MODEL_REPOSITORY_H_

#include <ATen/ATen.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "server/common/long_input_policy.h"
#include "server/model/colbert_framing.h"
#include "server/model/config.h"
#include "server/model/encoder.h"
#include "server/model/rerank_template.h"

namespace encoder::model {

// A repository entry's "batching" object: each set field replaces the
// server's flag of the same name for that model.
struct BatchingOverrides {
  std::optional<int64_t> max_batch_sequences;
  std::optional<int64_t> max_batch_tokens;
  std::optional<int64_t> max_queue_delay_us;
  std::optional<int64_t> max_queued_sequences;
  std::optional<int64_t> max_batch_memory_bytes;
  std::optional<int64_t> executions;    // batches running at once, >= 1
  std::optional<int64_t> max_batch_ms;  // expected time per batch; 0: none
};

// The prompt name TEI's --default-prompt text is served under.
inline constexpr char kForcedPromptName[] = "default-prompt";

// How text inputs become token ids for a model.
struct ModelSpec {
  std::string name;
  // For a Hugging Face checkpoint (model_dir set), filled in by LoadModel.
  ModelConfig config;
  // Hugging Face checkpoint directory; empty: a native model (config above,
  // weights_path or seed below).
  std::string model_dir;
  std::string family = "native";  // or the checkpoint's family
  // Checkpoint pooling / normalization overrides (else the
  // sentence-transformers files' choice, else mean without normalization).
  std::optional<Pooling> pooling;
  std::optional<bool> normalize;
  std::string weights_path;  // safetensors; empty: random from `seed`
  uint64_t seed = 0;
  // tokenizer.json or a directory; empty: the checkpoint directory's own
  // tokenizer files for a checkpoint, else the byte tokenizer (see
  // runner::LoadModelTokenizer).
  std::string tokenizer_path;
  // Per-model batching overrides (the entry's "batching" object); the
  // model layer only carries them.
  BatchingOverrides batching;
  // The longest input Diagnose's extrapolation probe runs on this model;
  // 0: the server's --max-extrapolation-tokens.
  int64_t max_extrapolation_tokens = 0;
  // What inputs past the model's length get when a request names no
  // policy; unset: the server's --long-input.
  std::optional<LongInputPolicy> long_input;
  // "int8" or "none"; empty: the server's --quantize.
  std::string quantize;
  // Text prompts by name, prepended to text inputs that ask for one
  // (EmbedRequest.prompt_name) or to every text input when
  // default_prompt_name is set. A checkpoint's come from its
  // config_sentence_transformers.json; the repository entry's "prompts" and
  // "default_prompt_name" replace them.
  std::map<std::string, std::string> prompts;
  std::string default_prompt_name;
  // False: the checkpoint pools without its prompt tokens
  // (sentence-transformers' include_prompt); the prompt's tokens are then
  // left out of the pooling.
  bool include_prompt = true;
  // Strip every text's leading and trailing whitespace before tokenizing,
  // as sentence-transformers up to 5.3 did (5.4 on do not): the repository
  // entry's "strip_text", else the server's --strip-text.
  std::optional<bool> strip_text;
  // A checkpoint's rotary scaling replaced at load: a JSON object as
  // config.json's rope_parameters holds it ({"rope_type": "yarn",
  // "factor": 4, ...}; {"rope_type": "default"} removes a scaling), from
  // the entry's "rope_scaling" or --rope-scaling NAME=JSON; empty: the
  // checkpoint's own.
  std::string rope_scaling;
  // How Rerank reads a query and a document on this model (an
  // instruction-following reranker such as Qwen3-Reranker): the entry's
  // "rerank_template" or --rerank-template NAME=TEMPLATE; unset: the
  // tokenizer's pair template.
  std::optional<RerankTemplate> rerank_template;
  // A PyLate ColBERT checkpoint's query and document framing (read at
  // load; its config_sentence_transformers.json).
  std::optional<ColbertFraming> colbert;
  bool prompts_set = false;  // the repository entry gave "prompts"
  // TEI's --default-prompt-name (a name among the checkpoint's prompts)
  // and --default-prompt (a text, added to the prompts as
  // "default-prompt"): applied by LoadModel once the checkpoint's prompts
  // are read; a name the checkpoint lacks fails the load.
  std::optional<std::string> forced_default_prompt_name;
  std::optional<std::string> forced_default_prompt;
  // A checkpoint's sentence-transformers do_lower_case: its tokenizer
  // lowercases every text first (runner::LoadModelTokenizer).
  bool lowercase = false;
  // Keys of the checkpoint's JSON files that nothing here reads or
  // classifies, as "file: key" (logged as a warning at start-up).
  std::vector<std::string> unread_config_keys;
};

struct Repository {
  std::vector<ModelSpec> models;
  std::string default_model;
  // Other names requests may give a model: alias -> model name.
  std::map<std::string, std::string> aliases;
  // A request naming no served model (nor alias) is refused even when one
  // model is served; false: a lone model serves every name, as
  // text-embeddings-inference does (OpenAI clients send their own names).
  bool strict_names = false;
};

// One model per scheme, named after it ("none", "sinusoidal", "learned",
// "rope", "alibi", "relative"), with the default hyper-parameters (vocab
// 10000, width 512, 8 heads, feed-forward 2048, 4 layers), seeded
// deterministically (docs/positional-encodings.md#built-in-models). The
// default model is "sinusoidal".
Repository BuiltinRepository();

// Parses a repository file:
// {"default_model": "name",            // optional: the first model
//  "models": [{"name": "...",
//              "config": {...} | "config_file": "path.json",
//              "weights": "path.safetensors",   // optional
//              "seed": 7,                       // optional
//              "tokenizer": "tokenizer.json",   // optional (or a directory)
//              "batching": {"max_batch_sequences": 16, ...},
//              "max_extrapolation_tokens": 4096,  // optional
//              "long_input": "auto",              // optional
//              "quantize": "int8"},               // optional: or "none"
//             {"name": "...", "path": "hf-checkpoint-dir",
//              "pooling": "cls", "normalize": true,     // optional
//              "batching": {...}, "quantize": "int8",   // optional
//              "max_extrapolation_tokens": 1024}]}      // optional
// Relative paths are resolved against the repository file's directory.
// Errors name the model and the field.
absl::StatusOr<Repository> ParseRepository(const std::string& json_text,
                                           const std::string& base_dir);
absl::StatusOr<Repository> ReadRepository(const std::string& path);

// A rerank template from its text: a built-in name ("qwen3-reranker") or
// a JSON object {"prefix", "body", "suffix", "instruction", "yes", "no"}
// (body required; "base": a built-in name whose fields the others
// replace). INVALID_ARGUMENT naming what is wrong.
absl::StatusOr<RerankTemplate> ParseRerankTemplate(const std::string& text);

// A spec for `--model-dir DIR` or `--model-dir NAME=DIR`: the name
// defaults to the directory's base name.
absl::StatusOr<ModelSpec> ModelDirSpec(const std::string& flag);

// Builds the encoder for a spec: reads its weights (or draws them from the
// seed), checks them against the config, moves them to the device. For a
// checkpoint directory, `resolved` (when given) receives the spec completed
// from the checkpoint (config, family, pooling).
absl::StatusOr<std::unique_ptr<Encoder>> LoadModel(
    const ModelSpec& spec, at::Device device, at::ScalarType dtype,
    ModelSpec* resolved = nullptr);

}  // namespace encoder::model

#endif  // ENCODER_SERVER_MODEL_WEIGHTS_MODEL_REPOSITORY_H_
