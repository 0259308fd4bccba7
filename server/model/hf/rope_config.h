// The rotary base and scaling of a Hugging Face config.json, read as
// transformers' rope initialization functions read them
// (docs/positional-encodings.md#rope-scaling). Shared by the rotary
// decoder families (Qwen2, Qwen3, Llama, Mistral).
#ifndef ENCODER_SERVER_MODEL_HF_ROPE_CONFIG_H_
#define ENCODER_SERVER_MODEL_HF_ROPE_CONFIG_H_

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/model/config.h"
#include "server/model/hf/importer.h"

namespace encoder::model::hf {

// transformers 5 writes rope_parameters {"rope_type", "rope_theta", the
// type's keys}; older configs rope_theta and rope_scaling {"type" or
// "rope_type", the type's keys}. Every type of transformers' rope
// initialization table is served (default, linear, dynamic, yarn,
// longrope, llama3, proportional); any other is refused by name, and so
// is a partial_rotary_factor other than 1. `max_positions` is the
// config's max_position_embeddings. Fills out->base and
// out->rope_scaling.
absl::Status ReadRope(const nlohmann::json& config, const ConfigReader& r,
                      int64_t max_positions, PositionalConfig* out);

// One layer type's rotary code (ModernBERT's and Gemma 3's full and
// sliding layers), read as ReadRope reads a rotary decoder's from
// {"rope_theta": base, "rope_parameters": params} and the top-level keys
// the scaled types read (partial_rotary_factor,
// original_max_position_embeddings). Null params: unscaled on `base`;
// params that are not an object are refused, naming
// rope_parameters.`key`.
absl::Status ReadLayerTypeRope(const nlohmann::json& config, const char* key,
                               const nlohmann::json& params, double base,
                               int64_t max_positions, PositionalConfig* out);

// A rope_scaling override as given: a JSON object with a string rope_type
// (an older "type" renamed to it); refused by name otherwise.
absl::StatusOr<nlohmann::json> ParseRopeOverride(const std::string& scaling);

// Replaces config.json's rotary scaling with `scaling`, a JSON object as
// rope_parameters holds it (its rope_type or type, the type's keys; the
// checkpoint's rope_theta and top-level original_max_position_embeddings
// when it gives none): rope_scaling is removed and rope_parameters set, so
// that ReadRope reads the override alone. {"rope_type": "default"}
// removes a scaling.
absl::Status OverrideRope(const std::string& scaling, nlohmann::json* config);

}  // namespace encoder::model::hf

#endif  // ENCODER_SERVER_MODEL_HF_ROPE_CONFIG_H_
