// Models and inputs the encoder's tests share (encoder_test.cc,
// encoder_precision_test.cc): small configurations of every scheme and of
// the Hugging Face families' architectures, and padded batches.
#ifndef ENCODER_TESTS_MODEL_ENCODER_CONFIGS_H_
#define ENCODER_TESTS_MODEL_ENCODER_CONFIGS_H_

#include <ATen/ATen.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "server/model/config.h"
#include "server/model/encoder.h"

namespace encoder::model {

inline ModelConfig SmallConfig(SchemeType type) {
  ModelConfig c;
  c.vocab_size = 300;
  c.d_model = 32;
  c.num_heads = 4;
  c.num_layers = 2;
  c.d_ff = 64;
  c.max_positions = 40;
  c.positional.type = type;
  return c;
}

inline double MaxAbs(const at::Tensor& t) {
  return t.numel() == 0 ? 0.0 : t.abs().max().item<double>();
}

inline const std::vector<SchemeType> kAllSchemes = {
    SchemeType::kNone, SchemeType::kSinusoidal, SchemeType::kLearned,
    SchemeType::kRope, SchemeType::kAlibi,      SchemeType::kRelative};

// A causal decoder embedder: pre-norm RMSNorm, half-layout RoPE, SwiGLU,
// 4 query heads over 2 key/value heads; Qwen3 with per-head q/k norms and
// head_dim 10 (wider heads than d_model / heads), Qwen2 with q/k/v biases
// and no output bias.
inline ModelConfig QwenLike(bool qwen3) {
  ModelConfig c = SmallConfig(SchemeType::kRope);
  c.positional.rope_layout = RopeLayout::kHalf;
  c.norm_first = true;
  c.activation = Activation::kSilu;
  c.arch.norm = NormKind::kRmsNorm;
  c.arch.norm_bias = false;
  c.arch.gated_ffn = true;
  c.arch.ffn_in_bias = c.arch.ffn_out_bias = false;
  c.arch.causal = true;
  c.arch.num_kv_heads = 2;
  if (qwen3) {
    c.arch.head_dim = 10;
    c.arch.attention_bias = false;
    c.arch.qk_norm = true;
  } else {
    c.arch.attention_out_bias = false;
  }
  return c;
}

// Disentangled attention: v3's log buckets over shared position keys and
// a normed table; v2's own position projections, a content-to-position
// term only, distances clamped at 6 and a learned table at the input.
inline ModelConfig DebertaLike(bool v3) {
  ModelConfig c = SmallConfig(SchemeType::kDisentangled);
  c.arch.embedding_norm = true;
  PositionalConfig& p = c.positional;
  if (v3) {
    p.position_buckets = 8;
    p.max_relative_positions = 20;
  } else {
    p.position_buckets = 0;
    p.max_relative_positions = 6;
    p.share_att_key = false;
    p.p2c = false;
    p.relative_norm = false;
    p.absolute_input = true;
  }
  return c;
}

// A padded batch of `lengths`; with `holes`, each row's second position is
// masked out too (a mask that is not a prefix).
inline EncoderInput Padded(const std::vector<int64_t>& lengths,
                           bool holes = false) {
  const int64_t b = static_cast<int64_t>(lengths.size());
  const int64_t s = *std::max_element(lengths.begin(), lengths.end());
  EncoderInput in;
  in.ids = at::randint(3, 290, {b, s}, at::kLong);
  in.mask = at::zeros({b, s}, at::kBool);
  for (int64_t i = 0; i < b; ++i) {
    in.mask[i].narrow(0, 0, lengths[i]).fill_(true);
    if (holes && lengths[i] > 2) in.mask[i][1] = false;
  }
  return in;
}

// Architectures whose token-wise work differs: every scheme post-norm, and
// the Hugging Face families' variants (pre-norm RMSNorm with a gated
// feed-forward and no biases, a sliding window and no first attention
// norm, BERT's embedding norm with RoBERTa's position ids).
inline std::vector<std::pair<std::string, ModelConfig>> PackingConfigs() {
  std::vector<std::pair<std::string, ModelConfig>> configs;
  for (SchemeType type : kAllSchemes) {
    configs.emplace_back(SchemeName(type), SmallConfig(type));
  }
  ModelConfig t5 = SmallConfig(SchemeType::kRelative);
  t5.norm_first = true;
  t5.arch.norm = NormKind::kRmsNorm;
  t5.arch.norm_bias = false;
  t5.arch.attention_bias = t5.arch.ffn_in_bias = t5.arch.ffn_out_bias = false;
  t5.arch.gated_ffn = true;
  t5.activation = Activation::kGeluTanh;
  configs.emplace_back("t5-like", t5);
  ModelConfig modern = SmallConfig(SchemeType::kRope);
  modern.norm_first = true;
  modern.arch.first_layer_attention_norm = false;
  modern.arch.layer_window = {3, 0};
  modern.arch.gated_ffn = true;
  configs.emplace_back("modernbert-like", modern);
  ModelConfig roberta = SmallConfig(SchemeType::kLearned);
  roberta.arch.embedding_norm = true;
  roberta.arch.token_type_embedding = true;
  roberta.arch.type_vocab_size = 1;
  roberta.arch.position_ids = PositionIdRule::kAfterPadding;
  roberta.arch.padding_idx = 1;
  roberta.max_positions = 45;
  configs.emplace_back("roberta-like", roberta);
  configs.emplace_back("deberta-v3-like", DebertaLike(/*v3=*/true));
  configs.emplace_back("deberta-v2-like", DebertaLike(/*v3=*/false));
  configs.emplace_back("qwen3-like", QwenLike(/*qwen3=*/true));
  configs.emplace_back("qwen2-like", QwenLike(/*qwen3=*/false));
  return configs;
}

}  // namespace encoder::model

#endif  // ENCODER_TESTS_MODEL_ENCODER_CONFIGS_H_
