// Every positional scheme, one file each (model/positional/<scheme>.cc):
// its entry (traits and layer) and the config that selects it, which the
// checkpoint importers (model/hf/) use instead of naming the type. A new
// scheme is its file, a SchemeType value (scheme.h), a line here and one in
// traits.cc's list.
#ifndef ENCODER_SERVER_MODEL_POSITIONAL_SCHEMES_H_
#define ENCODER_SERVER_MODEL_POSITIONAL_SCHEMES_H_

#include <cstdint>

#include "server/model/positional/positional.h"
#include "server/model/positional/scheme.h"

namespace encoder::model {

// The entry of `type` (traits.cc).
const SchemeEntry& SchemeEntryOf(SchemeType type);

// No positions: a bag of tokens (the order is seen only with causal masks).
const SchemeEntry& NoneEntry();
PositionalConfig NoneConfig();

// Vaswani et al.'s sinusoids added to the input.
const SchemeEntry& SinusoidalEntry();
PositionalConfig SinusoidalConfig(SinusoidalLayout layout,
                                  SinusoidalDenominator denominator,
                                  double base);

// A trained table added to the input (BERT); bounds the input length.
const SchemeEntry& LearnedEntry();
PositionalConfig LearnedConfig();

// Rotary codes on queries and keys (RoFormer, Llama, Qwen, ModernBERT).
const SchemeEntry& RopeEntry();
PositionalConfig RopeConfig(RopeLayout layout, double base);

// ALiBi's linear distance penalty on the logits (bidirectional).
const SchemeEntry& AlibiEntry();
PositionalConfig AlibiConfig();

// T5's relative buckets on the logits, one table shared by every layer.
const SchemeEntry& RelativeEntry();
PositionalConfig RelativeConfig(int64_t num_buckets, int64_t max_distance);

// MPNet: a learned table at the input and T5 buckets on the logits.
const SchemeEntry& LearnedRelativeEntry();
PositionalConfig LearnedRelativeConfig(int64_t num_buckets,
                                       int64_t max_distance);

// DeBERTa-v2/v3 disentangled attention.
const SchemeEntry& DisentangledEntry();
PositionalConfig DisentangledConfig();

}  // namespace encoder::model

#endif  // ENCODER_SERVER_MODEL_POSITIONAL_SCHEMES_H_
