// The x86 instruction-set features that decide which CPU kernels are fast:
// read with cpuid (and the OS's xgetbv consent for the wide registers) once
// at start, never assumed from the build.
#ifndef ENCODER_SERVER_MODEL_KERNELS_CPU_FEATURES_H_
#define ENCODER_SERVER_MODEL_KERNELS_CPU_FEATURES_H_

#include <string>
#include <vector>

namespace encoder::model {

struct CpuFeatures {
  std::string model;   // the brand string, e.g. "AMD EPYC 7B13"
  std::string vendor;  // cpuid's vendor, e.g. "AuthenticAMD", "GenuineIntel"
  bool avx2 = false;
  bool fma = false;
  bool avx512f = false;
  bool avx512_vnni = false;
  bool avx512_bf16 = false;
  bool amx_bf16 = false;
  bool amx_int8 = false;
  // The ISA level the features were capped at and the variable that said
  // so ("AVX2 (ONEDNN_MAX_CPU_ISA)"), or "" when none applies (CapIsa).
  std::string isa_cap;

  // Native bfloat16 matrix multiply (AVX-512 BF16 or AMX BF16).
  bool native_bf16() const { return avx512_bf16 || amx_bf16; }
  // Native int8 dot products (AVX-512 VNNI or AMX INT8).
  bool native_int8() const { return avx512_vnni || amx_int8; }
  // Whether oneDNN's float32 product on weights packed once at load beats
  // the BLAS at every number of rows: wherever oneDNN runs AVX-512. Measured
  // per CPU kind on the MiniLM forward at 1 and 32 x 16-512 tokens
  // (docs/benchmarks-history.md, "Every product on oneDNN" and "Packed
  // weights on an Intel Xeon with AMX"): 1.11-1.52x on a Zen 4
  // EPYC (where MKL runs its AVX2 kernel), 1.05-1.14x on a Xeon with AMX
  // (where MKL runs AVX-512; packing saves the repacking of the weight on
  // every call). On an AVX2-only EPYC MKL was the faster above 256 rows, so
  // it is not assumed without AVX-512. Capped features (ONEDNN_MAX_CPU_ISA,
  // ENCODER_CPU_ISA) decide as the CPU they name would.
  bool packed_float32_wins() const { return avx512f; }
  // The same for bfloat16 products: wherever the CPU multiplies bfloat16
  // natively. On a Xeon with AMX the packed product with the feed-forward's
  // GELU in its epilogue ran MiniLM's projections 1.29-1.74x as fast as
  // the plain bfloat16 linear at 16-4096 rows, and 1.06-1.32x with oneDNN
  // capped to AVX512_CORE_BF16, the path of a Zen 4 EPYC
  // (docs/benchmarks-history.md, "Packed weights on an Intel Xeon with
  // AMX").
  bool packed_bfloat16_wins() const { return native_bf16(); }
  // The names of the features present, in the order above
  // ("avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "amx_bf16",
  // "amx_int8").
  std::vector<std::string> Names() const;
  // Names() joined with ',' ("none" when empty).
  std::string Joined() const;
};

// Lowers `f` to an ISA level as oneDNN's ONEDNN_MAX_CPU_ISA names it
// (case-insensitive): SSE41, AVX, AVX2 (also AVX2_VNNI, AVX2_VNNI_2: the
// int8 paths here use AVX-512 VNNI only), AVX512_CORE, AVX512_CORE_VNNI,
// AVX512_CORE_BF16 (also AVX512_CORE_FP16), AVX512_CORE_AMX (also
// AVX512_CORE_AMX_FP16), DEFAULT or ALL (no cap). A level never adds a
// feature the CPU lacks. False for a name not in that list (`f` is then
// unchanged).
bool CapIsa(const std::string& level, CpuFeatures* f);

// This machine's features (cached after the first call), lowered to the
// tighter of ENCODER_CPU_ISA and ONEDNN_MAX_CPU_ISA (or its older spelling
// DNNL_MAX_CPU_ISA) where set: so that a stronger CPU can run the paths of
// a lesser one, and so that the project's own kernels never pick a path
// that oneDNN, capped, would not run. On a non-x86 build every flag is
// false and the model is "unknown".
const CpuFeatures& DetectCpuFeatures();

// The error of an ENCODER_CPU_ISA value CapIsa does not know ("" when the
// variable is unset or valid): the server refuses to start on one. An
// unknown ONEDNN_MAX_CPU_ISA is ignored, as oneDNN itself ignores it.
std::string CpuIsaCapError();

}  // namespace encoder::model

#endif  // ENCODER_SERVER_MODEL_KERNELS_CPU_FEATURES_H_
