// A linear layer with int8 weights (one scale per output channel) and
// dynamic int8 activations, run by the library's oneDNN quantized kernels.
//
// The library's dynamic kernel picks one activation scale for the whole
// input tensor, which would make a sequence's result depend on the other
// sequences of its batch. So each row (token) is first divided by its own
// max |x|, and one fixed anchor row holding +1 and -1 is appended: the
// tensor's range is then exactly [-1, 1] whatever the batch holds, every
// row is quantized with its own effective scale, and the row's factor is
// multiplied back after the integer product. Results are bitwise the same
// for a row alone or in any batch.
//
// Without VNNI (or AMX) the kernels add pairs of u8 x s8 products in 16
// bits, which saturates when both operands use their full range (8% error
// measured on an AVX2 CPU). There the weights use 7 bits (-63..63,
// Int8WeightLevels) and the activations keep all 8: a pair then sums to at
// most 2 * 255 * 64 = 32640 < 2^15. Weights have one scale per output
// channel, so their lost bit costs less than the activations' would (on
// MiniLM's real weights: mean cosine 0.9949 against 0.9932 with 7-bit
// activations, BENCHMARKS.md).
#ifndef ENCODER_SERVER_MODEL_INT8_LINEAR_H_
#define ENCODER_SERVER_MODEL_INT8_LINEAR_H_

#include <ATen/ATen.h>
#include <ATen/core/ivalue.h>

#include "absl/status/statusor.h"

namespace encoder::model {

class Int8Linear {
 public:
  // weight [out, in] float32 on the CPU; bias [out] or undefined.
  // FailedPrecondition when this LibTorch build has no oneDNN quantized
  // engine.
  static absl::StatusOr<Int8Linear> Create(const at::Tensor& weight,
                                           const at::Tensor& bias);

  // x [..., in] float32 -> [..., out] float32. Thread-safe.
  at::Tensor Forward(const at::Tensor& x) const;

  int64_t in_features() const { return in_; }
  int64_t out_features() const { return out_; }

 private:
  Int8Linear() = default;

  c10::IValue packed_;  // LinearPackedParamsBase
  at::Tensor bias_;
  at::Tensor anchor_;  // [1, in]: +1, -1, zeros
  int64_t in_ = 0;
  int64_t out_ = 0;
};

// Whether the int8 kernels can run here (a oneDNN quantized engine).
bool Int8Supported();
// The largest |quantized weight|: 127, or 63 on CPUs without native int8
// dot products (VNNI or AMX). Activations always use 8 bits.
int Int8WeightLevels();

}  // namespace encoder::model

#endif  // ENCODER_SERVER_MODEL_INT8_LINEAR_H_
