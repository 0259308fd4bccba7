#include "server/model/kernels/int8_linear.h"

#include <ATen/Parallel.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "server/model/kernels/cpu_features.h"
#include "server/model/torch_compat.h"

namespace encoder::model {
namespace {

c10::OperatorHandle Op(const char* name) {
  return c10::Dispatcher::singleton().findSchemaOrThrow(name, "");
}

// The int8 layer's two passes of its own, before and after the library's
// product (Int8Linear::Forward). Each works on one row at a time, in a
// fixed order of operations whatever the batch, so a row's result does not
// depend on the other rows. The AVX2 clones run the same multiplies and
// adds as the default ones (no FMA), so results do not depend on which
// clone the CPU gets either. They replace eleven elementwise LibTorch
// operators (gather, fill, min, max, centre, scale, concatenate; two
// multiply-adds and the float channels' sum), each a pass over memory
// into a fresh tensor: short inputs run 12-16% faster
// (docs/benchmarks-history.md, "int8 quality").
constexpr int64_t kLanes = 16;

// The d entries of row [0, in) with the largest |value|, their indices to
// idx and values to val, largest first; of equal magnitudes the earlier
// entry wins. A first vector pass takes each of 16 lanes' largest |value|;
// the d-th largest of those 16 entries is a floor the answer cannot fall
// below (d <= 16), so the second pass skips every block of 16 whose
// largest |value| is under it (most are) and inserts the rest into a short
// sorted list. Inlined into the callers' clones.
__attribute__((always_inline)) inline void LargestEntries(const float* row,
                                                          int64_t in, int64_t d,
                                                          int64_t* idx,
                                                          float* val) {
  const int64_t full = in / kLanes * kLanes;
  float floor0 = 0.0f;
  if (full > 0 && d <= kLanes) {
    float lane[kLanes] = {};
    for (int64_t i0 = 0; i0 < full; i0 += kLanes) {
      for (int64_t t = 0; t < kLanes; ++t) {
        const float a = std::fabs(row[i0 + t]);
        lane[t] = a > lane[t] ? a : lane[t];
      }
    }
    std::nth_element(lane, lane + d - 1, lane + kLanes, std::greater<>());
    floor0 = lane[d - 1];
  }
  int64_t count = 0;
  float floor = 0.0f;  // |val[d - 1]| once the list is full
  for (int64_t i0 = 0; i0 < in; i0 += kLanes) {
    const int64_t i1 = std::min(i0 + kLanes, in);
    if (i1 - i0 == kLanes) {
      float top = 0.0f;
      for (int64_t t = 0; t < kLanes; ++t) {
        const float a = std::fabs(row[i0 + t]);
        top = a > top ? a : top;
      }
      if (top < floor0 || (count == d && !(top > floor))) continue;
    }
    for (int64_t i = i0; i < i1; ++i) {
      const float a = std::fabs(row[i]);
      if (a < floor0 || (count == d && !(a > floor))) continue;
      int64_t p = count < d ? count++ : d - 1;
      while (p > 0 && a > std::fabs(val[p - 1])) {
        idx[p] = idx[p - 1];
        val[p] = val[p - 1];
        --p;
      }
      idx[p] = i;
      val[p] = row[i];
      floor = std::fabs(val[count - 1]);
    }
  }
}

// Eight floats for GCC's vector extensions, and an unaligned, aliasing
// view of memory as them. Without FMA in the clones' targets an a * b + c
// stays a multiply and an add, in each clone alike.
typedef float V8 __attribute__((vector_size(32)));
typedef float V8Mem __attribute__((vector_size(32), aligned(4), may_alias));

// Memory seen as V8Mem: vector u of a row p is V8s(p)[u].
__attribute__((always_inline)) inline const V8Mem* V8s(const float* p) {
  return reinterpret_cast<const V8Mem*>(p);
}

// One value of a row with centre c and half range h as the direct product's
// byte (scale 1 / 127.5, zero point 128: the parameters LibTorch's dynamic
// linear picks for [-1, 1]): 128 + (v - c) s, s = 127.5 / h, rounded to the
// nearest (ties to even) and kept in [0, 255]. Adding and taking away
// 1.5 x 2^23 rounds a float of magnitude under 2^22 to an integer in the
// default rounding mode, in a form the vectorizer takes; without
// -ffast-math neither step is folded away.
__attribute__((always_inline)) inline uint8_t QuantizeValue(float v, float c,
                                                            float s) {
  constexpr float kRound = 12582912.0f;
  float q = (((v - c) * s + 128.0f) + kRound) - kRound;
  q = q < 0.0f ? 0.0f : q;
  q = q > 255.0f ? 255.0f : q;
  return static_cast<uint8_t>(static_cast<int>(q));
}

// Rows [begin, end) of x [n, in]: the float32 channels' inputs gathered to
// kept [n, k]; then the row's d largest |values| among the rest (row
// outliers) to out_idx/out_val [n, d], and zeros in their place; each
// row's centre c and half range h over what remains (zeros included),
// written as (x - c) / h to norm [n, in]. The float32 channels' slots are
// then set to zero, as their weights are (Create). The row outliers'
// columns stay in the int8 weight, so their slots keep (0 - c) / h and
// come back as about zero, like any zero of the row.
// With bytes set (and norm null), each row is written quantized instead,
// as the direct product takes it (QuantizeValue); the row is built in
// scratch [in].
__attribute__((target_clones("avx2", "default"))) void NormalizeRows(
    const float* x, float* norm, uint8_t* bytes, float* scratch, float* kept,
    float* centre, float* half, const int64_t* channels, int64_t k, int64_t in,
    int64_t d, int64_t* out_idx, float* out_val, int64_t begin, int64_t end) {
  for (int64_t r = begin; r < end; ++r) {
    const float* xr = x + r * in;
    float* nr = norm != nullptr ? norm + r * in : scratch;
    for (int64_t j = 0; j < k; ++j) kept[r * k + j] = xr[channels[j]];
    std::copy(xr, xr + in, nr);
    for (int64_t j = 0; j < k; ++j) nr[channels[j]] = 0.0f;
    if (d > 0) {
      int64_t* ri = out_idx + r * d;
      LargestEntries(nr, in, d, ri, out_val + r * d);
      for (int64_t j = 0; j < d; ++j) nr[ri[j]] = 0.0f;
    }
    // Sixteen lanes of running minima and maxima (a plain `std::min` over
    // the row stays scalar without -ffinite-math-only).
    float lo[kLanes], hi[kLanes];
    for (int64_t t = 0; t < kLanes; ++t) lo[t] = hi[t] = nr[0];
    int64_t i = 0;
    for (; i + kLanes <= in; i += kLanes) {
      for (int64_t t = 0; t < kLanes; ++t) {
        const float v = nr[i + t];
        lo[t] = v < lo[t] ? v : lo[t];
        hi[t] = v > hi[t] ? v : hi[t];
      }
    }
    float mn = lo[0], mx = hi[0];
    for (int64_t t = 1; t < kLanes; ++t) {
      mn = lo[t] < mn ? lo[t] : mn;
      mx = hi[t] > mx ? hi[t] : mx;
    }
    for (; i < in; ++i) {
      mn = nr[i] < mn ? nr[i] : mn;
      mx = nr[i] > mx ? nr[i] : mx;
    }
    const float c = (mx + mn) * 0.5f;
    const float h = std::max((mx - mn) * 0.5f, 1e-30f);
    centre[r] = c;
    half[r] = h;
    if (norm != nullptr) {
      // Kept within [-1, 1]: (max - c) / h can round to 1 + 2^-23, and the
      // library's range, the whole tensor's, would then depend on which
      // rows share the batch (the anchor row fixes it at [-1, 1] only if
      // no row goes past).
      for (int64_t t = 0; t < in; ++t) {
        float v = (nr[t] - c) / h;
        v = v < -1.0f ? -1.0f : v;
        nr[t] = v > 1.0f ? 1.0f : v;
      }
      for (int64_t j = 0; j < k; ++j) nr[channels[j]] = 0.0f;
      continue;
    }
    uint8_t* br = bytes + r * in;
    const float s = 127.5f / h;
    for (int64_t t = 0; t < in; ++t) br[t] = QuantizeValue(nr[t], c, s);
    for (int64_t j = 0; j < k; ++j) br[channels[j]] = 128;
  }
}

// The direct product's rows without row outliers, in one pass fewer than
// NormalizeRows: the range is taken from x itself, its float32 channels
// counted as zeros through keep [in] (0 there, 1 elsewhere), and no copy
// is made. Those channels' bytes are whatever they come to: their weights
// are zeros (Create).
__attribute__((target_clones("avx2", "default"))) void QuantizeRows(
    const float* x, const float* keep, uint8_t* bytes, float* kept,
    float* centre, float* half, const int64_t* channels, int64_t k, int64_t in,
    int64_t begin, int64_t end) {
  for (int64_t r = begin; r < end; ++r) {
    const float* xr = x + r * in;
    // Two vectors of running minima and maxima each, in registers (arrays
    // of 16 lanes went through memory at every step). The row is read in
    // order first: gathering the float32 channels before, at scattered
    // places, waited on the memory for most of them.
    const float first = xr[0] * keep[0];
    V8 lo0 = V8{} + first, lo1 = lo0, hi0 = lo0, hi1 = lo0;
    int64_t i = 0;
    for (; i + kLanes <= in; i += kLanes) {
      const V8 v0 = V8s(xr + i)[0] * V8s(keep + i)[0];
      const V8 v1 = V8s(xr + i)[1] * V8s(keep + i)[1];
      lo0 = v0 < lo0 ? v0 : lo0;
      lo1 = v1 < lo1 ? v1 : lo1;
      hi0 = v0 > hi0 ? v0 : hi0;
      hi1 = v1 > hi1 ? v1 : hi1;
    }
    float mn = first, mx = first;
    for (int t = 0; t < 8; ++t) {
      mn = lo0[t] < mn ? lo0[t] : mn;
      mn = lo1[t] < mn ? lo1[t] : mn;
      mx = hi0[t] > mx ? hi0[t] : mx;
      mx = hi1[t] > mx ? hi1[t] : mx;
    }
    for (; i < in; ++i) {
      const float v = xr[i] * keep[i];
      mn = v < mn ? v : mn;
      mx = v > mx ? v : mx;
    }
    for (int64_t j = 0; j < k; ++j) kept[r * k + j] = xr[channels[j]];
    const float c = (mx + mn) * 0.5f;
    const float h = std::max((mx - mn) * 0.5f, 1e-30f);
    centre[r] = c;
    half[r] = h;
    uint8_t* br = bytes + r * in;
    const float s = 127.5f / h;
    for (int64_t t = 0; t < in; ++t) {
      br[t] = QuantizeValue(xr[t] * keep[t], c, s);
    }
  }
}

// row += a (q * scale) over [0, m), in blocks of kLanes with a fixed
// trip count so that -O2's vectorizer takes them; restrict, as an int8
// pointer may alias anything. Inlined into the callers' clones.
__attribute__((always_inline)) inline void AddScaledRow(
    float* __restrict row, const int8_t* __restrict q,
    const float* __restrict scale, float a, int64_t m) {
  int64_t o = 0;
  for (; o + kLanes <= m; o += kLanes) {
    for (int64_t t = 0; t < kLanes; ++t) {
      row[o + t] += a * (static_cast<float>(q[o + t]) * scale[o + t]);
    }
  }
  for (; o < m; ++o) row[o] += a * (static_cast<float>(q[o]) * scale[o]);
}

// Rows [begin, end) of FinishRows' float32 part (below), in blocks of 64
// outputs: their k float32 weight rows stay in L1 across the rows, and the
// 64 sums in eight vector registers through the k multiply-adds (a local
// array of 64 floats went through memory at every step, and its stores
// and reloads took most of this pass's time).
__attribute__((always_inline)) inline void FinishTile(
    const float* product, const float* product_scale, float* y,
    const float* bias, const float* weight_sums, const float* centre,
    const float* half, const float* kept, const float* fw, int64_t m, int64_t k,
    int64_t begin, int64_t end) {
  constexpr int64_t kBlock = 64;
  constexpr int kVectors = kBlock / 8;
  for (int64_t o0 = 0; o0 < m; o0 += kBlock) {
    if (o0 + kBlock <= m) {
      for (int64_t r = begin; r < end; ++r) {
        const V8Mem* b = V8s(bias + o0);
        const V8Mem* p = V8s(product + r * m + o0);
        const V8Mem* ps = V8s(product_scale + o0);
        const V8Mem* s = V8s(weight_sums + o0);
        const float h = half[r], c = centre[r];
        V8 acc[kVectors];
#pragma GCC unroll 8
        for (int u = 0; u < kVectors; ++u) {
          acc[u] = b[u] + h * (p[u] * ps[u]) + c * s[u];
        }
        for (int64_t j = 0; j < k; ++j) {
          const float a = kept[r * k + j];
          const V8Mem* w = V8s(fw + j * m + o0);
#pragma GCC unroll 8
          for (int u = 0; u < kVectors; ++u) acc[u] += a * w[u];
        }
        V8Mem* row = reinterpret_cast<V8Mem*>(y + r * m + o0);
#pragma GCC unroll 8
        for (int u = 0; u < kVectors; ++u) row[u] = acc[u];
      }
    } else {
      for (int64_t r = begin; r < end; ++r) {
        for (int64_t o = o0; o < m; ++o) {
          float acc = bias[o] +
                      half[r] * (product[r * m + o] * product_scale[o]) +
                      centre[r] * weight_sums[o];
          for (int64_t j = 0; j < k; ++j)
            acc += kept[r * k + j] * fw[j * m + o];
          y[r * m + o] = acc;
        }
      }
    }
  }
}

// Rows [begin, end) of the layer's output y [n, m] from p [n, m], the
// product of the normalized rows, each output times its product_scale
// [m]: bias + h (p ps) + c (W 1) + the float32
// channels' part, sum_j kept[r, j] fw[j] (fw [k, m]); after that, the row
// outliers' part, sum_j out_val[r, j] (qw[out_idx[r, j]] * scale) (qw
// [in, m], the quantized weight's columns; scale [m]).
__attribute__((target_clones("avx2", "default"))) void FinishRows(
    const float* product, const float* product_scale, float* y,
    const float* bias, const float* weight_sums, const float* centre,
    const float* half, const float* kept, const float* fw, int64_t m, int64_t k,
    const int8_t* qw, const float* scale, const int64_t* out_idx,
    const float* out_val, int64_t d, int64_t begin, int64_t end) {
  // Tiles of kTileRows rows, each walked block by block and then given its
  // row outliers: a tile's rows stay in L2 throughout (walking all of a
  // thread's rows per block read y from memory once per block when it held
  // thousands of rows). The row outliers take one whole weight row each:
  // they fall in a different row of qw for every row of y, so walking qw in
  // blocks would miss the cache once per block and outlier.
  constexpr int64_t kTileRows = 16;
  for (int64_t t0 = begin; t0 < end; t0 += kTileRows) {
    const int64_t t1 = std::min(end, t0 + kTileRows);
    FinishTile(product, product_scale, y, bias, weight_sums, centre, half, kept,
               fw, m, k, t0, t1);
    for (int64_t r = t0; r < t1; ++r) {
      float* row = y + r * m;
      for (int64_t j = 0; j < d; ++j) {
        const float a = out_val[r * d + j];
        const int8_t* qj = qw + out_idx[r * d + j] * m;
        AddScaledRow(row, qj, scale, a, m);
      }
    }
  }
}

}  // namespace

bool Int8Supported() {
  const auto& engines = at::globalContext().supportedQEngines();
  return std::find(engines.begin(), engines.end(), at::QEngine::ONEDNN) !=
         engines.end();
}

absl::StatusOr<Int8Linear> Int8Linear::Create(const at::Tensor& weight,
                                              const at::Tensor& bias,
                                              const at::Tensor& float_channels,
                                              int64_t row_outliers,
                                              bool allow_direct) {
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
  if (row_outliers < 0 || row_outliers > weight.size(1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("int8 row outliers must lie in [0, ", weight.size(1),
                     "], not ", row_outliers));
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
      out.float_channels_ =
          std::get<0>(at::_unique(float_channels)).contiguous();
      out.float_weight_ =
          w.index_select(1, out.float_channels_).t().contiguous();
      w = w.index_fill(1, out.float_channels_, 0.0);
    }
    // The bit split without native int8 dot products (header).
    const bool native = DetectCpuFeatures().native_int8();
    out.reduce_range_ =
        !native && (out.float_channels_.defined() || row_outliers > 0);
    out.weight_levels_ = native || out.reduce_range_ ? 127 : 63;
    const at::Tensor scales =
        (w.abs().amax(1) / static_cast<double>(out.weight_levels_))
            .clamp_min(1e-12)
            .to(at::kDouble);
    const at::Tensor zeros = at::zeros({out.out_}, at::kLong);
    const at::Tensor qweight =
        at::quantize_per_channel(w, scales, zeros, 0, at::kQInt8);
    static const bool has_direct =
        c10::Dispatcher::singleton()
            .findSchema({"onednn::qlinear_pointwise", ""})
            .has_value() &&
        c10::Dispatcher::singleton()
            .findSchema({"onednn::qlinear_prepack", ""})
            .has_value();
    out.direct_ = allow_direct && native && has_direct;
    if (out.direct_) {
      std::vector<c10::IValue> stack{qweight.int_repr().contiguous(),
                                     c10::IValue()};
      Op("onednn::qlinear_prepack").callBoxed(&stack);
      out.direct_weight_ = stack.at(0).toTensor();
      out.direct_scales_ = at::ones({out.out_}, at::kFloat);
      out.direct_zeros_ = zeros;
      // The bytes' step (2 / 255, 1 / 127.5) times the weight's scale.
      out.product_scale_ = (scales / 127.5).to(at::kFloat).contiguous();
      out.keep_ = at::ones({out.in_}, at::kFloat);
      if (out.float_channels_.defined()) {
        out.keep_.index_fill_(0, out.float_channels_, 0.0);
      }
    } else {
      std::vector<c10::IValue> stack{qweight, c10::IValue()};
      Op("quantized::linear_prepack").callBoxed(&stack);
      out.packed_ = std::move(stack.at(0));
      out.product_scale_ = at::ones({out.out_}, at::kFloat);
    }
    // What a row's centre contributes: each output's sum of its quantized
    // weights (Forward).
    out.weight_sums_ = qweight.dequantize().sum(1).contiguous();
    out.row_outliers_ = row_outliers;
    if (row_outliers > 0) {
      out.outlier_weight_ = qweight.int_repr().t().contiguous();
      out.outlier_scales_ = scales.to(at::kFloat).contiguous();
    }
    out.bias_ = bias.defined() ? bias.to(at::kFloat).contiguous()
                               : at::zeros({out.out_}, at::kFloat);
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
  const at::Tensor rows = x.reshape({-1, in_}).contiguous();
  const int64_t n = rows.size(0);
  shape.back() = out_;
  const float* xp = rows.data_ptr<float>();
  // Up to kChunkRows rows on one thread: the product is finished in place,
  // where it lies in the cache.
  const int threads = at::get_num_threads();
  const bool parallel = threads > 1 && !at::in_parallel_region() &&
                        n >= threads * kMinRowsPerThread;
  if (!parallel && n <= kChunkRows) {
    return ForwardRows(xp, n, nullptr).narrow(0, 0, n).view(shape);
  }
  // Otherwise blocks of kChunkRows rows, each through all three passes
  // before the next, so that the pass after the product reads it back from
  // the cache (at 4096 rows x 1536 outputs it is 25 MB, and that pass ran
  // at memory speed: 15% of an int8 forward at 32 x 128 tokens). With
  // several intra-op threads, in one parallel region: each thread takes its
  // share of the rows through all three passes (the library's product and
  // the passes around it then run inline, on that thread); four short
  // regions per projection, each ending when its slowest thread does, left
  // a lone 128-token input's two threads waiting for each other in a
  // quarter of the samples. On one thread parallel_for runs the whole range
  // inline. Rows do not depend on each other (the anchor row fixes the
  // product's input range in every block), so neither changes a value.
  at::Tensor y = at::empty({n, out_}, at::kFloat);
  float* yp = y.data_ptr<float>();
  const int64_t share = parallel ? (n + threads - 1) / threads : n;
  at::parallel_for(0, n, share, [&](int64_t begin, int64_t end) {
    c10::InferenceMode guard;  // thread-local: the pool's threads lack it
    for (int64_t r0 = begin; r0 < end; r0 += kChunkRows) {
      const int64_t r1 = std::min(end, r0 + kChunkRows);
      ForwardRows(xp + r0 * in_, r1 - r0, yp + r0 * out_);
    }
  });
  return y.view(shape);
}

at::Tensor Int8Linear::ForwardRows(const float* xp, int64_t n,
                                   float* yp) const {
  const int64_t k = float_channels_.defined() ? float_channels_.numel() : 0;
  // Each row mapped onto [-1, 1] by its own centre and half range, so its
  // 256 levels span what it holds (one-sided rows, such as GELU outputs,
  // would waste half of them on a range centred at zero). A row of equal
  // values (zeros included) maps to zeros and comes back through its
  // centre alone. The anchor row goes last (not direct: direct rows are
  // quantized here, by the scale it fixes).
  at::Tensor normalized = direct_ ? at::empty({n, in_}, at::kByte)
                                  : at::empty({n + 1, in_}, at::kFloat);
  if (!direct_) normalized[n].copy_(anchor_[0]);
  const at::Tensor kept = at::empty({n, k}, at::kFloat);
  const at::Tensor centre = at::empty({n}, at::kFloat);
  const at::Tensor half = at::empty({n}, at::kFloat);
  const int64_t d = row_outliers_;
  const at::Tensor out_idx = at::empty({n, d}, at::kLong);
  const at::Tensor out_val = at::empty({n, d}, at::kFloat);
  {
    float* np = direct_ ? nullptr : normalized.data_ptr<float>();
    uint8_t* bp = direct_ ? normalized.data_ptr<uint8_t>() : nullptr;
    float* kp = kept.data_ptr<float>();
    float* cp = centre.data_ptr<float>();
    float* hp = half.data_ptr<float>();
    const int64_t* ch = k > 0 ? float_channels_.data_ptr<int64_t>() : nullptr;
    at::parallel_for(0, n, 16, [&](int64_t begin, int64_t end) {
      if (direct_ && d == 0) {
        QuantizeRows(xp, keep_.data_ptr<float>(), bp, kp, cp, hp, ch, k, in_,
                     begin, end);
        return;
      }
      std::vector<float> scratch(direct_ ? in_ : 0);
      NormalizeRows(xp, np, bp, scratch.data(), kp, cp, hp, ch, k, in_, d,
                    out_idx.data_ptr<int64_t>(), out_val.data_ptr<float>(),
                    begin, end);
    });
  }
  std::vector<c10::IValue> stack;
  if (direct_) {
    static const c10::OperatorHandle pointwise =
        Op("onednn::qlinear_pointwise");
    stack = {normalized,          1.0,
             int64_t{128},        direct_weight_,
             direct_scales_,      direct_zeros_,
             c10::IValue(),       1.0,
             int64_t{0},          at::kFloat,
             std::string("none"), EmptyOptionalScalars(),
             std::string()};
    pointwise.callBoxed(&stack);
  } else {
    static const c10::OperatorHandle dynamic = Op("quantized::linear_dynamic");
    stack = {normalized, packed_, reduce_range_};
    dynamic.callBoxed(&stack);
  }
  // W (h q + c) = h (W q) + c (W 1), plus the bias and the float32
  // channels, from the product's first n rows into yp, or in place.
  at::Tensor product = stack.at(0).toTensor().contiguous();
  {
    const float* pp = product.data_ptr<float>();
    if (yp == nullptr) yp = product.data_ptr<float>();
    const float* fw = k > 0 ? float_weight_.data_ptr<float>() : nullptr;
    const float* kp = kept.data_ptr<float>();
    const float* cp = centre.data_ptr<float>();
    const float* hp = half.data_ptr<float>();
    const float* bp = bias_.data_ptr<float>();
    const float* ws = weight_sums_.data_ptr<float>();
    const float* ps = product_scale_.data_ptr<float>();
    const int8_t* qw = d > 0 ? outlier_weight_.data_ptr<int8_t>() : nullptr;
    const float* qs = d > 0 ? outlier_scales_.data_ptr<float>() : nullptr;
    const int64_t m = out_;
    at::parallel_for(0, n, 16, [&](int64_t begin, int64_t end) {
      FinishRows(pp, ps, yp, bp, ws, cp, hp, kp, fw, m, k, qw, qs,
                 out_idx.data_ptr<int64_t>(), out_val.data_ptr<float>(), d,
                 begin, end);
    });
  }
  return product;
}

}  // namespace encoder::model
