// A causal language model that ranks by its answer (Qwen3-Reranker: "yes"
// or "no" after the rerank template, model::RerankTemplate): the rows of
// its language-model head for the two answer tokens, served as a one-logit
// classification head on the last position. Its logit h . (W[yes] - W[no])
// is the difference of the two answer logits, so its sigmoid is the
// softmax over the two: the probability of "yes".
#ifndef ENCODER_SERVER_MODEL_HF_ANSWER_HEAD_H_
#define ENCODER_SERVER_MODEL_HF_ANSWER_HEAD_H_

#include <string>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "server/model/encoder.h"
#include "server/model/weights/weight_source.h"

namespace encoder::model::hf {

// The answer head of the checkpoint in `dir` (its tokenizer.json names the
// ids of `yes` and `no`): lm_head.weight where stored, else the token
// embedding table `embedding_name` when config.json ties the two
// (tie_word_embeddings, each family's default where absent). In `dtype`
// on the CPU. INVALID_ARGUMENT naming the file or key for a family whose
// logits are not plain products (Gemma 3's soft-capping), an answer token
// the tokenizer lacks or outside the vocabulary, or no head to read.
absl::StatusOr<ScoreHead> LoadAnswerHead(
    const std::string& dir, const nlohmann::json& config,
    const std::string& family, WeightSource& source,
    const std::string& embedding_name, int64_t d_model, int64_t vocab,
    const std::string& yes, const std::string& no, at::ScalarType dtype);

}  // namespace encoder::model::hf

#endif  // ENCODER_SERVER_MODEL_HF_ANSWER_HEAD_H_
