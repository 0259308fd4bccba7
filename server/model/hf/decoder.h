// The rotary causal decoders that embed (Qwen2, Qwen3, Llama, Mistral), as
// transformers' modeling files of those families compute them: one shared
// body, each family naming what differs (biases, per-head q/k norms, head
// width default, which layers slide). A new family of this shape is one
// file that fills a DecoderLayout.
#ifndef ENCODER_SERVER_MODEL_HF_DECODER_H_
#define ENCODER_SERVER_MODEL_HF_DECODER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "server/model/hf/importer.h"

namespace encoder::model::hf {

struct DecoderLayout {
  std::string family;
  // head_dim when config.json has none (0: hidden_size / heads).
  int64_t default_head_dim = 0;
  int64_t default_max_positions = 32768;
  bool qkv_bias = false;  // q, k and v projections biased
  bool out_bias = false;  // the attention output projection biased
  bool mlp_bias = false;  // gate, up and down projections biased
  bool qk_norm = false;   // per-head RMSNorm of queries and keys
  // Per layer: the causal sliding window (a query sees itself and the
  // window - 1 keys before it), 0 for full attention; empty: all full.
  std::vector<int64_t> windows;
};

// The sizes every rotary decoder's config.json gives (vocab_size,
// hidden_size, num_attention_heads, num_hidden_layers, intermediate_size)
// and its key/value heads (num_key_value_heads, default: every head),
// which must divide the heads.
absl::Status ReadDecoderSizes(const ConfigReader& r, ModelConfig* c);

// The config's sliding window as transformers reads it: the key's value,
// `fallback` when the key is absent, none when it is null; refused unless
// a positive integer.
absl::StatusOr<std::optional<int64_t>> ReadSlidingWindow(
    const nlohmann::json& config, std::optional<int64_t> fallback);

// Per-layer windows from layer_types ("full_attention" /
// "sliding_attention", one per layer), each sliding layer taking
// `window`; anything else, or a sliding layer without a window, is
// refused by name.
absl::StatusOr<std::vector<int64_t>> WindowsFromLayerTypes(
    const nlohmann::json& config, int64_t layers,
    std::optional<int64_t> window);

// The decoder's ModelConfig and slots from config.json and the layout.
absl::StatusOr<Import> ImportDecoder(const nlohmann::json& config,
                                     const WeightSource& source,
                                     const DecoderLayout& layout);

}  // namespace encoder::model::hf

#endif  // ENCODER_SERVER_MODEL_HF_DECODER_H_
