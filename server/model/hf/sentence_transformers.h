// The sentence-transformers files of a checkpoint directory: modules.json,
// the Pooling module's config (pooling_mode cls, mean, max,
// mean_sqrt_len_tokens, lasttoken, weightedmean, or the legacy
// pooling_mode_* booleans; include_prompt), Dense modules (safetensors
// weights and activation), Normalize, sentence_bert_config.json
// (max_seq_length, do_lower_case) and config_sentence_transformers.json
// (prompts).
#ifndef ENCODER_SERVER_MODEL_HF_SENTENCE_TRANSFORMERS_H_
#define ENCODER_SERVER_MODEL_HF_SENTENCE_TRANSFORMERS_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/model/config.h"
#include "server/model/encoder.h"

namespace encoder::model {

// A SpladePooling module (sentence-transformers' SparseEncoder): how the
// masked-LM logits are pooled into a sparse vector.
struct SpladeFiles {
  bool max = true;          // pooling_strategy "max" (else "sum")
  bool double_log = false;  // activation_function "log1p_relu"
};

struct SentenceTransformerFiles {
  bool present = false;  // modules.json exists
  Pooling pooling = Pooling::kMean;
  bool normalize = false;
  bool include_prompt = true;
  int64_t max_seq_length = 0;     // the tokenizer's length; 0: not set
  bool lowercase = false;         // do_lower_case
  std::vector<DenseLayer> dense;  // CPU, float32
  std::map<std::string, std::string> prompts;  // name -> text prepended
  std::string default_prompt_name;    // empty: none (a name in `prompts`)
  std::optional<SpladeFiles> splade;  // a SparseEncoder's pooling
  // Dense and Normalize modules on the token embeddings (module_input_name
  // "token_embeddings": a multi-vector, ColBERT-style model), in order.
  std::vector<DenseLayer> token_dense;  // CPU, float32
  bool normalize_tokens = false;
  // modules.json names one of PyLate's modules (a ColBERT model).
  bool pylate = false;
};

// Reads the files of `dir` (all absent: present = false). `hidden` is the
// transformer's width, checked against the pooling and dense dimensions.
// Errors name the file and the field.
absl::StatusOr<SentenceTransformerFiles> ReadSentenceTransformers(
    const std::string& dir, int64_t hidden);

}  // namespace encoder::model

#endif  // ENCODER_SERVER_MODEL_HF_SENTENCE_TRANSFORMERS_H_
