#include "server/model/int8_linear.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "server/model/cpu_features.h"

namespace encoder::model {
namespace {

c10::OperatorHandle Op(const char* name) {
  return c10::Dispatcher::singleton().findSchemaOrThrow(name, "");
}

}  // namespace

int Int8WeightLevels() { return DetectCpuFeatures().native_int8() ? 127 : 63; }

bool Int8Supported() {
  const auto& engines = at::globalContext().supportedQEngines();
  return std::find(engines.begin(), engines.end(), at::QEngine::ONEDNN) !=
         engines.end();
}

absl::StatusOr<Int8Linear> Int8Linear::Create(const at::Tensor& weight,
                                              const at::Tensor& bias) {
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
  try {
    c10::InferenceMode guard;
    // Packing follows the process-wide engine; oneDNN takes per-channel
    // symmetric weights.
    at::globalContext().setQEngine(at::QEngine::ONEDNN);
    Int8Linear out;
    out.out_ = weight.size(0);
    out.in_ = weight.size(1);
    const at::Tensor w = weight.contiguous();
    const at::Tensor scales =
        (w.abs().amax(1) / static_cast<double>(Int8WeightLevels()))
            .clamp_min(1e-12)
            .to(at::kDouble);
    const at::Tensor zeros = at::zeros({out.out_}, at::kLong);
    const at::Tensor qweight =
        at::quantize_per_channel(w, scales, zeros, 0, at::kQInt8);
    std::vector<c10::IValue> stack{qweight, c10::IValue()};
    Op("quantized::linear_prepack").callBoxed(&stack);
    out.packed_ = std::move(stack.at(0));
    if (bias.defined()) out.bias_ = bias.to(at::kFloat).contiguous();
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
  const at::Tensor rows = x.reshape({-1, in_});
  const int64_t n = rows.size(0);
  // Each row's own scale; a row of zeros stays zeros.
  const at::Tensor scale =
      rows.abs().amax(1, /*keepdim=*/true).clamp_min(1e-30);
  const at::Tensor normalized = at::cat({rows / scale, anchor_}, 0);
  static const c10::OperatorHandle dynamic = Op("quantized::linear_dynamic");
  std::vector<c10::IValue> stack{normalized, packed_,
                                 /*reduce_range=*/false};
  dynamic.callBoxed(&stack);
  const at::Tensor y = stack.at(0).toTensor().narrow(0, 0, n);
  at::Tensor out = bias_.defined() ? at::addcmul(bias_, y, scale) : y * scale;
  shape.back() = out_;
  return out.view(shape);
}

}  // namespace encoder::model
