#include "server/model/kernels/packed_linear.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace encoder::model {
namespace {

constexpr const char* kReorder = "mkldnn::_reorder_linear_weight";
constexpr const char* kLinear = "mkldnn::_linear_pointwise";

c10::optional<c10::OperatorHandle> FindOp(const char* name) {
  return c10::Dispatcher::singleton().findSchema({name, ""});
}

}  // namespace

bool PackedLinearSupported() {
  static const bool supported =
      at::hasMKLDNN() && FindOp(kReorder) && FindOp(kLinear);
  return supported;
}

PackingPlan PlanPacking(const std::string& mode, int64_t max_rows,
                        int64_t min_elements, bool packed_wins,
                        int64_t auto_min_elements) {
  PackingPlan plan;
  plan.pack = mode == "true" || (mode == "auto" && packed_wins);
  plan.pack_int8 = mode == "true";
  if (max_rows >= 0) {
    plan.limits.max_rows = max_rows;
  } else {
    plan.limits.max_rows = packed_wins ? PackedLinear::kEveryProduct
                                       : PackedLinear::kDefaultPackedMaxRows;
  }
  if (min_elements >= 0) {
    plan.limits.min_elements = min_elements;
  } else {
    plan.limits.min_elements = mode == "auto" ? auto_min_elements : 0;
  }
  return plan;
}

PackingPlan PlanPackingFor(const std::string& mode, int64_t max_rows,
                           int64_t min_elements, at::ScalarType dtype,
                           const CpuFeatures& cpu) {
  const bool bf16 = dtype == at::kBFloat16;
  PackingPlan plan =
      bf16 ? PlanPacking(mode, max_rows, min_elements,
                         cpu.packed_bfloat16_wins())
           : PlanPacking(mode, max_rows, min_elements,
                         cpu.packed_float32_wins(), kDefaultPackedMinElements);
  if ((bf16 && !cpu.native_bf16()) || (!bf16 && dtype != at::kFloat)) {
    plan.pack = plan.pack_int8 = false;
  }
  return plan;
}

absl::StatusOr<PackedLinear> PackedLinear::Create(const at::Tensor& weight,
                                                  const at::Tensor& bias,
                                                  int64_t max_rows) {
  if (!PackedLinearSupported()) {
    return absl::FailedPreconditionError(
        "packed weights need LibTorch's oneDNN linear "
        "(mkldnn::_linear_pointwise), which this build lacks");
  }
  if (max_rows < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "packed max rows must be 0 (every product) or more, not ", max_rows));
  }
  if (weight.dim() != 2 || !weight.device().is_cpu() ||
      (weight.scalar_type() != at::kFloat &&
       weight.scalar_type() != at::kBFloat16)) {
    return absl::InvalidArgumentError(
        "a packed linear needs a float32 or bfloat16 [out, in] weight on the "
        "CPU");
  }
  try {
    c10::InferenceMode guard;
    PackedLinear out;
    out.out_ = weight.size(0);
    out.in_ = weight.size(1);
    out.max_rows_ = max_rows;
    // No batch size: the layout serves every number of rows.
    std::vector<c10::IValue> stack{weight.contiguous(), c10::IValue()};
    FindOp(kReorder)->callBoxed(&stack);
    out.packed_ = stack.at(0).toTensor();
    if (max_rows != kEveryProduct) out.plain_ = weight;
    if (bias.defined()) {
      out.bias_ = bias.to(weight.scalar_type()).contiguous();
    }
    return out;
  } catch (const c10::Error& e) {
    return absl::InternalError(
        absl::StrCat("packing a linear weight: ", e.what_without_backtrace()));
  }
}

at::Tensor ApplyActivation(Activation a, const at::Tensor& x) {
  switch (a) {
    case Activation::kRelu:
      return at::relu(x);
    case Activation::kGelu:
      return at::gelu(x);
    case Activation::kGeluTanh:
      return at::gelu(x, "tanh");
    case Activation::kSilu:
      return at::silu(x);
    case Activation::kGeluNew:
      return 0.5 * x *
             (1.0 + at::tanh(std::sqrt(2.0 / M_PI) *
                             (x + 0.044715 * at::pow(x, 3.0))));
    case Activation::kGeluFast:
      return 0.5 * x *
             (1.0 + at::tanh(x * 0.7978845608 * (1.0 + 0.044715 * x * x)));
    case Activation::kQuickGelu:
      return x * at::sigmoid(1.702 * x);
    case Activation::kMish:
      return at::mish(x);
  }
  return x;
}

bool PackedLinear::Packs(const at::Tensor& x) const {
  return max_rows_ == kEveryProduct ||
         x.numel() / std::max<int64_t>(in_, 1) <= max_rows_;
}

at::Tensor PackedLinear::Run(const at::Tensor& x, const char* post_op,
                             const char* algorithm) const {
  static const c10::OperatorHandle op = *FindOp(kLinear);
  // (input, weight, bias, post-op, its scalars, its algorithm)
  std::vector<c10::IValue> stack{
      x,
      packed_,
      bias_.defined() ? c10::IValue(bias_) : c10::IValue(),
      std::string(post_op),
      c10::List<c10::optional<at::Scalar>>(),
      algorithm != nullptr ? c10::IValue(std::string(algorithm))
                           : c10::IValue()};
  op.callBoxed(&stack);
  return stack.at(0).toTensor();
}

at::Tensor PackedLinear::Forward(const at::Tensor& x) const {
  if (!Packs(x)) return at::linear(x, plain_, bias_);
  return Run(x, "none", nullptr);
}

at::Tensor PackedLinear::Forward(const at::Tensor& x, Activation a) const {
  if (!Packs(x)) return ApplyActivation(a, at::linear(x, plain_, bias_));
  switch (a) {
    case Activation::kRelu:
      return Run(x, "relu", nullptr);
    case Activation::kGelu:
      return Run(x, "gelu", "none");
    case Activation::kGeluTanh:
      return Run(x, "gelu", "tanh");
    case Activation::kSilu:
      return Run(x, "swish", nullptr);
    case Activation::kGeluNew:
    case Activation::kGeluFast:
    case Activation::kQuickGelu:
    case Activation::kMish:
      break;  // no epilogue computes these as transformers does
  }
  return ApplyActivation(a, Run(x, "none", nullptr));
}

}  // namespace encoder::model
