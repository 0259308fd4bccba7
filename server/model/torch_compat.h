// The one place that knows which LibTorch the tree is built against: Debian's
// 1.13 or a 2.x from a PyTorch wheel (cmake/torch_wheel.cmake). Everything
// that differs between them is here, so no other file tests the version.
#ifndef ENCODER_SERVER_MODEL_TORCH_COMPAT_H_
#define ENCODER_SERVER_MODEL_TORCH_COMPAT_H_

#include <ATen/ATen.h>
#include <c10/core/Allocator.h>
#include <torch/version.h>

#include <cstddef>
#include <optional>

// LibTorch 2.1 and later: at::scaled_dot_product_attention with a `scale`
// argument (a fused kernel on CPU and CUDA).
#if TORCH_VERSION_MAJOR > 2 || \
    (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 1)
#define ENCODER_TORCH_FUSED_ATTENTION 1
#else
#define ENCODER_TORCH_FUSED_ATTENTION 0
#endif

namespace encoder::model {

inline constexpr bool kHasFusedAttention = ENCODER_TORCH_FUSED_ATTENTION;

// softmax(q k^T * scale + mask) v through the fused kernel; q, k, v are
// [B, H, S, d], `mask` an additive float mask that broadcasts to
// [B, H, S, S] (undefined: none). Only called where kHasFusedAttention.
inline at::Tensor FusedAttention(const at::Tensor& q, const at::Tensor& k,
                                 const at::Tensor& v, const at::Tensor& mask,
                                 double scale) {
#if ENCODER_TORCH_FUSED_ATTENTION
  return at::scaled_dot_product_attention(
      q, k, v, mask.defined() ? std::optional<at::Tensor>(mask) : std::nullopt,
      /*dropout_p=*/0.0, /*is_causal=*/false, scale);
#else
  (void)q, (void)k, (void)v, (void)mask, (void)scale;
  TORCH_CHECK(false, "this LibTorch has no fused attention");
#endif
}

// An empty Scalar?[] argument for a boxed operator call (LibTorch 2.4 made
// c10::optional std::optional).
inline c10::IValue EmptyOptionalScalars() {
#if TORCH_VERSION_MAJOR > 2 || \
    (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
  return c10::List<std::optional<at::Scalar>>();
#else
  return c10::List<c10::optional<at::Scalar>>();
#endif
}

// Whether the fused kernel may pick cuDNN's attention on CUDA (LibTorch
// 2.4 and later have it; a no-op before). Process-wide: LibTorch keeps the
// choice in its global context.
inline void SetCudnnAttention(bool enabled) {
#if TORCH_VERSION_MAJOR > 2 || \
    (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
  at::globalContext().setSDPUseCuDNN(enabled);
#else
  (void)enabled;
#endif
}

// Index of the all-pools entry in the CUDA caching allocator's statistics
// arrays (StatType::AGGREGATE: in c10::CachingAllocator since 2.x, in
// c10::cuda::CUDACachingAllocator before; 0 in both).
inline constexpr size_t kAggregateStat = 0;

// A c10::Allocator whose subclass implements `Allocate(n) const`: LibTorch
// 1.13 declares allocate() const, 2.x non-const and adds copy_data().
class CompatAllocator : public c10::Allocator {
 public:
#if TORCH_VERSION_MAJOR >= 2
  c10::DataPtr allocate(size_t n) final { return Allocate(n); }
  void copy_data(void* dest, const void* src, std::size_t count) const final {
    default_copy_data(dest, src, count);
  }
#else
  c10::DataPtr allocate(size_t n) const final { return Allocate(n); }
#endif

 protected:
  virtual c10::DataPtr Allocate(size_t n) const = 0;
};

}  // namespace encoder::model

#endif  // ENCODER_SERVER_MODEL_TORCH_COMPAT_H_
