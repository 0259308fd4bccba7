// T5's relative buckets as a layer and their checks, for the schemes that
// contain them (relative, learned_relative).
#ifndef ENCODER_SERVER_MODEL_POSITIONAL_RELATIVE_H_
#define ENCODER_SERVER_MODEL_POSITIONAL_RELATIVE_H_

#include <ATen/ATen.h>

#include <map>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "server/model/config.h"
#include "server/model/positional/pe_math.h"
#include "server/model/positional/positional.h"

namespace encoder::model {

// bias_h(i, j) = table[bucket(j - i), h], shared by every layer.
class RelativeScheme : public PositionalScheme {
 public:
  RelativeScheme(const ModelConfig& config, at::Tensor table)
      : config_(config), table_(std::move(table)) {}

  at::Tensor AttentionBias(const at::Tensor& query_positions,
                           const at::Tensor& key_positions,
                           at::ScalarType dtype) const override {
    at::Tensor relative =
        key_positions.unsqueeze(-2) - query_positions.unsqueeze(-1);
    at::Tensor buckets =
        RelativeBuckets(relative, config_.positional.num_buckets,
                        config_.positional.max_distance);  // [B, Sq, Sk]
    return at::embedding(table_, buckets).permute({0, 3, 1, 2}).to(dtype);
  }

  std::map<std::string, at::Tensor> Parameters() const override {
    return {{"relative_attention_bias.weight", table_}};
  }

  SchemeDescription Describe() const override {
    return {"relative",
            {{"num_buckets", absl::StrCat(config_.positional.num_buckets)},
             {"max_distance", absl::StrCat(config_.positional.max_distance)},
             {"bidirectional", "true"},
             {"shared_across_layers", "true"}},
            {},
            /*extrapolates=*/true,
            config_.max_positions,
            {"logits"}};
  }

 private:
  ModelConfig config_;
  at::Tensor table_;  // [num_buckets, H]
};

// num_buckets even and >= 4, max_distance past num_buckets / 4.
absl::Status ValidateRelativeBuckets(const PositionalConfig& pc);

// The buckets' part of the reach: where they saturate.
void RelativeBucketsReach(const PositionalConfig& pc, SchemeReach* r);

}  // namespace encoder::model

#endif  // ENCODER_SERVER_MODEL_POSITIONAL_RELATIVE_H_
