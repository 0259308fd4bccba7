#include "server/model/packed_linear.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/InferenceMode.h>

#include <algorithm>
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

absl::StatusOr<PackedLinear> PackedLinear::Create(const at::Tensor& weight,
                                                  const at::Tensor& bias,
                                                  int64_t max_rows) {
  if (!PackedLinearSupported()) {
    return absl::FailedPreconditionError(
        "packed weights need LibTorch's oneDNN linear "
        "(mkldnn::_linear_pointwise), which this build lacks");
  }
  if (weight.dim() != 2 || !weight.device().is_cpu() ||
      weight.scalar_type() != at::kFloat) {
    return absl::InvalidArgumentError(
        "a packed linear needs a float32 [out, in] weight on the CPU");
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
    out.plain_ = weight;
    if (bias.defined()) out.bias_ = bias.to(at::kFloat).contiguous();
    return out;
  } catch (const c10::Error& e) {
    return absl::InternalError(
        absl::StrCat("packing a linear weight: ", e.what_without_backtrace()));
  }
}

at::Tensor PackedLinear::Forward(const at::Tensor& x) const {
  if (x.numel() / std::max<int64_t>(in_, 1) > max_rows_) {
    return at::linear(x, plain_, bias_);
  }
  static const c10::OperatorHandle op = *FindOp(kLinear);
  // (input, weight, bias, post-op "none", its scalars, its algorithm)
  std::vector<c10::IValue> stack{
      x,
      packed_,
      bias_.defined() ? c10::IValue(bias_) : c10::IValue(),
      std::string("none"),
      c10::List<c10::optional<at::Scalar>>(),
      c10::IValue()};
  op.callBoxed(&stack);
  return stack.at(0).toTensor();
}

}  // namespace encoder::model
