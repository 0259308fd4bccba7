#include "server/model/kernels/bf16_attention.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <vector>

#include "server/model/kernels/amx_tiles.h"
#include "server/model/kernels/cpu_features.h"

#if defined(__x86_64__)
#include <immintrin.h>
#define ENCODER_BF16_ATTENTION 1
// GCC 12's AVX-512 headers start some intrinsics (reductions, widening
// loads) from _mm512_undefined_*, which its -Wmaybe-uninitialized reports
// (or, where inlined into a template, -Wuninitialized) in every caller: a
// false alarm of the headers, not of this file.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#else
#define ENCODER_BF16_ATTENTION 0
#endif

namespace encoder::model {

#if ENCODER_BF16_ATTENTION
namespace {

#define ENCODER_BF16_TARGET \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")))

// The tiles' loops over rows and vectors run a constant number of times
// and must be unrolled, or their accumulators live in memory: GCC's -O2
// leaves them rolled (3x slower here).
#if defined(__clang__)
#define ENCODER_UNROLL _Pragma("unroll")
#else
#define ENCODER_UNROLL _Pragma("GCC unroll 16")
#endif

// Query rows scored, normalized and mixed together: their scores (rows x
// keys float32) stay in the cache between the three steps.
constexpr int64_t kRowBlock = 16;

// The operands of one head, rounded to bfloat16 and laid out for
// vdpbf16ps, which multiplies pairs of bfloat16 and adds both products to
// a float32 lane:
// - keys [d / 2][Skp][2]: for each pair of channels, every key's two values
//   side by side, so that one vector holds 16 keys' pairs;
// - values [Skp / 2][d][2]: for each pair of keys, every channel's two
//   values side by side, so that one vector holds 16 channels' pairs.
// Skp is Sk rounded up to 16; the keys and values past Sk are zeros.
struct HeadOperands {
  std::vector<uint32_t> keys;    // bfloat16 pairs
  std::vector<uint32_t> values;  // bfloat16 pairs
};

ENCODER_BF16_TARGET inline __m256i ToBf16(__m512 x) {
  return reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(x));
}

// 16 values at x as bfloat16: float32 rounded to nearest even, bfloat16
// (its bits, uint16_t) as they are.
ENCODER_BF16_TARGET inline __m256i Bf16At(const float* x) {
  return ToBf16(_mm512_loadu_ps(x));
}
ENCODER_BF16_TARGET inline __m256i Bf16At(const uint16_t* x) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x));
}

// 32 values at x as bfloat16, in order.
ENCODER_BF16_TARGET inline __m512i Bf16x32At(const float* x) {
  return reinterpret_cast<__m512i>(
      _mm512_cvtne2ps_pbh(_mm512_loadu_ps(x + 16), _mm512_loadu_ps(x)));
}
ENCODER_BF16_TARGET inline __m512i Bf16x32At(const uint16_t* x) {
  return _mm512_loadu_si512(x);
}

// Rows [rows x d] (row stride `ld`) to bfloat16 [rows x d].
template <typename T>
ENCODER_BF16_TARGET void RoundRows(const T* x, int64_t ld, int64_t rows,
                                   int64_t d, uint16_t* out) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < d; c += 16) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + r * d + c),
                          Bf16At(x + r * ld + c));
    }
  }
}

