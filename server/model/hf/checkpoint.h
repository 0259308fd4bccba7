// Loads a Hugging Face checkpoint directory (config.json, safetensors
// weights, optional sentence-transformers files) into an Encoder. Every
// problem (unknown model_type, missing / unexpected / mis-shaped tensors,
// missing shard, inconsistent config) is an error before any weight is
// kept: never a half-loaded model.
#ifndef ENCODER_SERVER_MODEL_HF_CHECKPOINT_H_
#define ENCODER_SERVER_MODEL_HF_CHECKPOINT_H_

#include <ATen/ATen.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/model/colbert_framing.h"
#include "server/model/config.h"
#include "server/model/encoder.h"

namespace encoder::model {

struct CheckpointOverrides {
  std::optional<Pooling> pooling;  // else sentence-transformers' or mean
  std::optional<bool> normalize;   // else sentence-transformers' or false
  // A JSON object that replaces config.json's rotary scaling (ModelSpec's
  // rope_scaling); empty: the checkpoint's.
  std::string rope_scaling;
  // A rerank template's answer tokens (RerankTemplate::yes / no): a
  // causal language model without a classification head is scored by
  // its language-model head's rows for them (hf/answer_head.h); a
  // checkpoint with a head keeps it. Empty: none.
  std::string answer_yes, answer_no;
};

struct LoadedCheckpoint {
  std::string family;  // "bert", "roberta", "jinabert", "t5", ...
  ModelConfig config;  // with pooling, normalize, max_input_tokens settled
  std::unique_ptr<Encoder> encoder;
  int64_t stored_bytes = 0;  // floating-point weights as stored on disk
  // sentence-transformers' prompts (config_sentence_transformers.json).
  std::map<std::string, std::string> prompts;
  std::string default_prompt_name;
  bool include_prompt = true;  // the Pooling module's include_prompt
  // sentence_bert_config.json's do_lower_case: texts are lowercased before
  // the tokenizer's own normalizer.
  bool lowercase = false;
  // A PyLate ColBERT model's query and document framing.
  std::optional<ColbertFraming> colbert;
  // Keys of the directory's JSON files that no table classifies
  // (hf_config_keys.h), as "file: key": read by nothing here.
  std::vector<std::string> unread_keys;
};

// The model_type values config.json may name.
std::vector<std::string> SupportedModelTypes();

// Loads the whole checkpoint, converting weights to `dtype` on `device`.
absl::StatusOr<LoadedCheckpoint> LoadCheckpoint(
    const std::string& dir, const CheckpointOverrides& overrides,
    at::Device device, at::ScalarType dtype);

}  // namespace encoder::model

#endif  // ENCODER_SERVER_MODEL_HF_CHECKPOINT_H_
