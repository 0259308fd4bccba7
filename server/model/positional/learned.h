// The learned table (BERT's position embeddings) as a layer, for the
// schemes that contain one (learned, learned_relative, disentangled with an
// input table).
#ifndef ENCODER_SERVER_MODEL_POSITIONAL_LEARNED_H_
#define ENCODER_SERVER_MODEL_POSITIONAL_LEARNED_H_

#include <ATen/ATen.h>

#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/model/config.h"
#include "server/model/positional/positional.h"

namespace encoder::model {

// A trained table pos_embedding [P, D] added to the input; positions must be
// < P (the encoder rejects longer inputs before calling).
class LearnedScheme : public PositionalScheme {
 public:
  LearnedScheme(const ModelConfig& config, at::Tensor table)
      : max_positions_(config.max_positions), table_(std::move(table)) {}

  at::Tensor AddToInput(const at::Tensor& x,
                        const at::Tensor& positions) const override {
    return x + at::embedding(table_, positions);
  }
  at::Tensor InputCode(const at::Tensor& positions) const override {
    return at::embedding(table_, positions);
  }
  std::map<std::string, at::Tensor> Parameters() const override {
    return {{"pos_embedding.weight", table_}};
  }
  SchemeDescription Describe() const override {
    return {"learned",
            {{"table", absl::StrCat(max_positions_, "x", table_.size(1))}},
            {},
            /*extrapolates=*/false,
            max_positions_,
            {"input"}};
  }

 private:
  int64_t max_positions_;
  at::Tensor table_;  // [P, D]
};

}  // namespace encoder::model

#endif  // ENCODER_SERVER_MODEL_POSITIONAL_LEARNED_H_