// out[c] = column c of the 16 x 16 matrix of 32-bit values rows[0..15].
ENCODER_BF16_TARGET void Transpose16(const __m512i* rows, __m512i* out) {
  __m512i t[16], u[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_epi32(rows[i], rows[i + 1]);
    t[i + 1] = _mm512_unpackhi_epi32(rows[i], rows[i + 1]);
  }
  // u[4i + k], 128-bit lane L: column 4L + k of rows 4i .. 4i + 3.
  for (int i = 0; i < 16; i += 4) {
    u[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
    u[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
    u[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
    u[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
  }
  for (int k = 0; k < 4; ++k) {
    const __m512i x0 = _mm512_shuffle_i32x4(u[k], u[4 + k], 0x44);
    const __m512i x1 = _mm512_shuffle_i32x4(u[8 + k], u[12 + k], 0x44);
    const __m512i x2 = _mm512_shuffle_i32x4(u[k], u[4 + k], 0xEE);
    const __m512i x3 = _mm512_shuffle_i32x4(u[8 + k], u[12 + k], 0xEE);
    out[k] = _mm512_shuffle_i32x4(x0, x1, 0x88);
    out[4 + k] = _mm512_shuffle_i32x4(x0, x1, 0xDD);
    out[8 + k] = _mm512_shuffle_i32x4(x2, x3, 0x88);
    out[12 + k] = _mm512_shuffle_i32x4(x2, x3, 0xDD);
  }
}

template <typename T>
ENCODER_BF16_TARGET void PackHead(const T* k, int64_t ldk, const T* v,
                                  int64_t ldv, int64_t sk, int64_t skp,
                                  int64_t d, HeadOperands* out) {
  const int64_t pairs = d / 2;
  out->keys.resize(static_cast<size_t>(pairs * skp));
  out->values.assign(static_cast<size_t>(skp / 2 * d), 0);
  uint32_t* keys = out->keys.data();
  // 16 keys at a time: each key's 16 channel pairs of a group of 32
  // channels as one row, transposed into 16 vectors of one pair each.
  __m512i rows[16], cols[16];
  for (int64_t j0 = 0; j0 < skp; j0 += 16) {
    for (int64_t g = 0; g < d; g += 32) {
      for (int64_t i = 0; i < 16; ++i) {
        rows[i] = j0 + i < sk ? Bf16x32At(k + (j0 + i) * ldk + g)
                              : _mm512_setzero_si512();
      }
      Transpose16(rows, cols);
      for (int64_t c = 0; c < 16; ++c) {
        _mm512_storeu_si512(keys + (g / 2 + c) * skp + j0, cols[c]);
      }
    }
  }
  uint32_t* values = out->values.data();
  for (int64_t j = 0; j < sk; j += 2) {
    const bool second = j + 1 < sk;
    for (int64_t c = 0; c < d; c += 16) {
      const __m512i a = _mm512_cvtepu16_epi32(Bf16At(v + j * ldv + c));
      const __m512i b =
          second ? _mm512_slli_epi32(
                       _mm512_cvtepu16_epi32(Bf16At(v + (j + 1) * ldv + c)), 16)
                 : _mm512_setzero_si512();
      _mm512_storeu_si512(values + (j / 2) * d + c, _mm512_or_si512(a, b));
    }
  }
}

ENCODER_BF16_TARGET inline __m512bh Pair(const void* p) {
  uint32_t bits;
  std::memcpy(&bits, p, sizeof(bits));
  return reinterpret_cast<__m512bh>(_mm512_set1_epi32(static_cast<int>(bits)));
}

ENCODER_BF16_TARGET inline __m512bh Load(const uint32_t* p) {
  return reinterpret_cast<__m512bh>(_mm512_loadu_si512(p));
}

// scores[R rows][16 * NV keys] = q[R rows] . keys[key0 .. key0 + 16 NV].
template <int R, int NV>
ENCODER_BF16_TARGET void ScoreTile(const uint16_t* q, int64_t d,
                                   const uint32_t* keys, int64_t skp,
                                   float* scores, int64_t ld) {
  __m512 acc[R][NV];
  ENCODER_UNROLL
  for (int r = 0; r < R; ++r) {
    ENCODER_UNROLL
    for (int n = 0; n < NV; ++n) acc[r][n] = _mm512_setzero_ps();
  }
  for (int64_t p = 0; p < d / 2; ++p) {
    __m512bh kv[NV];
    ENCODER_UNROLL
    for (int n = 0; n < NV; ++n) kv[n] = Load(keys + p * skp + 16 * n);
    ENCODER_UNROLL
    for (int r = 0; r < R; ++r) {
      const __m512bh qp = Pair(q + r * d + 2 * p);
      ENCODER_UNROLL
      for (int n = 0; n < NV; ++n) {
        acc[r][n] = _mm512_dpbf16_ps(acc[r][n], qp, kv[n]);
      }
    }
  }
  ENCODER_UNROLL
  for (int r = 0; r < R; ++r) {
    ENCODER_UNROLL
    for (int n = 0; n < NV; ++n) {
      _mm512_storeu_ps(scores + r * ld + 16 * n, acc[r][n]);
    }
  }
}

template <int R>
ENCODER_BF16_TARGET void ScoreRows(const uint16_t* q, int64_t d,
                                   const uint32_t* keys, int64_t skp,
                                   float* scores, int64_t ld) {
  int64_t j = 0;
  for (; j + 64 <= skp; j += 64) {
    ScoreTile<R, 4>(q, d, keys + j, skp, scores + j, ld);
  }
  switch ((skp - j) / 16) {
    case 3:
      ScoreTile<R, 3>(q, d, keys + j, skp, scores + j, ld);
      break;
    case 2:
      ScoreTile<R, 2>(q, d, keys + j, skp, scores + j, ld);
      break;
    case 1:
      ScoreTile<R, 1>(q, d, keys + j, skp, scores + j, ld);
      break;
    default:
      break;
  }
}

// scores[rows][skp] = q[rows][d] . keys, 4 rows at a time.
ENCODER_BF16_TARGET void ScoreBlock(const uint16_t* q, int64_t d, int64_t rows,
                                    const uint32_t* keys, int64_t skp,
                                    float* scores) {
  int64_t r = 0;
  for (; r + 4 <= rows; r += 4) {
    ScoreRows<4>(q + r * d, d, keys, skp, scores + r * skp, skp);
  }
  for (; r < rows; ++r) {
    ScoreRows<1>(q + r * d, d, keys, skp, scores + r * skp, skp);
  }
}

// exp(x) for x <= 0 in float32 to about 2 ulp (a degree-6 polynomial on
// |r| <= ln 2 / 2 after x = n ln 2 + r); below -87.3 (where float32's exp
// leaves the normal range) exactly 0, so that masked keys (-inf) weigh 0.
ENCODER_BF16_TARGET inline __m512 ExpNonPositive(__m512 x) {
  const __mmask16 live =
      _mm512_cmp_ps_mask(x, _mm512_set1_ps(-87.3f), _CMP_GT_OQ);
  x = _mm512_max_ps(x, _mm512_set1_ps(-87.3f));
  const __m512 n = _mm512_roundscale_ps(
      _mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
      _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.0f / 720);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  return _mm512_maskz_scalef_ps(live, p, n);
}

// One row: scores * scale + bias over sk keys, and exp(x - max x) rounded
// to bfloat16 into probs[skp] (zeros past sk). Returns 1 / the sum of the
// exponentials, which the second product's sums are multiplied by (0 when
// every key is masked). Normalizing after the product, on d sums instead
// of sk probabilities, saves a pass over the row.
ENCODER_BF16_TARGET float SoftmaxRow(float* s, const float* bias, float scale,
                                     int64_t sk, int64_t skp, uint16_t* probs) {
  const __m512 sc = _mm512_set1_ps(scale);
  __m512 mx = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  // s has skp >= sk columns (a multiple of 16): whole vectors stay inside.
  for (int64_t j = 0; j < sk; j += 16) {
    const __mmask16 m =
        sk - j >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (sk - j)) - 1);
    __m512 x = _mm512_mul_ps(_mm512_loadu_ps(s + j), sc);
    if (bias != nullptr) {
      x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(m, bias + j));
    }
    _mm512_storeu_ps(s + j, x);
    mx = _mm512_mask_max_ps(mx, m, mx, x);
  }
  const float top = _mm512_reduce_max_ps(mx);
  if (top == -std::numeric_limits<float>::infinity()) {
    std::fill(probs, probs + skp, uint16_t{0});
    return 0.0f;
  }
  const __m512 shift = _mm512_set1_ps(top);
  __m512 sum = _mm512_setzero_ps();
  int64_t j = 0;
  for (; j < sk; j += 16) {
    const __mmask16 m =
        sk - j >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (sk - j)) - 1);
    const __m512 e = _mm512_maskz_mov_ps(
        m, ExpNonPositive(_mm512_sub_ps(_mm512_loadu_ps(s + j), shift)));
    sum = _mm512_add_ps(sum, e);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(probs + j), ToBf16(e));
  }
  for (; j < skp; j += 16) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(probs + j),
                        _mm256_setzero_si256());
  }
  return 1.0f / _mm512_reduce_add_ps(sum);
}

