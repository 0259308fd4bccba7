#include "server/app/precision_flags.h"

#include <limits>

#include "absl/strings/str_cat.h"
#include "server/model/dtype.h"
#include "server/model/kernels/int8_linear.h"
#include "server/model/kernels/packed_linear.h"

namespace encoder {

void DefinePrecisionFlags(CLI::App& app, PrecisionFlags& f) {
  app.add_option("--dtype", f.dtype,
                 "float32 | float16 | bfloat16 | auto (float16 needs CUDA; "
                 "bfloat16 on the CPU needs avx512_bf16 or amx_bf16; auto: "
                 "on the CPU, the fastest of float32, int8 and native "
                 "bfloat16 that passes the quality gate, timed at start)")
      ->capture_default_str();
  app.add_option("--quantize", f.quantize,
                 "none | int8: int8 weights (per output channel) and "
                 "per-token int8 activations for the linear layers (CPU, "
                 "float32); a repository entry's \"quantize\" overrides")
      ->capture_default_str();
  app.add_option("--int8-float-channels", f.int8_float_channels,
                 "int8: in each projection, keep this many input channels "
                 "in float32, those reaching the largest |x| on a "
                 "calibration pass over seeded random tokens at load (a "
                 "few channels run far above the rest and would set every "
                 "token's int8 range); 0 quantizes every channel")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--int8-row-outliers", f.int8_row_outliers,
                 "int8: in each layer's second feed-forward projection, "
                 "also keep each token's this many largest |x| in float32, "
                 "wherever they fall (the large values after a GELU move "
                 "from token to token, so fixed channels miss them); costs "
                 "a second int8 copy of that weight. 0: none")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--bf16-attention", f.bf16_attention,
                 "bfloat16 models on the CPU: how attention without maps "
                 "runs (/info says \"attention_kernel\"). bfloat16: the "
                 "server's kernel, float32 sums and softmax, on AMX tiles "
                 "where the CPU has them (needs avx512_bf16 and heads of 32, "
                 "64, 96 or 128 channels); fused: LibTorch's fused kernel, "
                 "each sequence on its own length; auto: bfloat16 where "
                 "the CPU has AMX BF16 (measured the faster there; on "
                 "AVX-512 BF16 alone it lost at 512 tokens), else fused")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "bfloat16", "fused"}));
  app.add_option("--int8-attention", f.int8_attention,
                 "int8: how the attention's two products run (/info says "
                 "\"attention_kernel\"). bfloat16: bfloat16 operands with "
                 "float32 sums and softmax (needs avx512_bf16 and heads of "
                 "32, 64, 96 or 128 channels); float32: as float32 models; "
                 "auto: bfloat16 where it runs, else float32")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "float32", "bfloat16"}));
  app.add_option("--pack-weights", f.pack_weights,
                 "float32 and bfloat16 on the CPU: lay the layers' "
                 "projection weights out once at load in oneDNN's blocked "
                 "format, so products do not repack them on every call, "
                 "and run the feed-forward's activation inside the product "
                 "(/info says \"linear_kernel\"). auto: where the CPU "
                 "makes that the faster at every size (measured: float32 "
                 "with AVX-512, bfloat16 with AVX-512 BF16 or AMX, AMD's "
                 "and Intel's), and then for every product, "
                 "int8 models excepted (their float32 products run in "
                 "full-precision passes only); true: everywhere, int8 "
                 "models too, up to --packed-max-rows; false: never")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "true", "false"}));
  app.add_option("--packed-max-rows", f.packed_max_rows,
                 "with packed weights: products of up to this many rows "
                 "(tokens of a batch) use them, larger ones multiply through "
                 "the BLAS on a second, plain copy of the weights (a "
                 "sequence's floats then depend on its batch's size by up "
                 "to ~30 units in the last place, as the two kernels round "
                 "differently). 0: every product, no plain copy kept. -1: "
                 "0 where --pack-weights=auto packs, 256 elsewhere")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{-1}, std::numeric_limits<int64_t>::max()));
  app.add_option("--packed-min-elements", f.packed_min_elements,
                 "with packed weights: weights of fewer elements (inputs x "
                 "outputs) stay plain and multiply through the BLAS, where a "
                 "packed product's fixed cost per call outweighs the "
                 "repacking it saves. -1: 131072 for float32 under "
                 "--pack-weights=auto (measured: widths up to 128 ran "
                 "faster plain), 0 for bfloat16 and under true")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{-1}, std::numeric_limits<int64_t>::max()));
  app.add_flag("--force-dtype,!--no-force-dtype", f.force_dtype,
               "run --dtype bfloat16 on a CPU without native bfloat16 "
               "(emulated: much slower than float32)");
}

