// The sequence classification heads of Hugging Face checkpoints
// (transformers' *ForSequenceClassification, sentence-transformers'
// CrossEncoder): which tensors each family's head has, how it pools, its
// labels (id2label) and how its logits become scores.
#ifndef ENCODER_SERVER_MODEL_HF_HEADS_H_
#define ENCODER_SERVER_MODEL_HF_HEADS_H_

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "server/model/config.h"
#include "server/model/encoder.h"
#include "server/model/hf/sentence_transformers.h"
#include "server/model/weights/weight_source.h"

namespace encoder::model::hf {

// One head layer as stored: `weight` [out, in], `bias` (empty: none), the
// activation after it, and a LayerNorm after that (`norm` empty: none).
struct HeadLayerSource {
  std::string weight, bias;
  DenseLayer::Act act = DenseLayer::Act::kIdentity;
  std::string norm_weight, norm_bias;
  double norm_eps = 1e-5;
};

struct HeadSource {
  Pooling pooling = Pooling::kFirst;
  std::vector<HeadLayerSource> layers;
  std::vector<std::string> labels;
  ScoreActivation activation = ScoreActivation::kSigmoid;
  int64_t pad_id = -1;  // ScoreHead::pad_id
  // Every tensor name the head reads.
  std::vector<std::string> tensors() const;
};

// The head `source` stores for a checkpoint of `family`, or nullopt when
// it stores none (an embedding model). INVALID_ARGUMENT for a head whose
// shapes, labels or activation do not fit `d_model` and the config,
// naming the tensor or key.
absl::StatusOr<std::optional<HeadSource>> FindScoreHead(
    const nlohmann::json& config, const std::string& family,
    const WeightSource& source, int64_t d_model);

// The head's tensors loaded in `dtype` (on the CPU).
absl::StatusOr<ScoreHead> LoadScoreHead(const HeadSource& head,
                                        WeightSource& source,
                                        at::ScalarType dtype);

// The masked-LM head of a SPLADE checkpoint: the transform layers, then
// the decoder onto the vocabulary (`decoder_weight` empty: tied to the
// token embedding table).
struct SparseHeadSource {
  std::vector<HeadLayerSource> layers;  // the last is the decoder
  bool tied = false;
  bool max = true;
  bool double_log = false;
  std::vector<std::string> tensors() const;
};

// The masked-LM head `source` stores for `family`, served as a sparse
// (SPLADE) head when the checkpoint declares one: sentence-transformers'
// SpladePooling (`splade`), or a *ForMaskedLM architecture in config.json.
// `embedding_name` is the stored token embedding table the encoder uses
// (empty: none usable), which an untied decoder must not need. nullopt
// when there is none; INVALID_ARGUMENT when `splade` declares one that
// does not fit (an undeclared head that does not fit is not served).
absl::StatusOr<std::optional<SparseHeadSource>> FindSparseHead(
    const nlohmann::json& config, const std::string& family,
    const WeightSource& source, int64_t d_model, int64_t vocab,
    const std::string& embedding_name,
    const std::optional<SpladeFiles>& splade);

absl::StatusOr<SparseHead> LoadSparseHead(const SparseHeadSource& head,
                                          WeightSource& source,
                                          at::ScalarType dtype);

}  // namespace encoder::model::hf

#endif  // ENCODER_SERVER_MODEL_HF_HEADS_H_