// out[R rows][d] = probs[R rows][skp] . values * norm[R rows], d = 16 DV
// channels.
template <int R, int DV>
ENCODER_BF16_TARGET void MixTile(const uint16_t* probs, int64_t ldp,
                                 const float* norm, const uint32_t* values,
                                 int64_t skp, float* out, int64_t ldo) {
  constexpr int64_t d = 16 * DV;
  __m512 acc[R][DV];
  ENCODER_UNROLL
  for (int r = 0; r < R; ++r) {
    ENCODER_UNROLL
    for (int n = 0; n < DV; ++n) acc[r][n] = _mm512_setzero_ps();
  }
  for (int64_t p = 0; p < skp / 2; ++p) {
    __m512bh vv[DV];
    ENCODER_UNROLL
    for (int n = 0; n < DV; ++n) vv[n] = Load(values + p * d + 16 * n);
    ENCODER_UNROLL
    for (int r = 0; r < R; ++r) {
      const __m512bh pp = Pair(probs + r * ldp + 2 * p);
      ENCODER_UNROLL
      for (int n = 0; n < DV; ++n) {
        acc[r][n] = _mm512_dpbf16_ps(acc[r][n], pp, vv[n]);
      }
    }
  }
  ENCODER_UNROLL
  for (int r = 0; r < R; ++r) {
    const __m512 scale = _mm512_set1_ps(norm[r]);
    ENCODER_UNROLL
    for (int n = 0; n < DV; ++n) {
      _mm512_storeu_ps(out + r * ldo + 16 * n, _mm512_mul_ps(acc[r][n], scale));
    }
  }
}

