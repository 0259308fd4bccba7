// How an instruction-following reranker reads a query and a document: the
// prompt around them and, for a causal language model scored by its
// answer, the two answer tokens whose logits make the score
// (docs/rerank-classify-sparse.md#llm-rerankers). Plain data, no LibTorch.
#ifndef ENCODER_SERVER_MODEL_RERANK_TEMPLATE_H_
#define ENCODER_SERVER_MODEL_RERANK_TEMPLATE_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace encoder::model {

// A rerank sequence is prefix + body + suffix, each tokenized on its own
// and the ids joined: the prefix and suffix without special tokens, the
// body (with {instruction}, {query} and {document} replaced) with the
// tokenizer's own, cut from its end when the whole is over the model's
// length. A causal language model without a classification head is
// scored by its last position's logits of `yes` and `no` (vocabulary
// tokens): softmax over the two, the probability of `yes`, which equals
// the sigmoid of their difference.
struct RerankTemplate {
  std::string name;  // a built-in name, or "custom"
  std::string prefix;
  std::string body;
  std::string suffix;
  std::string instruction;  // {instruction} when a request gives none
  std::string yes, no;      // empty: the model's own head scores
};

// The built-in templates: "qwen3-reranker" (the Qwen3-Reranker model
// card's prompt and its "yes" / "no" answer).
std::vector<std::string> BuiltinRerankTemplateNames();
std::optional<RerankTemplate> BuiltinRerankTemplate(const std::string& name);

// `t.body` with its placeholders replaced (each occurrence; other braces
// stay as they are).
std::string FormatRerankBody(const RerankTemplate& t,
                             const std::string& instruction,
                             const std::string& query,
                             const std::string& document);

// INVALID_ARGUMENT unless the body names {query} and {document}, and
// `yes` and `no` are both set or both empty and differ.
absl::Status ValidateRerankTemplate(const RerankTemplate& t);

}  // namespace encoder::model

#endif  // ENCODER_SERVER_MODEL_RERANK_TEMPLATE_H_
