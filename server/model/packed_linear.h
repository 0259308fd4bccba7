// A float32 linear layer whose weight is laid out once, at load, in the
// blocked format oneDNN's matrix kernels read (LibTorch's
// mkldnn::_reorder_linear_weight and mkldnn::_linear_pointwise, the pair
// its own compiler uses for frozen CPU graphs).
//
// at::linear hands a plain [out, in] weight to the BLAS, which copies it
// into its own panel layout on every call. For the few rows of a short
// batch that copy, reading the whole weight across its rows, costs as much
// as the product (45% of a 1 x 16 forward of all-MiniLM-L6-v2 on an AVX2
// CPU, BENCHMARKS.md). A packed weight is read once, in order, per call.
//
// Large products are another matter: there the BLAS's own kernel was as
// fast or faster (32 x 16 and 32 x 128 tokens of MiniLM, one thread per
// batch: 7-11% on an AVX2 EPYC), and its repacking is a small share of the
// product. So the plain weight is kept beside the packed one, and inputs of
// more than `max_rows` rows (tokens) are multiplied by the BLAS on it, as
// before. The cost is a second copy of the weight (BENCHMARKS.md, "Packed
// weights").
#ifndef ENCODER_SERVER_MODEL_PACKED_LINEAR_H_
#define ENCODER_SERVER_MODEL_PACKED_LINEAR_H_

#include <ATen/ATen.h>

#include "absl/status/statusor.h"

namespace encoder::model {

class PackedLinear {
 public:
  // weight [out, in] float32 on the CPU; bias [out] or undefined.
  // FailedPrecondition when this LibTorch has no packed oneDNN linear
  // (PackedLinearSupported()).
  static absl::StatusOr<PackedLinear> Create(
      const at::Tensor& weight, const at::Tensor& bias,
      int64_t max_rows = kDefaultPackedMaxRows);

  // Inputs of up to this many rows use the packed kernel by default.
  static constexpr int64_t kDefaultPackedMaxRows = 256;

  // x [..., in] float32 -> [..., out] float32. Thread-safe.
  at::Tensor Forward(const at::Tensor& x) const;

  int64_t in_features() const { return in_; }
  int64_t out_features() const { return out_; }

 private:
  PackedLinear() = default;

  at::Tensor packed_;  // oneDNN layout, logical [out, in]
  at::Tensor plain_;   // the weight as given, [out, in]
  at::Tensor bias_;    // [out] or undefined
  int64_t in_ = 0;
  int64_t out_ = 0;
  int64_t max_rows_ = 0;
};

// Whether this LibTorch has the packed linear (oneDNN built in and its
// mkldnn::_linear_pointwise operator registered: LibTorch 2.x wheels do,
// Debian's 1.13 does not).
bool PackedLinearSupported();

}  // namespace encoder::model

#endif  // ENCODER_SERVER_MODEL_PACKED_LINEAR_H_