// All `rows` rows (at most kRowBlock), in tiles of up to 16 / DV rows.
template <int DV>
ENCODER_BF16_TARGET void MixRows(const uint16_t* probs, int64_t ldp,
                                 const float* norm, int64_t rows,
                                 const uint32_t* values, int64_t skp,
                                 float* out, int64_t ldo) {
  constexpr int kTile = DV >= 16 ? 1 : 16 / DV;
  int64_t r = 0;
  for (; r + kTile <= rows; r += kTile) {
    MixTile<kTile, DV>(probs + r * ldp, ldp, norm + r, values, skp,
                       out + r * ldo, ldo);
  }
  for (; r < rows; ++r) {
    MixTile<1, DV>(probs + r * ldp, ldp, norm + r, values, skp, out + r * ldo,
                   ldo);
  }
}

ENCODER_BF16_TARGET void MixBlock(int64_t d, const uint16_t* probs, int64_t ldp,
                                  const float* norm, int64_t rows,
                                  const uint32_t* values, int64_t skp,
                                  float* out, int64_t ldo) {
  switch (d) {
    case 32:
      MixRows<2>(probs, ldp, norm, rows, values, skp, out, ldo);
      break;
    case 64:
      MixRows<4>(probs, ldp, norm, rows, values, skp, out, ldo);
      break;
    case 96:
      MixRows<6>(probs, ldp, norm, rows, values, skp, out, ldo);
      break;
    default:
      MixRows<8>(probs, ldp, norm, rows, values, skp, out, ldo);
      break;
  }
}

// Keys rounded up for the layouts: to 32 on AMX (its second product takes
// 32 keys a step), else to 16.
int64_t KeyPadding(int64_t sk, bool amx) {
  const int64_t unit = amx ? 32 : 16;
  return (sk + unit - 1) / unit * unit;
}

// T: float or uint16_t (bfloat16's bits), the type of q, k and v.
template <typename T>
struct Problem {
  int64_t batch, heads, sq, sk, skp, d;
  const int64_t* lengths;  // null: every sequence sq queries, sk keys
  const T* q;
  int64_t q_strides[3];  // batch, head, row
  const T* k;
  int64_t k_strides[3];
  const T* v;
  int64_t v_strides[3];
  const float* bias;  // null: none
  int64_t bias_strides[3];
  float scale;
  float* out;  // [batch, sq, heads, d]
  bool amx;    // the products on AMX tiles (amx::Ready)
};

