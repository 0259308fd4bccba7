#include "server/model/int8_linear.h"

#include <ATen/Parallel.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "server/model/cpu_features.h"

namespace encoder::model {
namespace {

c10::OperatorHandle Op(const char* name) {
  return c10::Dispatcher::singleton().findSchemaOrThrow(name, "");
}

// Rows [begin, end) of AddFloatChannels. The AVX2 clone runs the same
// multiplies and adds as the default one (no FMA), so results do not
// depend on which one the CPU gets either.
__attribute__((target_clones("avx2", "default"))) void AddRows(
    const float* x, const float* w, float* y, int64_t begin, int64_t end,
    int64_t m, int64_t k) {
  // Blocks of 64 outputs: their k weight rows (k x 256 bytes) stay in L1
  // across the rows, and the 64 sums in a local array, which the compiler
  // keeps in vector registers (the row and the weight might alias for all
  // it knows, so a plain loop over the row stays scalar).
  constexpr int64_t kBlock = 64;
  for (int64_t o0 = 0; o0 < m; o0 += kBlock) {
    if (o0 + kBlock <= m) {
      for (int64_t r = begin; r < end; ++r) {
        float* row = y + r * m + o0;
        const float* xr = x + r * k;
        float acc[kBlock];
        for (int64_t t = 0; t < kBlock; ++t) acc[t] = row[t];
        for (int64_t j = 0; j < k; ++j) {
          const float a = xr[j];
          const float* wj = w + j * m + o0;
          for (int64_t t = 0; t < kBlock; ++t) acc[t] += a * wj[t];
        }
        for (int64_t t = 0; t < kBlock; ++t) row[t] = acc[t];
      }
    } else {
      for (int64_t r = begin; r < end; ++r) {
        for (int64_t o = o0; o < m; ++o) {
          float acc = y[r * m + o];
          for (int64_t j = 0; j < k; ++j) acc += x[r * k + j] * w[j * m + o];
          y[r * m + o] = acc;
        }
      }
    }
  }
}

// out[r] += sum_j kept[r, j] * weight[j] for contiguous float32 kept [n, k],
// weight [k, m] and out [n, m], in one pass over `out` (k elementwise
// passes through LibTorch cost about as much as the int8 product itself on
// 4096 x 1536 outputs). Each element adds its k terms in the same order
// whatever n is, so a row's result does not depend on its batch, as a BLAS
// product's blocking or its one-row path could make it.
void AddFloatChannels(const at::Tensor& kept, const at::Tensor& weight,
                      at::Tensor& out) {
  const int64_t n = out.size(0), m = out.size(1), k = kept.size(1);
  const float* x = kept.data_ptr<float>();
  const float* w = weight.data_ptr<float>();
  float* y = out.data_ptr<float>();
  at::parallel_for(0, n, 16, [&](int64_t begin, int64_t end) {
    AddRows(x, w, y, begin, end, m, k);
  });
}

}  // namespace

bool Int8Supported() {
  const auto& engines = at::globalContext().supportedQEngines();
  return std::find(engines.begin(), engines.end(), at::QEngine::ONEDNN) !=
         engines.end();
}

absl::StatusOr<Int8Linear> Int8Linear::Create(
    const at::Tensor& weight, const at::Tensor& bias,
    const at::Tensor& float_channels) {
  if (!Int8Supported()) {
    return absl::FailedPreconditionError(
        "int8 needs LibTorch's oneDNN quantized engine, which this build "
        "lacks");
  }
  if (weight.dim() != 2 || !weight.device().is_cpu() ||
      weight.scalar_type() != at::kFloat) {
    return absl::InvalidArgumentError(
        "int8 linear needs a float32 [out, in] weight on the CPU");
  }
  if (float_channels.defined()) {
    if (float_channels.dim() != 1 ||
        float_channels.scalar_type() != at::kLong ||
        !float_channels.device().is_cpu()) {
      return absl::InvalidArgumentError(
          "int8 float channels must be a 1-D int64 CPU tensor");
    }
    if (float_channels.numel() > 0 &&
        (float_channels.min().item<int64_t>() < 0 ||
         float_channels.max().item<int64_t>() >= weight.size(1))) {
      return absl::InvalidArgumentError(absl::StrCat(
          "int8 float channels must lie in [0, ", weight.size(1), ")"));
    }
  }
  try {
    c10::InferenceMode guard;
    // Packing follows the process-wide engine; oneDNN takes per-channel
    // symmetric weights.
    at::globalContext().setQEngine(at::QEngine::ONEDNN);
    Int8Linear out;
    out.out_ = weight.size(0);
    out.in_ = weight.size(1);
    at::Tensor w = weight.contiguous();
    if (float_channels.defined() && float_channels.numel() > 0) {
      out.float_channels_ = std::get<0>(at::_unique(float_channels));
      out.float_weight_ =
          w.index_select(1, out.float_channels_).t().contiguous();
      w = w.index_fill(1, out.float_channels_, 0.0);
    }
    // The bit split without native int8 dot products (header).
    const bool native = DetectCpuFeatures().native_int8();
    out.reduce_range_ = !native && out.float_channels_.defined();
    out.weight_levels_ = native || out.reduce_range_ ? 127 : 63;
    const at::Tensor scales =
        (w.abs().amax(1) / static_cast<double>(out.weight_levels_))
            .clamp_min(1e-12)
            .to(at::kDouble);
    const at::Tensor zeros = at::zeros({out.out_}, at::kLong);
    const at::Tensor qweight =
        at::quantize_per_channel(w, scales, zeros, 0, at::kQInt8);
    std::vector<c10::IValue> stack{qweight, c10::IValue()};
    Op("quantized::linear_prepack").callBoxed(&stack);
    out.packed_ = std::move(stack.at(0));
    // What a row's centre contributes: each output's sum of its quantized
    // weights (Forward).
    out.weight_sums_ = qweight.dequantize().sum(1);
    if (bias.defined()) out.bias_ = bias.to(at::kFloat).contiguous();
    out.anchor_ = at::zeros({1, out.in_}, at::kFloat);
    out.anchor_.index_put_({0, 0}, 1.0);
    if (out.in_ > 1) out.anchor_.index_put_({0, 1}, -1.0);
    return out;
  } catch (const c10::Error& e) {
    return absl::InternalError(
        absl::StrCat("int8 weight packing: ", e.what_without_backtrace()));
  }
}

at::Tensor Int8Linear::Forward(const at::Tensor& x) const {
  std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end());
  at::Tensor rows = x.reshape({-1, in_});
  const int64_t n = rows.size(0);
  at::Tensor kept;  // [n, k]: the float32 channels' inputs
  if (float_channels_.defined()) {
    kept = rows.index_select(1, float_channels_);
    rows = rows.index_fill(1, float_channels_, 0.0);
  }
  // Each row mapped onto [-1, 1] by its own centre and half range, so its
  // 256 levels span what it holds (one-sided rows, such as GELU outputs,
  // would waste half of them on a range centred at zero). A row of equal
  // values (zeros included) maps to zeros and comes back through its
  // centre alone.
  // (Two vectorized reductions: at::aminmax along rows took 9.9% of a
  // 1 x 128 int8 forward in a profile, these two 2.8% of a 32 x 128 one.)
  const at::Tensor lo = rows.amin(1, /*keepdim=*/true);
  const at::Tensor hi = rows.amax(1, /*keepdim=*/true);
  const at::Tensor centre = (hi + lo) * 0.5;
  const at::Tensor half = ((hi - lo) * 0.5).clamp_min(1e-30);
  const at::Tensor normalized = at::cat({(rows - centre) / half, anchor_}, 0);
  static const c10::OperatorHandle dynamic = Op("quantized::linear_dynamic");
  std::vector<c10::IValue> stack{normalized, packed_, reduce_range_};
  dynamic.callBoxed(&stack);
  const at::Tensor y = stack.at(0).toTensor().narrow(0, 0, n);
  // W (h q + c) = h (W q) + c (W 1).
  at::Tensor out = bias_.defined() ? at::addcmul(bias_, y, half) : y * half;
  out.addcmul_(centre, weight_sums_);
  if (kept.defined()) {
    out = out.contiguous();
    AddFloatChannels(kept.contiguous(), float_weight_, out);
  }
  shape.back() = out_;
  return out.view(shape);
}

}  // namespace encoder::model
