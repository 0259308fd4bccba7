// encoder-server's precision flags: --dtype (float32, float16, bfloat16,
// auto), --quantize (none, int8) and --force-dtype, checked against the
// device and the CPU's detected features.
#ifndef ENCODER_SERVER_APP_PRECISION_FLAGS_H_
#define ENCODER_SERVER_APP_PRECISION_FLAGS_H_

#include <CLI/CLI.hpp>

#include <string>

#include "absl/status/status.h"
#include "server/model/encoder.h"
#include "server/model/kernels/cpu_features.h"
#include "server/runner/model_host.h"

namespace encoder {

struct PrecisionFlags {
  std::string dtype = "float32";
  std::string quantize = "none";
  bool force_dtype = false;
  std::string pack_weights = "auto";  // auto, true or false
  int64_t packed_max_rows = -1;       // -1: chosen for the CPU
  int64_t packed_min_elements = -1;   // -1: chosen for the dtype
  int64_t int8_float_channels = model::kDefaultInt8FloatChannels;
  int64_t int8_row_outliers = 0;
  std::string int8_attention = "auto";  // auto, float32 or bfloat16
  std::string bf16_attention = "auto";  // auto, bfloat16 or fused
};

void DefinePrecisionFlags(CLI::App& app, PrecisionFlags& flags);

// Fills options->dtype, quantize, auto_precision, pack_weights,
// packed_max_rows, packed_min_elements, int8_float_channels, int8_row_outliers
// and int8_attention and bf16_attention (their "bfloat16" needs AVX-512 BF16).
// --pack-weights=auto packs where the CPU makes oneDNN's packed product the
// faster at every size for a model's products (float32:
// CpuFeatures::packed_float32_wins; bfloat16: packed_bfloat16_wins, and
// bfloat16 only where it is native), and then every
// product; --packed-max-rows -1 means every product (0) there and 256
// elsewhere. On the CPU,
// bfloat16 needs native bfloat16 (AVX-512 BF16 or AMX BF16) unless
// --force-dtype: the library emulates it otherwise, tens of times slower than
// float32. float16 needs CUDA; int8 needs the CPU and float32.
absl::Status ApplyPrecisionFlags(const PrecisionFlags& flags,
                                 const model::CpuFeatures& cpu,
                                 runner::HostOptions* options);

}  // namespace encoder

#endif  // ENCODER_SERVER_APP_PRECISION_FLAGS_H_
