// The x86 instruction-set features that decide which CPU kernels are fast:
// read with cpuid (and the OS's xgetbv consent for the wide registers) once
// at start, never assumed from the build.
#ifndef ENCODER_SERVER_MODEL_CPU_FEATURES_H_
#define ENCODER_SERVER_MODEL_CPU_FEATURES_H_

#include <string>
#include <vector>

namespace encoder::model {

struct CpuFeatures {
  std::string model;  // the brand string, e.g. "AMD EPYC 7B13"
  bool avx2 = false;
  bool fma = false;
  bool avx512f = false;
  bool avx512_vnni = false;
  bool avx512_bf16 = false;
  bool amx_bf16 = false;
  bool amx_int8 = false;

  // Native bfloat16 matrix multiply (AVX-512 BF16 or AMX BF16).
  bool native_bf16() const { return avx512_bf16 || amx_bf16; }
  // Native int8 dot products (AVX-512 VNNI or AMX INT8).
  bool native_int8() const { return avx512_vnni || amx_int8; }
  // The names of the features present, in the order above
  // ("avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "amx_bf16",
  // "amx_int8").
  std::vector<std::string> Names() const;
  // Names() joined with ',' ("none" when empty).
  std::string Joined() const;
};

// This machine's features (cached after the first call). On a non-x86
// build every flag is false and the model is "unknown".
const CpuFeatures& DetectCpuFeatures();

}  // namespace encoder::model

#endif  // ENCODER_SERVER_MODEL_CPU_FEATURES_H_