// Query rows [row0, row1) of head (b, h) over its sk keys (skp rounded
// up); `head` already holds its keys and values.
template <typename T>
ENCODER_BF16_TARGET void RunRows(const Problem<T>& pb, int64_t b, int64_t h,
                                 int64_t row0, int64_t row1, int64_t sk,
                                 int64_t skp, const HeadOperands& head,
                                 std::vector<uint16_t>& queries,
                                 std::vector<float>& scores,
                                 std::vector<uint16_t>& probs) {
  const int64_t d = pb.d;
  float norm[kRowBlock];
  const T* q = pb.q + b * pb.q_strides[0] + h * pb.q_strides[1];
  for (int64_t i0 = row0; i0 < row1; i0 += kRowBlock) {
    const int64_t rows = std::min(kRowBlock, row1 - i0);
    RoundRows(q + i0 * pb.q_strides[2], pb.q_strides[2], rows, d,
              queries.data());
    if (pb.amx) {
      amx::Score(queries.data(), d, head.keys.data(), skp, scores.data());
    } else {
      ScoreBlock(queries.data(), d, rows, head.keys.data(), skp, scores.data());
    }
    for (int64_t r = 0; r < rows; ++r) {
      const float* bias = pb.bias == nullptr
                              ? nullptr
                              : pb.bias + b * pb.bias_strides[0] +
                                    h * pb.bias_strides[1] +
                                    (i0 + r) * pb.bias_strides[2];
      norm[r] = SoftmaxRow(scores.data() + r * skp, bias, pb.scale, sk, skp,
                           probs.data() + r * skp);
    }
    float* out = pb.out + ((b * pb.sq + i0) * pb.heads + h) * d;
    if (pb.amx) {
      amx::Mix(d, probs.data(), norm, rows, head.values.data(), skp, out,
               pb.heads * d);
    } else {
      MixBlock(d, probs.data(), skp, norm, rows, head.values.data(), skp, out,
               pb.heads * d);
    }
  }
}

// Every head's query rows of `pb`, over LibTorch's intra-op threads.
template <typename T>
void RunAll(const Problem<T>& pb) {
  // Work items: a head's query rows, split into up to `splits` ranges so
  // that a lone sequence's heads still give every thread work.
  const int64_t heads = pb.batch * pb.heads;
  const int threads = at::in_parallel_region() ? 1 : at::get_num_threads();
  const int64_t blocks = (pb.sq + kRowBlock - 1) / kRowBlock;
  const int64_t splits =
      std::clamp<int64_t>((4 * threads + heads - 1) / heads, 1, blocks);
  const int64_t items = heads * splits;
  const int64_t grain =
      threads > 1 ? std::max<int64_t>(1, items / (4 * threads)) : items;
  at::parallel_for(0, items, grain, [&](int64_t begin, int64_t end) {
    std::optional<amx::Tiles> tiles;
    if (pb.amx) tiles.emplace();
    HeadOperands head;
    std::vector<uint16_t> queries(static_cast<size_t>(kRowBlock * pb.d));
    std::vector<float> scores(static_cast<size_t>(kRowBlock * pb.skp));
    std::vector<uint16_t> probs(static_cast<size_t>(kRowBlock * pb.skp));
    int64_t packed = -1;
    for (int64_t item = begin; item < end; ++item) {
      const int64_t bh = item / splits, part = item % splits;
      const int64_t b = bh / pb.heads, h = bh % pb.heads;
      const int64_t sq = pb.lengths != nullptr ? pb.lengths[b] : pb.sq;
      const int64_t sk = pb.lengths != nullptr ? pb.lengths[b] : pb.sk;
      if (sq == 0) continue;
      const int64_t skp = KeyPadding(sk, pb.amx);
      if (bh != packed) {
        PackHead(pb.k + b * pb.k_strides[0] + h * pb.k_strides[1],
                 pb.k_strides[2],
                 pb.v + b * pb.v_strides[0] + h * pb.v_strides[1],
                 pb.v_strides[2], sk, skp, pb.d, &head);
        packed = bh;
      }
      // This sequence's blocks of query rows, shared among the splits.
      const int64_t own = (sq + kRowBlock - 1) / kRowBlock;
      const int64_t row0 = own * part / splits * kRowBlock;
      const int64_t row1 = std::min(sq, own * (part + 1) / splits * kRowBlock);
      if (row0 >= row1) continue;
      RunRows(pb, b, h, row0, row1, sk, skp, head, queries, scores, probs);
    }
  });
}

