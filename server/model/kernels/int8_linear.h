// A linear layer with int8 weights (one scale per output channel) and
// dynamic int8 activations, run by the library's oneDNN quantized kernels.
//
// The library's dynamic kernel picks one activation scale for the whole
// input tensor, which would make a sequence's result depend on the other
// sequences of its batch. So each row (token) is first mapped onto
// [-1, 1] by its own centre c = (max + min) / 2 and half range
// h = (max - min) / 2, and one fixed anchor row holding +1 and -1 is
// appended: the tensor's range is then exactly [-1, 1] whatever the batch
// holds, every row is quantized over its own range, and after the integer
// product y = h (W q) + c (W 1) + bias, with W 1 each output's sum of
// quantized weights. Results are bitwise the same for a row alone or in
// any batch. Centring, rather than dividing by max |x|, gives a one-sided
// row (a GELU output) all 256 levels instead of half of them: on
// MiniLM's real weights, mean cosine against float32 0.9965 instead of
// 0.9949 without VNNI (docs/benchmarks-history.md, "int8 quality").
//
// Without VNNI (or AMX) the kernels add pairs of u8 x s8 products in 16
// bits, which saturates when both operands use their full range (8% error
// measured on an AVX2 CPU). There one operand gives up a bit, whichever
// costs less: with channels kept in float32 (fixed channels or row
// outliers, below) the activations' ranges are tight, and they use 7 bits
// (0..127) with 8-bit weights (MiniLM, 8 channels: mean cosine 0.9991
// against 0.9988 the other way);
// with every channel quantized the weights use 7 bits (-63..63; 0.9949
// against 0.9932). A pair then sums to at most 2 * 127 * 127 = 32258, or
// 2 * 255 * 64 = 32640, < 2^15 (docs/benchmarks-history.md, "The goals,
// one run" and "int8 quality").
#ifndef ENCODER_SERVER_MODEL_KERNELS_INT8_LINEAR_H_
#define ENCODER_SERVER_MODEL_KERNELS_INT8_LINEAR_H_

#include <ATen/ATen.h>
#include <ATen/core/ivalue.h>

#include "absl/status/statusor.h"

namespace encoder::model {

class Int8Linear {
 public:
  // weight [out, in] float32 on the CPU; bias [out] or undefined.
  // float_channels: undefined, or int64 indices of input channels whose
  // part of the product stays in float32 (k multiply-adds per output in a
  // fixed order, so a row's result still does not depend on its batch;
  // those channels are zeros for the int8 product). A few channels of
  // a Transformer's activations run far above the rest, and a row's range
  // follows them (Encoder::QuantizeInt8 picks them). FailedPrecondition
  // when this LibTorch build has no oneDNN quantized engine;
  // InvalidArgument for a bad weight or channel.
  //
  // row_outliers d: besides those fixed channels, each row's d largest
  // |values| among the rest stay out of its range and the int8 product too;
  // they are multiplied in float32 by the quantized weight's columns (the
  // int8 weight kept a second time, [in, out], 1 byte per weight). This
  // follows what fixed channels cannot: a GELU output's large values sit
  // in different channels from token to token. InvalidArgument outside
  // [0, in].
  //
  // allow_direct: where the CPU has native int8 dot products and LibTorch
  // has oneDNN's static int8 linear (onednn::qlinear_pointwise, the op
  // PyTorch's compiler emits), the normalizing pass writes each row's
  // bytes itself and the product takes them as they are (direct()):
  // LibTorch's dynamic linear otherwise writes the normalized rows as
  // float32, finds their range and quantizes them in two more passes.
  // The direct product is asked for the bare integer sums (unit scales:
  // the library's only float step is converting each exact int32 sum),
  // and every scale is applied in this layer's own pass, row by row: so a
  // row's result is the same floats alone or in any batch on every CPU,
  // whichever kernel the library picks for the number of rows (with AMX
  // it picks by row count). The dynamic product applies its scales inside
  // the library: bit-identical alone and batched where the kernel does not
  // change with the rows (AVX2, AVX-512 VNNI), within kDynamicBatchUlps
  // ulps of the row's largest |output| where it may (AMX).
  static absl::StatusOr<Int8Linear> Create(
      const at::Tensor& weight, const at::Tensor& bias,
      const at::Tensor& float_channels = at::Tensor(), int64_t row_outliers = 0,
      bool allow_direct = true);

  // x [..., in] float32 -> [..., out] float32. Thread-safe.
  at::Tensor Forward(const at::Tensor& x) const;

  // Forward's rows per block: each block's product stays in the cache
  // between the library's pass and the pass after it.
  static constexpr int64_t kChunkRows = 256;
  // With several intra-op threads, inputs of at least this many rows per
  // thread run in one parallel region, a share of the rows each.
  static constexpr int64_t kMinRowsPerThread = 16;
  // The dynamic product's bound between a row alone and in a batch on a
  // CPU with AMX, in ulps of the row's largest |output| (Create).
  static constexpr int kDynamicBatchUlps = 8;

  int64_t in_features() const { return in_; }
  // The input channels kept in float32 (int64, ascending), or undefined.
  const at::Tensor& float_channels() const { return float_channels_; }
  // The largest |quantized weight| (127 or 63) and the activations' number
  // of levels (255 or 127), per the rule above.
  int weight_levels() const { return weight_levels_; }
  int activation_levels() const { return reduce_range_ ? 127 : 255; }
  int64_t out_features() const { return out_; }
  int64_t row_outliers() const { return row_outliers_; }
  // Whether the product takes the rows' bytes directly (Create).
  bool direct() const { return direct_; }

 private:
  Int8Linear() = default;

  // Forward of n contiguous rows xp [n, in] into yp [n, out]; with yp null,
  // into the product's own first n rows. Returns the product [n + 1, out].
  at::Tensor ForwardRows(const float* xp, int64_t n, float* yp) const;

  c10::IValue packed_;        // LinearPackedParamsBase (not direct)
  at::Tensor direct_weight_;  // onednn::qlinear_prepack's (direct)
  at::Tensor direct_scales_;  // [out] float32 ones: unit weight scales
  // [out] float32: what each output of the product is multiplied by in
  // the finishing pass: the weight scale / 127.5 (direct), ones (dynamic:
  // the library scaled it).
  at::Tensor product_scale_;
  at::Tensor direct_zeros_;  // [out] int64 zeros (direct)
  at::Tensor keep_;          // [in]: 0 at the float32 channels, else 1 (direct)
  at::Tensor bias_;          // [out]; zeros for a layer without one
  at::Tensor anchor_;        // [1, in]: +1, -1, zeros
  at::Tensor weight_sums_;   // [out]: sum of each row of the quantized weight
  at::Tensor float_channels_;  // [k] int64, or undefined
  at::Tensor float_weight_;    // [k, out]: those channels' float32 weights
  at::Tensor outlier_weight_;  // [in, out] int8: the quantized weight, or
                               // undefined without row outliers
  at::Tensor outlier_scales_;  // [out]: its scales
  int64_t row_outliers_ = 0;
  int64_t in_ = 0;
  int64_t out_ = 0;
  int weight_levels_ = 127;
  bool reduce_range_ = false;  // 7-bit activations
  bool direct_ = false;
};

// Whether the int8 kernels can run here (a oneDNN quantized engine).
bool Int8Supported();

}  // namespace encoder::model

#endif  // ENCODER_SERVER_MODEL_KERNELS_INT8_LINEAR_H_
