#include "server/model/kernels/amx_tiles.h"

#if defined(__x86_64__)

#include <immintrin.h>

#include <algorithm>

#include "server/model/kernels/cpu_features.h"

#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

// GCC 12's AVX-512 headers start some intrinsics from _mm512_undefined_*,
// which its -Wmaybe-uninitialized reports in every caller (as in
// bf16_attention.cc): a false alarm of the headers.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

#define ENCODER_AMX_TARGET                                    \
  __attribute__((                                             \
      target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16," \
             "amx-tile,amx-bf16")))

namespace encoder::model::amx {
namespace {

// Every tile is 16 rows of 64 bytes: tmm0-3 hold sums, tmm4 the left
// operand, tmm5 the right one.
struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

}  // namespace

bool Ready() {
  static const bool ready = [] {
#if defined(__linux__)
    if (!DetectCpuFeatures().amx_bf16) return false;
    constexpr long kReqXcompPerm = 0x1023, kXtileData = 18;
    return syscall(SYS_arch_prctl, kReqXcompPerm, kXtileData) == 0;
#else
    return false;
#endif
  }();
  return ready;
}

namespace {

// The tiles' shape (every tile 16 x 64 bytes), loaded on this thread.
ENCODER_AMX_TARGET void LoadConfig() {
  // Static: GCC's _tile_loadconfig declares only the first 8 bytes as
  // read, so the stores of a local configuration may be dropped.
  static const TileConfig config = [] {
    TileConfig c;
    for (int t = 0; t < 6; ++t) {
      c.colsb[t] = 64;
      c.rows[t] = 16;
    }
    return c;
  }();
  _tile_loadconfig(&config);
}

ENCODER_AMX_TARGET void Release() { _tile_release(); }

}  // namespace

// GCC takes a target attribute only where a member is first declared, so
// the tile instructions run in the functions above.
Tiles::Tiles() { LoadConfig(); }

Tiles::~Tiles() { Release(); }

namespace {

// Sums tile `t` into out[16][16] (row stride ld floats).
#define ENCODER_STORE_SUMS(t, out, ld) \
  _tile_stored(t, out, static_cast<int64_t>((ld) * sizeof(float)))

// out[16][16 * blocks] (row stride ldo floats; blocks at most 4) = the sum
// over `steps` steps of a left tile (16 rows of 32 bfloat16: left + 32 s,
// rows left_stride bytes apart) times `blocks` right tiles side by side
// (16 rows of 16 bfloat16 pairs: right + right_step s + 16 b, rows
// right_stride bytes apart).
ENCODER_AMX_TARGET void TileProduct(const uint16_t* left, int64_t left_stride,
                                    const uint32_t* right, int64_t right_step,
                                    int64_t right_stride, int64_t steps,
                                    int64_t blocks, float* out, int64_t ldo) {
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  for (int64_t s = 0; s < steps; ++s) {
    _tile_loadd(4, left + 32 * s, left_stride);
    const uint32_t* r = right + right_step * s;
    _tile_loadd(5, r, right_stride);
    _tile_dpbf16ps(0, 4, 5);
    if (blocks > 1) {
      _tile_loadd(5, r + 16, right_stride);
      _tile_dpbf16ps(1, 4, 5);
    }
    if (blocks > 2) {
      _tile_loadd(5, r + 32, right_stride);
      _tile_dpbf16ps(2, 4, 5);
    }
    if (blocks > 3) {
      _tile_loadd(5, r + 48, right_stride);
      _tile_dpbf16ps(3, 4, 5);
    }
  }
  ENCODER_STORE_SUMS(0, out, ldo);
  if (blocks > 1) ENCODER_STORE_SUMS(1, out + 16, ldo);
  if (blocks > 2) ENCODER_STORE_SUMS(2, out + 32, ldo);
  if (blocks > 3) ENCODER_STORE_SUMS(3, out + 48, ldo);
}

#undef ENCODER_STORE_SUMS

}  // namespace

ENCODER_AMX_TARGET void Score(const uint16_t* q, int64_t d,
                              const uint32_t* keys, int64_t skp,
                              float* scores) {
  for (int64_t j = 0; j < skp; j += 64) {
    TileProduct(q, d * 2, keys + j, 16 * skp, skp * 4, d / 32,
                std::min<int64_t>(4, (skp - j) / 16), scores + j, skp);
  }
}

// Through sums[16][64], then scaled by each row's norm.
ENCODER_AMX_TARGET void Mix(int64_t d, const uint16_t* probs, const float* norm,
                            int64_t rows, const uint32_t* values, int64_t skp,
                            float* out, int64_t ldo) {
  alignas(64) float sums[16 * 64];
  for (int64_t c0 = 0; c0 < d; c0 += 64) {
    const int64_t blocks = std::min<int64_t>(4, (d - c0) / 16);
    TileProduct(probs, skp * 2, values + c0, 16 * d, d * 4, skp / 32, blocks,
                sums, 64);
    for (int64_t r = 0; r < rows; ++r) {
      const __m512 scale = _mm512_set1_ps(norm[r]);
      for (int64_t b = 0; b < blocks; ++b) {
        _mm512_storeu_ps(
            out + r * ldo + c0 + 16 * b,
            _mm512_mul_ps(_mm512_load_ps(sums + r * 64 + 16 * b), scale));
      }
    }
  }
}

}  // namespace encoder::model::amx

#endif  // __x86_64__
