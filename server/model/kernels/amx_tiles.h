// The bfloat16 attention kernel's two products (bf16_attention.cc) on AMX
// tiles (Xeons from Sapphire Rapids on), from the kernel's own layouts:
// TDPBF16PS multiplies a 16 x 32 bfloat16 tile by a 16 x 16 tile of
// bfloat16 pairs into 16 x 16 float32 sums, so a key block of the keys
// layout ([d / 2][Skp][2], 16 keys) and a channel block of the values
// layout ([Skp / 2][d][2], 16 channels) are tiles as they lie. The second
// product takes 32 keys at a time, so Skp is a multiple of 32 here.
//
// Each output is a dot product over the channels (or keys) in a fixed
// order, as on AVX-512; AMX rounds each step to nearest even and flushes
// denormals, so the floats differ from the AVX-512 path's in the last
// bits, and not with the batch or the threads.
#ifndef ENCODER_SERVER_MODEL_KERNELS_AMX_TILES_H_
#define ENCODER_SERVER_MODEL_KERNELS_AMX_TILES_H_

#include <cstdint>

#if defined(__x86_64__)

namespace encoder::model::amx {

// Whether this process may use the AMX tiles: the CPU has AMX BF16 (not
// capped away) and Linux granted the tile data state (arch_prctl's
// ARCH_REQ_XCOMP_PERM for XTILEDATA, feature 18; oneDNN asks the same).
// Score and Mix need it, and a Tiles on their thread.
bool Ready();

// Loads the tiles' shape on this thread (every tile 16 x 64 bytes) for as
// long as it lives, and releases them after.
class Tiles {
 public:
  Tiles();
  ~Tiles();
  Tiles(const Tiles&) = delete;
  Tiles& operator=(const Tiles&) = delete;
};

// scores[16 rows][skp] = q[16 rows][d] . keys (q: bfloat16 rows of d, d a
// multiple of 32; keys: the keys layout, skp a multiple of 16), 4 key
// blocks at a time, 32 channels a step.
void Score(const uint16_t* q, int64_t d, const uint32_t* keys, int64_t skp,
           float* scores);

// out[rows][d] (row stride ldo) = probs[16 rows][skp] . values * norm[rows]
// (probs: bfloat16, skp a multiple of 32; values: the values layout, d a
// multiple of 16), 4 channel blocks at a time.
void Mix(int64_t d, const uint16_t* probs, const float* norm, int64_t rows,
         const uint32_t* values, int64_t skp, float* out, int64_t ldo);

}  // namespace encoder::model::amx

#endif  // __x86_64__

#endif  // ENCODER_SERVER_MODEL_KERNELS_AMX_TILES_H_