absl::Status ApplyPrecisionFlags(const PrecisionFlags& flags,
                                 const model::CpuFeatures& cpu,
                                 runner::HostOptions* options) {
  const bool on_cpu = options->device.is_cpu();
  if (flags.quantize != "none" && flags.quantize != "int8") {
    return absl::InvalidArgumentError(
        absl::StrCat("--quantize must be none or int8, got ", flags.quantize));
  }
  options->quantize = flags.quantize;
  const model::PackingPlan packing =
      model::PlanPackingFor(flags.pack_weights, flags.packed_max_rows,
                            flags.packed_min_elements, at::kFloat, cpu);
  const model::PackingPlan bf16_packing =
      model::PlanPackingFor(flags.pack_weights, flags.packed_max_rows,
                            flags.packed_min_elements, at::kBFloat16, cpu);
  options->pack_bfloat16 = bf16_packing.pack;
  options->packed_limits_bfloat16 = bf16_packing.limits;
  options->pack_weights = packing.pack;
  options->pack_int8_models = packing.pack_int8;
  options->packed_limits = packing.limits;
  options->int8_float_channels = flags.int8_float_channels;
  options->int8_row_outliers = flags.int8_row_outliers;
  options->int8_attention = flags.int8_attention;
  if (flags.int8_attention == "bfloat16" && !cpu.avx512_bf16) {
    return absl::InvalidArgumentError(
        "--int8-attention=bfloat16 needs avx512_bf16, which this CPU lacks");
  }
  options->bf16_attention = flags.bf16_attention;
  if (flags.bf16_attention == "bfloat16" && !cpu.avx512_bf16) {
    return absl::InvalidArgumentError(
        "--bf16-attention=bfloat16 needs avx512_bf16, which this CPU lacks");
  }
  if (flags.dtype == "auto") {
    options->dtype = at::kFloat;
    options->auto_precision = on_cpu;
    return absl::OkStatus();
  }
  auto dtype = model::ParseDtype(flags.dtype);
  if (!dtype.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--dtype must be float32, float16, bfloat16 or auto, got ",
                     flags.dtype));
  }
  options->dtype = *dtype;
  if (flags.quantize == "int8" && (!on_cpu || *dtype != at::kFloat)) {
    return absl::InvalidArgumentError(
        "--quantize=int8 runs on the CPU with --dtype=float32");
  }
  if (flags.quantize == "int8" && !model::Int8Supported()) {
    return absl::FailedPreconditionError(
        "--quantize=int8 needs LibTorch's oneDNN quantized engine, which "
        "this build lacks");
  }
  if (!on_cpu || *dtype == at::kFloat) return absl::OkStatus();
  if (*dtype == at::kHalf) {
    return absl::InvalidArgumentError(
        absl::StrCat("--dtype=", flags.dtype, " needs a CUDA device"));
  }
  if (!cpu.native_bf16() && !flags.force_dtype) {
    return absl::FailedPreconditionError(absl::StrCat(
        "--dtype=bfloat16 on this CPU (", cpu.model, ": ", cpu.Joined(),
        ") is emulated, tens of times slower than float32: it lacks "
        "avx512_bf16 and amx_bf16; use float32, --quantize=int8 or auto, or "
        "--force-dtype to run it anyway"));
  }
  return absl::OkStatus();
}

}  // namespace encoder
