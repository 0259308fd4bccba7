// What a positional scheme implies, asked by every other layer instead of
// switching on its type: its name, whether a table bounds the input, how
// it scales the scores, what structure the probes expect, how far it
// reaches, and how its config is read and checked. Plain data and function
// pointers, no LibTorch: each scheme registers its traits beside its
// implementation (model/positional/<scheme>.cc, listed in schemes.h).
#ifndef ENCODER_SERVER_MODEL_POSITIONAL_TRAITS_H_
#define ENCODER_SERVER_MODEL_POSITIONAL_TRAITS_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "server/model/positional/reach.h"
#include "server/model/positional/scheme.h"

namespace encoder::model {

struct ModelConfig;

// The positional structure the probes look for (diagnostics/structure.h).
enum class ExpectedStructure {
  kNone,             // no position at all
  kAdditive,         // a code added to the input: its Gram matrix
  kRotary,           // rotated queries and keys: relative by construction
  kBias,             // a bias on the logits, by distance
  kAdditiveAndBias,  // a table at the input and a bias beside it
  kDisentangled,     // content-to-position and position-to-content terms
};

struct SchemeTraits {
  SchemeType type = SchemeType::kNone;
  std::string_view name;  // "rope", as configs, ListModels and metrics say
  // A built-in model of its own (random weights, model_repository.h).
  bool builtin = false;
  // Rotates queries and keys (the shift probe's float32 tolerance is
  // wider: its angles are rounded per position).
  bool rotary = false;
  // Adds a T5 bucket bias to the attention logits.
  bool relative_buckets = false;
  // Its code at p + k is a fixed linear map of its code at p (sinusoidal),
  // which the structure probe computes instead of fitting.
  bool closed_form_shift = false;
  ExpectedStructure structure = ExpectedStructure::kNone;
  // The config's "layout" values it takes, "a|b"; empty: none.
  std::string_view layouts;
  // Whether a learned table bounds the input at max_positions (null:
  // never).
  bool (*table_bounds_length)(const PositionalConfig&) = nullptr;
  // The factor under the scores' square root beside head_dim (null: 1).
  int64_t (*score_scale_factor)(const PositionalConfig&) = nullptr;
  // Rows every query and key is multiplied against per position term of
  // its content bias (disentangled attention: 2 x span); null: none.
  int64_t (*content_bias_rows)(const PositionalConfig&) = nullptr;
  // Sets the layout named `layout` (one of `layouts`).
  void (*set_layout)(std::string_view layout, PositionalConfig*) = nullptr;
  // The scheme's own checks of a config (ValidateConfig runs them);
  // InvalidArgument naming the field. Null: none.
  absl::Status (*validate)(const ModelConfig&) = nullptr;
  // Fills the scheme's part of the reach (alibi windows, bucket
  // saturation, wavelengths, distance_only_reason). Null: nothing.
  void (*reach)(const ModelConfig&, SchemeReach*) = nullptr;
};

// The traits of a scheme; every SchemeType has them.
const SchemeTraits& Traits(SchemeType type);
// By name ("rope"); null when no scheme has it.
const SchemeTraits* FindScheme(std::string_view name);
// Every scheme, in SchemeType order.
const std::vector<const SchemeTraits*>& AllSchemes();
// "none, sinusoidal, ..." for messages.
std::string SchemeNameList();

}  // namespace encoder::model

#endif  // ENCODER_SERVER_MODEL_POSITIONAL_TRAITS_H_
