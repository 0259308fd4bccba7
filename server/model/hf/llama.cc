// Llama and Mistral, as in transformers' modeling_llama and
// modeling_mistral, served as embedders (e5-mistral, LLM2Vec-style
// checkpoints): the rotary causal decoder of decoder.h. Llama biases its
// q, k, v and output projections when attention_bias says so and its
// feed-forward when mlp_bias does; Mistral biases nothing and, unless its
// sliding_window is null, every layer attends to a causal window
// (MistralConfig's default when the key is absent: 4096).
#include <optional>
#include <vector>

#include "server/common/status_macros.h"
#include "server/model/hf/decoder.h"

namespace encoder::model::hf {

absl::StatusOr<Import> ImportLlama(const nlohmann::json& config,
                                   const WeightSource& source) {
  ConfigReader r(config);
  DecoderLayout layout;
  layout.family = "llama";
  layout.default_max_positions = 2048;  // LlamaConfig's default
  layout.qkv_bias = layout.out_bias = r.BoolOr("attention_bias", false);
  layout.mlp_bias = r.BoolOr("mlp_bias", false);
  return ImportDecoder(config, source, layout);
}

absl::StatusOr<Import> ImportMistral(const nlohmann::json& config,
                                     const WeightSource& source) {
  ConfigReader r(config);
  DecoderLayout layout;
  layout.family = "mistral";
  layout.default_max_positions = 4096 * 32;  // MistralConfig's default
  ASSIGN_OR_RETURN(const std::optional<int64_t> window,
                   ReadSlidingWindow(config, 4096));
  if (window.has_value()) {
    ASSIGN_OR_RETURN(const int64_t layers, r.Int("num_hidden_layers"));
    layout.windows.assign(layers, *window);
  }
  return ImportDecoder(config, source, layout);
}

}  // namespace encoder::model::hf
