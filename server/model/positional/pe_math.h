// The pure math of the positional schemes
// (docs/positional-encodings.md#schemes), free of any model state so that
// each formula can be tested against its published values.
#ifndef ENCODER_SERVER_MODEL_POSITIONAL_PE_MATH_H_
#define ENCODER_SERVER_MODEL_POSITIONAL_PE_MATH_H_

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

#include "server/model/config.h"

namespace encoder::model {

// Angular frequencies w_i, i = 0..d/2-1, in float64.
std::vector<double> SinusoidalFrequencies(int64_t d_model, double base,
                                          SinusoidalDenominator denominator);

// PE(p) for positions [n] (int64, any device) -> [n, d_model] float64 on the
// same device. Angles are computed in float64 and cast by the caller.
at::Tensor SinusoidalCode(const at::Tensor& positions, int64_t d_model,
                          const PositionalConfig& config);

// RoPE frequencies theta_i = base^(-2i/head_dim), i = 0..head_dim/2-1,
// scaled as `scaling` says (its attention factor aside). `extent` is the
// sequence's extent (1 + its largest position) for the scalings that
// depend on it (dynamic, longrope); 0 reads as the unscaled context.
std::vector<double> RopeFrequencies(int64_t head_dim, double base,
                                    const RopeScaling& scaling = {},
                                    int64_t extent = 0);

// cos and sin of p * theta_i for positions [batch, seq] ->
// two tensors [batch, 1, seq, head_dim/2] of `dtype`, angles in float64,
// each times the scaling's attention factor. `extents` (one per row of
// positions, or empty) feed RopeFrequencies row by row when the scaling
// depends on the length.
std::pair<at::Tensor, at::Tensor> RopeCosSin(
    const at::Tensor& positions, int64_t head_dim, double base,
    at::ScalarType dtype, const RopeScaling& scaling = {},
    const std::vector<int64_t>& extents = {});

// Rotates x [..., seq, head_dim] by the angles (cos/sin broadcastable to
// [..., seq, head_dim/2]) in the given pair layout. Returns a new tensor.
at::Tensor RopeRotate(const at::Tensor& x, const at::Tensor& cos,
                      const at::Tensor& sin, RopeLayout layout);

// ALiBi slopes m_h for n heads (the paper's rule for non powers of two).
std::vector<double> AlibiSlopes(int64_t num_heads);

// T5 bidirectional bucket of relative distance r = key - query, with the
// logarithm in float32 as the reference implementation computes it.
int64_t RelativeBucket(int64_t relative_position, int64_t num_buckets,
                       int64_t max_distance);

// Elementwise RelativeBucket on an int64 tensor (any device).
at::Tensor RelativeBuckets(const at::Tensor& relative_positions,
                           int64_t num_buckets, int64_t max_distance);

// DeBERTa-v2's log bucket of relative distance r = query - key: r itself
// for |r| <= bucket_size / 2, else sign(r) (mid + ceil(log(|r| / mid) /
// log((max_position - 1) / mid) (mid - 1))), mid = bucket_size / 2, in
// float32 as transformers' make_log_bucket_position computes it.
// Elementwise on an int64 tensor (any device).
at::Tensor DebertaLogBuckets(const at::Tensor& relative_positions,
                             int64_t bucket_size, int64_t max_position);

}  // namespace encoder::model

#endif  // ENCODER_SERVER_MODEL_POSITIONAL_PE_MATH_H_