// Problem<T> of q, k, v and the rest, set up and run into `out`.
template <typename T>
void Solve(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
           const at::Tensor& bias, double scale,
           const std::vector<int64_t>& lengths, at::Tensor& out) {
  Problem<T> pb{};
  pb.batch = q.size(0);
  pb.heads = q.size(1);
  pb.sq = q.size(2);
  pb.sk = k.size(2);
  pb.amx = amx::Ready();
  pb.skp = KeyPadding(pb.sk, pb.amx);
  pb.d = q.size(3);
  TORCH_CHECK(k.size(0) == pb.batch && v.size(0) == pb.batch &&
                  k.size(1) == pb.heads && v.size(1) == pb.heads &&
                  v.size(2) == pb.sk && k.size(3) == pb.d && v.size(3) == pb.d,
              "Bf16Attention: q, k, v shapes disagree");
  auto strides = [](const at::Tensor& t, int64_t* s) {
    for (int i = 0; i < 3; ++i) s[i] = t.size(i) == 1 ? 0 : t.stride(i);
  };
  pb.q = static_cast<const T*>(q.data_ptr());
  strides(q, pb.q_strides);
  pb.k = static_cast<const T*>(k.data_ptr());
  strides(k, pb.k_strides);
  pb.v = static_cast<const T*>(v.data_ptr());
  strides(v, pb.v_strides);
  at::Tensor bb;
  if (bias.defined()) {
    bb = bias.to(at::kFloat).expand({pb.batch, pb.heads, pb.sq, pb.sk});
    if (bb.stride(3) != 1) bb = bb.contiguous();
    pb.bias = bb.data_ptr<float>();
    strides(bb, pb.bias_strides);
  }
  pb.scale = static_cast<float>(scale);
  out = at::empty({pb.batch, pb.sq, pb.heads * pb.d}, at::kFloat);
  pb.out = out.data_ptr<float>();
  if (pb.sq == 0 || pb.batch == 0 || pb.heads == 0) return;
  if (pb.sk == 0) {
    out.zero_();
    return;
  }
  if (!lengths.empty()) {
    TORCH_CHECK(
        static_cast<int64_t>(lengths.size()) == pb.batch && pb.sq == pb.sk,
        "Bf16Attention: one length per sequence, and Sq == Sk");
    for (int64_t b = 0; b < pb.batch; ++b) {
      TORCH_CHECK(lengths[b] >= 0 && lengths[b] <= pb.sq,
                  "Bf16Attention: length ", lengths[b], " outside [0, ", pb.sq,
                  "]");
      out[b].narrow(0, lengths[b], pb.sq - lengths[b]).zero_();
    }
    pb.lengths = lengths.data();
  }
  RunAll(pb);
}

}  // namespace
#endif  // ENCODER_BF16_ATTENTION

bool Bf16AttentionSupported(int64_t head_dim) {
#if ENCODER_BF16_ATTENTION
  return DetectCpuFeatures().avx512_bf16 && (head_dim == 32 || head_dim == 64 ||
                                             head_dim == 96 || head_dim == 128);
#else
  (void)head_dim;
  return false;
#endif
}

bool Bf16AttentionByDefault(int64_t head_dim) {
  return Bf16AttentionSupported(head_dim) && Bf16AttentionOnAmx();
}

bool Bf16AttentionOnAmx() {
#if ENCODER_BF16_ATTENTION
  return amx::Ready();
#else
  return false;
#endif
}

at::Tensor Bf16Attention(const at::Tensor& q, const at::Tensor& k,
                         const at::Tensor& v, const at::Tensor& bias,
                         double scale, const std::vector<int64_t>& lengths) {
  TORCH_CHECK(q.dim() == 4 && k.dim() == 4 && v.dim() == 4,
              "Bf16Attention: q, k, v must be [B, H, S, d]");
  TORCH_CHECK(Bf16AttentionSupported(q.size(3)),
              "Bf16Attention: not supported here for head size ", q.size(3));
#if ENCODER_BF16_ATTENTION
  const at::ScalarType dtype = q.scalar_type();
  auto unit_rows = [dtype](const at::Tensor& t) {
    TORCH_CHECK(t.scalar_type() == dtype &&
                    (dtype == at::kFloat || dtype == at::kBFloat16) &&
                    t.device().is_cpu(),
                "Bf16Attention: q, k, v float32 or bfloat16 CPU tensors, all "
                "of one dtype");
    return t.stride(3) == 1 ? t : t.contiguous();
  };
  const at::Tensor qq = unit_rows(q), kk = unit_rows(k), vv = unit_rows(v);
  at::Tensor out;
  if (dtype == at::kFloat) {
    Solve<float>(qq, kk, vv, bias, scale, lengths, out);
  } else {
    Solve<uint16_t>(qq, kk, vv, bias, scale, lengths, out);
  }
  return out;
#else
  (void)scale, (void)bias, (void)lengths;
  return at::Tensor();
#endif
}

}  // namespace encoder::model
