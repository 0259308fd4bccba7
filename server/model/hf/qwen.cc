// Qwen2 and Qwen3, as in transformers' modeling_qwen2 and modeling_qwen3:
// decoder-only embedders. Causal attention, rotary codes (half layout) with
// the checkpoint's rope_theta, grouped-query attention, RMSNorm before
// attention and feed-forward and at the end, a SwiGLU feed-forward, no
// embedding norm. Qwen2 biases its q, k and v projections; Qwen3 biases
// none (attention_bias) and RMS-normalizes each head's queries and keys.
// The pooled vector is the last token's, the one that has seen the whole
// input (Qwen3-Embedding's sentence-transformers files say so too).
// Sliding-window layers (use_sliding_window, layer_types) are served.
#include <optional>
#include <vector>

#include "server/common/status_macros.h"
#include "server/model/hf/decoder.h"

namespace encoder::model::hf {
namespace {

// transformers' Qwen2Config / Qwen3Config: sliding_window counts only with
// use_sliding_window; layer_types, else the layers from max_window_layers
// on, slide.
absl::StatusOr<std::vector<int64_t>> QwenWindows(const nlohmann::json& config,
                                                 const ConfigReader& r) {
  ASSIGN_OR_RETURN(const int64_t layers, r.Int("num_hidden_layers"));
  std::optional<int64_t> window;
  if (r.BoolOr("use_sliding_window", false)) {
    ASSIGN_OR_RETURN(window, ReadSlidingWindow(config, 4096));
  }
  if (r.Has("layer_types")) {
    return WindowsFromLayerTypes(config, layers, window);
  }
  std::vector<int64_t> windows;
  if (!window.has_value()) return windows;
  const int64_t first = r.IntOr("max_window_layers", 28);
  for (int64_t i = 0; i < layers; ++i) {
    windows.push_back(i >= first ? *window : 0);
  }
  return windows;
}

absl::StatusOr<Import> ImportQwen(const nlohmann::json& config,
                                  const WeightSource& source, bool qwen3) {
  ConfigReader r(config);
  DecoderLayout layout;
  layout.family = qwen3 ? "qwen3" : "qwen2";
  if (qwen3) {
    layout.default_head_dim = 128;  // Qwen3Config's default
    layout.qkv_bias = layout.out_bias = r.BoolOr("attention_bias", false);
    layout.qk_norm = true;
  } else {
    // Qwen2Attention: biased q, k and v always, no output bias;
    // getattr(config, "head_dim", hidden / heads).
    layout.qkv_bias = true;
  }
  ASSIGN_OR_RETURN(layout.windows, QwenWindows(config, r));
  return ImportDecoder(config, source, layout);
}

}  // namespace

absl::StatusOr<Import> ImportQwen2(const nlohmann::json& config,
                                   const WeightSource& source) {
  return ImportQwen(config, source, /*qwen3=*/false);
}

absl::StatusOr<Import> ImportQwen3(const nlohmann::json& config,
                                   const WeightSource& source) {
  return ImportQwen(config, source, /*qwen3=*/true);
}

}  // namespace encoder::model::hf
