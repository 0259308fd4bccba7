// The small LibTorch adapters the tree shares: the fused attention call, the
// boxed empty Scalar?[] argument, cuDNN's attention switch and the
// allocator base class. The tree builds against LibTorch 2.6 and later
// (CMakeLists.txt refuses older): the pinned wheel's 2.x, and the GPU
// hosts' own 2.x.
#ifndef ENCODER_SERVER_MODEL_TORCH_COMPAT_H_
#define ENCODER_SERVER_MODEL_TORCH_COMPAT_H_

#include <ATen/ATen.h>
#include <c10/core/Allocator.h>

#include <cstddef>
#include <optional>

namespace encoder::model {

// softmax(q k^T * scale + mask) v through LibTorch's fused kernel
// (at::scaled_dot_product_attention); q, k, v are [B, H, S, d], `mask` an
// additive float mask that broadcasts to [B, H, S, S] (undefined: none).
inline at::Tensor FusedAttention(const at::Tensor& q, const at::Tensor& k,
                                 const at::Tensor& v, const at::Tensor& mask,
                                 double scale) {
  return at::scaled_dot_product_attention(
      q, k, v, mask.defined() ? std::optional<at::Tensor>(mask) : std::nullopt,
      /*dropout_p=*/0.0, /*is_causal=*/false, scale);
}

// An empty Scalar?[] argument for a boxed operator call.
inline c10::IValue EmptyOptionalScalars() {
  return c10::List<std::optional<at::Scalar>>();
}

// Whether the fused kernel may pick cuDNN's attention on CUDA.
// Process-wide: LibTorch keeps the choice in its global context.
inline void SetCudnnAttention(bool enabled) {
  at::globalContext().setSDPUseCuDNN(enabled);
}

// Index of the all-pools entry in the CUDA caching allocator's statistics
// arrays (c10::CachingAllocator::StatType::AGGREGATE).
inline constexpr size_t kAggregateStat = 0;

// A c10::Allocator whose subclass implements `Allocate(n) const`.
class CompatAllocator : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t n) final { return Allocate(n); }
  void copy_data(void* dest, const void* src, std::size_t count) const final {
    default_copy_data(dest, src, count);
  }

 protected:
  virtual c10::DataPtr Allocate(size_t n) const = 0;
};

}  // namespace encoder::model

#endif  // ENCODER_SERVER_MODEL_TORCH_COMPAT_H_
