// Self-attention whose two products run in bfloat16 with float32 sums, on
// CPUs with AVX-512 BF16 (vdpbf16ps): softmax(q k^T * scale + bias) v.
//
// Queries, keys and values are rounded to bfloat16 once, per head; the
// scores are summed in float32, scaled, biased and normalized in float32;
// the probabilities are rounded to bfloat16 for the second product, whose
// sums are float32 again. Each query row depends only on its own query and
// its sequence's keys and values: the same floats alone or in any batch,
// on any number of threads.
//
// Where it pays: LibTorch's fused float32 kernel runs MKL's AVX2 sgemm on
// AMD CPUs, and its bfloat16 kernel packs for oneDNN only with AMX; on a
// Zen 4 EPYC this kernel takes the MiniLM attention of one 512-token input
// in a third of the fused kernel's time (docs/benchmarks-history.md,
// "int8: bfloat16 attention and rows quantized by the normalizing pass").
// On MiniLM's real weights the embeddings keep a mean cosine of 0.999997
// against the float32 attention.
//
// Where the CPU has AMX BF16 (and Linux grants the tiles), the two
// products run on AMX tiles from the same layouts; the softmax stays on
// AVX-512. A bfloat16 model's queries, keys and values are read as they
// are (they need no rounding), so it runs this kernel too
// (Encoder::SetBf16Attention): on a Xeon with AMX, MiniLM in bfloat16 ran
// 1.17x as fast at 32 x 128 tokens as with LibTorch's fused kernel per
// sequence (docs/benchmarks-history.md, "bfloat16 attention on AMX
// tiles").
#ifndef ENCODER_SERVER_MODEL_KERNELS_BF16_ATTENTION_H_
#define ENCODER_SERVER_MODEL_KERNELS_BF16_ATTENTION_H_

#include <ATen/ATen.h>

#include <vector>

namespace encoder::model {

// Whether Bf16Attention runs here for heads of `head_dim` channels: this
// CPU has AVX-512 BF16 and head_dim is 32, 64, 96 or 128.
bool Bf16AttentionSupported(int64_t head_dim);

// Whether a bfloat16 model's attention runs Bf16Attention when nothing
// says otherwise (--bf16-attention=auto): where it runs on AMX tiles.
// There it ran MiniLM in bfloat16 at 0.98-1.58x the rate of LibTorch's
// fused kernel per sequence (16 to 512 tokens, 1 and 32 inputs); on
// AVX-512 BF16 alone (a Xeon capped to AVX512_CORE_BF16) at 0.92-1.11x,
// slower at 512 tokens, so the fused kernel stays there
// (docs/benchmarks-history.md, "bfloat16 attention on AMX tiles").
bool Bf16AttentionByDefault(int64_t head_dim);

// Whether Bf16Attention's two products run on AMX tiles here: the CPU has
// AMX BF16 (ENCODER_CPU_ISA and ONEDNN_MAX_CPU_ISA not capping it away)
// and Linux granted the process the tile state.
bool Bf16AttentionOnAmx();

// q [B, H, Sq, d], k and v [B, H, Sk, d], all float32 or all bfloat16 on
// the CPU, each with unit stride along d (views of a projection's output
// are fine); `bias` undefined or broadcastable to [B, H, Sq, Sk], read in
// float32 (-inf masks a key).
// Returns [B, Sq, H * d] float32. A row whose every key is masked comes
// out as zeros. `lengths` (empty: none) gives each sequence's real tokens
// (Sq == Sk): sequence b's queries and keys are its first lengths[b]
// positions, as if it were alone (no padding mask needed), and its later
// rows come out as zeros. Only where Bf16AttentionSupported(d).
at::Tensor Bf16Attention(const at::Tensor& q, const at::Tensor& k,
                         const at::Tensor& v, const at::Tensor& bias,
                         double scale,
                         const std::vector<int64_t>& lengths = {});

}  // namespace encoder::model

#endif  // ENCODER_SERVER_MODEL_KERNELS_BF16_ATTENTION_H_
