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
#ifndef ENCODER_SERVER_MODEL_KERNELS_BF16_ATTENTION_H_
#define ENCODER_SERVER_MODEL_KERNELS_BF16_ATTENTION_H_

#include <ATen/ATen.h>

#include <vector>

namespace encoder::model {

// Whether Bf16Attention runs here for heads of `head_dim` channels: this
// CPU has AVX-512 BF16 and head_dim is 32, 64, 96 or 128.
bool Bf16AttentionSupported(int64_t head_dim);

// q [B, H, Sq, d], k and v [B, H, Sk, d], float32 on the CPU, each with
// unit stride along d (views of a projection's output are fine); `bias`
// undefined or float32 broadcastable to [B, H, Sq, Sk] (-inf masks a key).
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
