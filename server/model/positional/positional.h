// The positional scheme: one interface with the three places where position
// enters a Transformer (input, query/key, attention logits). Each hook is a
// no-op by default; the attention code calls all three and never asks which
// scheme it runs.
//
// Positions are explicit int64 tensors [batch, seq], so a shift diagnostic is
// "positions + c". All hooks are const and thread-safe.
#ifndef ENCODER_SERVER_MODEL_POSITIONAL_POSITIONAL_H_
#define ENCODER_SERVER_MODEL_POSITIONAL_POSITIONAL_H_

#include <ATen/ATen.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/model/config.h"
#include "server/model/positional/description.h"
#include "server/model/positional/traits.h"

namespace encoder::model {

class PositionalScheme {
 public:
  virtual ~PositionalScheme() = default;

  // x: [batch, seq, d_model]; positions: [batch, seq] int64.
  // Returns x plus the positional code (a new tensor) or x itself.
  virtual at::Tensor AddToInput(const at::Tensor& x,
                                const at::Tensor& positions) const;

  // q, k: [batch, heads, seq, head_dim]; rotated in place of the handles.
  // `layer` is the encoder layer (schemes may vary by layer, e.g. a rotary
  // base for global and another for local-attention layers). `extents`:
  // each sequence's extent, 1 + its largest real position, when
  // depends_on_length() (else empty).
  virtual void RotateQk(at::Tensor& q, at::Tensor& k,
                        const at::Tensor& positions,
                        const std::vector<int64_t>& extents,
                        int64_t layer) const;
  // Whether RotateQk's angles depend on each sequence's extent (the
  // dynamic and longrope rotary scalings).
  virtual bool depends_on_length() const { return false; }

  // Additive bias for the scaled scores, [batch, heads, q_seq, k_seq] in the
  // given dtype, or an undefined tensor when the scheme adds none.
  virtual at::Tensor AttentionBias(const at::Tensor& query_positions,
                                   const at::Tensor& key_positions,
                                   at::ScalarType dtype) const;

  // A bias on the scaled scores that depends on the layer's queries and
  // keys (disentangled attention): q, k [batch, heads, seq, head_dim] as
  // projected (RotateQk has run) -> [batch, heads, seq, seq], already
  // divided by the score scale; undefined when the scheme has none.
  virtual at::Tensor ContentBias(const at::Tensor& q, const at::Tensor& k,
                                 const at::Tensor& positions,
                                 int64_t layer) const;
  // Whether ContentBias returns one.
  virtual bool has_content_bias() const { return false; }

  virtual SchemeDescription Describe() const = 0;

  // The scheme's own trained tensors, by state_dict name (learned table,
  // relative bias table); empty for parameter-free schemes.
  virtual std::map<std::string, at::Tensor> Parameters() const { return {}; }

  // The additive code PE(p) for positions [n] -> [n, d_model], for schemes
  // that add to the input; undefined otherwise. Used by diagnostics.
  virtual at::Tensor InputCode(const at::Tensor& positions) const {
    (void)positions;
    return {};
  }
};

// A scheme's two halves: what it implies (SchemeTraits, no LibTorch) and
// its layer. Each scheme's file (model/positional/<scheme>.cc) defines
// one; schemes.h lists them.
struct SchemeEntry {
  SchemeTraits traits;
  // The layer for `config`; `params` holds the scheme's trained tensors by
  // state_dict name, already checked for shape. Missing ones are an error.
  absl::StatusOr<std::unique_ptr<PositionalScheme>> (*make)(
      const ModelConfig& config,
      const std::map<std::string, at::Tensor>& params, at::Device device,
      at::ScalarType dtype) = nullptr;
  // Names and shapes of its trained tensors; null: none.
  std::map<std::string, std::vector<int64_t>> (*parameter_shapes)(
      const ModelConfig& config) = nullptr;
};

// The trained tensor `name` of `params` on `device` in `dtype`, or
// InvalidArgument naming it and the scheme.
absl::StatusOr<at::Tensor> SchemeParameter(
    const ModelConfig& config, const std::map<std::string, at::Tensor>& params,
    const std::string& name, at::Device device, at::ScalarType dtype);

// Builds the scheme for a config. `params` supplies trained tensors by
// state_dict name ("pos_embedding.weight", "relative_attention_bias.weight")
// already checked for shape by the caller; missing ones are an error.
absl::StatusOr<std::unique_ptr<PositionalScheme>> MakePositionalScheme(
    const ModelConfig& config, const std::map<std::string, at::Tensor>& params,
    at::Device device, at::ScalarType dtype);

// Names and shapes of the trained tensors a scheme needs.
std::map<std::string, std::vector<int64_t>> SchemeParameterShapes(
    const ModelConfig& config);

}  // namespace encoder::model

#endif  // ENCODER_SERVER_MODEL_POSITIONAL_POSITIONAL_H_
