// A float32 linear layer whose weight is laid out once, at load, in the
// blocked format oneDNN's matrix kernels read (LibTorch's
// mkldnn::_reorder_linear_weight and mkldnn::_linear_pointwise, the pair
// its own compiler uses for frozen CPU graphs).
//
// at::linear hands a plain [out, in] weight to the BLAS, which copies it
// into its own panel layout on every call. For the few rows of a short
// batch that copy, reading the whole weight across its rows, costs as much
// as the product (45% of a 1 x 16 forward of all-MiniLM-L6-v2 on an AVX2
// CPU; docs/benchmarks-history.md, "Packed weights"). A packed weight is
// read once, in order, per call.
//
// Large products depend on the CPU. On an AVX2 EPYC the BLAS's own kernel
// was as fast or faster there (32 x 16 and 32 x 128 tokens of MiniLM, one
// thread per batch: 7-11%), and its repacking is a small share of the
// product; so the plain weight can be kept beside the packed one, and
// inputs of more than `max_rows` rows (tokens) are multiplied by the BLAS
// on it, at the cost of a second copy of the weight
// (docs/benchmarks-history.md, "Packed weights"). On CPUs with AVX-512
// (a Zen 4 EPYC, a Xeon with AMX) oneDNN was the faster at every size
// (CpuFeatures::packed_float32_wins); with max_rows 0 every product is
// packed and the plain weight is not kept.
#ifndef ENCODER_SERVER_MODEL_KERNELS_PACKED_LINEAR_H_
#define ENCODER_SERVER_MODEL_KERNELS_PACKED_LINEAR_H_

#include <ATen/ATen.h>

#include <string>

#include "absl/status/statusor.h"
#include "server/model/config.h"
#include "server/model/kernels/cpu_features.h"

namespace encoder::model {

// a(x): a feed-forward activation through LibTorch's own operators.
at::Tensor ApplyActivation(Activation a, const at::Tensor& x);

class PackedLinear {
 public:
  // weight [out, in] float32 on the CPU; bias [out] or undefined;
  // max_rows 0: every product, else products of up to that many rows.
  // FailedPrecondition when this LibTorch has no packed oneDNN linear
  // (PackedLinearSupported()); InvalidArgument for max_rows < 0.
  static absl::StatusOr<PackedLinear> Create(
      const at::Tensor& weight, const at::Tensor& bias,
      int64_t max_rows = kDefaultPackedMaxRows);

  // Inputs of up to this many rows use the packed kernel by default where
  // the BLAS is the faster on large products.
  static constexpr int64_t kDefaultPackedMaxRows = 256;
  // max_rows: every product uses the packed kernel.
  static constexpr int64_t kEveryProduct = 0;

  // x [..., in] float32 -> [..., out] float32. Thread-safe.
  at::Tensor Forward(const at::Tensor& x) const;

  // a(Forward(x)). On the packed kernel the activation runs in the
  // product's epilogue, on each block of the output while it is still in
  // cache, instead of a second pass over the whole output. In the MiniLM
  // forward that moved the rate by less than the noise
  // (docs/benchmarks-history.md, "Every product on oneDNN"); it is kept
  // because it costs nothing and oneDNN's exact GELU gives the same floats
  // as at::gelu.
  at::Tensor Forward(const at::Tensor& x, Activation a) const;

  int64_t in_features() const { return in_; }
  int64_t out_features() const { return out_; }

 private:
  PackedLinear() = default;

  // Whether x's rows go to the packed kernel (else the BLAS).
  bool Packs(const at::Tensor& x) const;
  // The packed kernel with one of oneDNN's post-ops ("none", "relu",
  // "gelu", "swish") and its algorithm (GELU's "none" or "tanh").
  at::Tensor Run(const at::Tensor& x, const char* post_op,
                 const char* algorithm) const;

  at::Tensor packed_;  // oneDNN layout, logical [out, in]
  at::Tensor plain_;   // the weight as given, [out, in]; undefined when
                       // every product is packed
  at::Tensor bias_;    // [out] or undefined
  int64_t in_ = 0;
  int64_t out_ = 0;
  int64_t max_rows_ = 0;  // kEveryProduct or a number of rows
};

// Which of a model's projections are packed, and for which products
// (Encoder::PrepackWeights).
struct PackedLimits {
  // PackedLinear::Create's max_rows.
  int64_t max_rows = PackedLinear::kDefaultPackedMaxRows;
  // Weights of fewer elements (in x out) stay plain. A packed product pays
  // a fixed cost per call (ideep's primitive lookup, argument set-up and
  // scratchpad: ~12 us on a Xeon with AMX) that a small weight's repacking
  // by the BLAS does not reach.
  int64_t min_elements = 0;
};

// float32 weights of fewer elements than this stay plain under
// --pack-weights=auto. Measured (docs/benchmarks-history.md, "Small
// weights stay plain"): one-layer models of width 32 to 128 (weights of
// up to 64 Ki elements) ran 1.9-2.4x faster plain at one row and
// 1.1-1.2x at 16 to 128 rows (at 512 rows within 12% either way); from
// width 256 (256 Ki elements) packed won from 16 rows.
inline constexpr int64_t kDefaultPackedMinElements = 128 * 1024;

// The server's --pack-weights (auto, true or false), --packed-max-rows and
// --packed-min-elements (-1: chosen) resolved for a CPU: whether to pack,
// and the limits for Encoder::PrepackWeights. auto packs where
// `packed_wins` (CpuFeatures::packed_float32_wins); max rows -1 is
// kEveryProduct there and kDefaultPackedMaxRows elsewhere; min elements -1
// is `auto_min_elements` under auto and 0 under true. pack_int8: int8
// models packed too, for their full-precision (diagnostic) passes, which
// alone run float32 products: with true only (auto leaves their float32
// weights plain, as a packed copy would add its size to the int8 model's
// memory).
struct PackingPlan {
  bool pack = false;
  bool pack_int8 = false;
  PackedLimits limits;
};
PackingPlan PlanPacking(const std::string& mode, int64_t max_rows,
                        int64_t min_elements, bool packed_wins,
                        int64_t auto_min_elements = 0);
// PlanPacking for a model whose products run in `dtype` on `cpu`: float32
// where CpuFeatures::packed_float32_wins (weights of at least
// kDefaultPackedMinElements under auto), bfloat16 where
// packed_bfloat16_wins (every weight: packed bfloat16 won from width 128
// at one row), and bfloat16 only where the CPU has it natively (emulated
// bfloat16 stays on LibTorch's own products, whatever `mode` says); no
// other dtype is packed.
PackingPlan PlanPackingFor(const std::string& mode, int64_t max_rows,
                           int64_t min_elements, at::ScalarType dtype,
                           const CpuFeatures& cpu);

// Whether this LibTorch has the packed linear (oneDNN built in and its
// mkldnn::_linear_pointwise operator registered: the pinned wheel does, a
// LibTorch built without oneDNN does not).
bool PackedLinearSupported();

}  // namespace encoder::model

#endif  // ENCODER_SERVER_MODEL_KERNELS_PACKED_LINEAR_H_
