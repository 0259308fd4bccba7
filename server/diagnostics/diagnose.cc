// Diagnose: validates a request, runs the model once at positions 0..S-1 and
// then the requested probes against that run.
#include <c10/core/InferenceMode.h>
#include <c10/util/Exception.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "server/common/status_macros.h"
#include "server/diagnostics/diagnostics.h"
#include "server/diagnostics/probes.h"
#include "server/diagnostics/structure.h"
#include "server/model/positional/traits.h"
#include "server/model/torch_status.h"

namespace encoder::diagnostics {
namespace {

constexpr int64_t kMinStructurePositions = 2;
constexpr int64_t kMaxStructurePositions = 1024;
// Keeps offset + S far from int64 overflow.
constexpr int64_t kMaxShiftOffset = 1'000'000'000;

absl::Status CheckPermutation(const std::vector<int64_t>& order, int64_t s) {
  if (static_cast<int64_t>(order.size()) != s) {
    return absl::InvalidArgumentError(
        absl::StrCat("permutation_order has ", order.size(),
                     " entries but the input has ", s, " tokens"));
  }
  std::vector<bool> seen(s, false);
  for (int64_t v : order) {
    if (v < 0 || v >= s) {
      return absl::InvalidArgumentError(
          absl::StrCat("permutation_order is not a permutation of 0..", s - 1,
                       ": entry ", v, " is out of range"));
    }
    if (seen[v]) {
      return absl::InvalidArgumentError(
          absl::StrCat("permutation_order is not a permutation of 0..", s - 1,
                       ": entry ", v, " repeats"));
    }
    seen[v] = true;
  }
  return absl::OkStatus();
}

absl::Status Validate(const api::DiagnoseOptions& options) {
  const int64_t s = static_cast<int64_t>(options.token_ids.size());
  if (s == 0) return absl::InvalidArgumentError("token_ids is empty");
  if (options.structure &&
      (options.structure_positions < kMinStructurePositions ||
       options.structure_positions > kMaxStructurePositions)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "structure_positions must be in [", kMinStructurePositions, ", ",
        kMaxStructurePositions, "], got ", options.structure_positions));
  }
  if (options.shift && std::abs(options.shift_offset) > kMaxShiftOffset) {
    return absl::InvalidArgumentError(
        absl::StrCat("shift_offset must be within +-", kMaxShiftOffset,
                     ", got ", options.shift_offset));
  }
  if (options.permutation && !options.permutation_order.empty()) {
    return CheckPermutation(options.permutation_order, s);
  }
  return absl::OkStatus();
}

absl::StatusOr<api::DiagnoseReport> Run(const model::Encoder& model,
                                        const api::DiagnoseOptions& options) {
  const int64_t s = static_cast<int64_t>(options.token_ids.size());
  const int64_t layers = model.config().num_layers;
  const bool want_attention =
      options.attention_stats || options.return_attention_maps;

  api::DiagnoseReport report;
  if (options.extrapolation) {
    ASSIGN_OR_RETURN(api::ExtrapolationResult result,
                     RunExtrapolation(model, *options.extrapolation));
    report.extrapolation = std::move(result);
  }
  if (options.structure) {
    report.structure = AnalyzeStructure(model, options.structure_positions);
  }
  if (!options.permutation && !options.shift && !want_attention) {
    return report;  // nothing else needs the base run
  }

  BaseRun base;
  base.ids =
      at::tensor(options.token_ids, at::kLong).view({1, s}).to(model.device());
  base.mask = at::ones({1, s}, base.ids.options().dtype(at::kBool));
  model::ForwardOptions forward_options;
  if (want_attention) {
    for (int64_t l = 0; l < layers; ++l) {
      forward_options.attention_layers.push_back(l);
    }
  }
  // The probes measure the architecture, with tolerances far below int8
  // rounding: an int8 model is probed through its float32 weights.
  forward_options.full_precision = true;
  ASSIGN_OR_RETURN(
      model::EncoderOutput out,
      model.Forward(
          {base.ids, base.mask, at::arange(s, base.ids.options()).view({1, s}),
           /*types=*/at::Tensor(), /*keys=*/at::Tensor()},
          forward_options));
  base.tokens = out.tokens;

  const double tolerance =
      options.tolerance > 0 ? options.tolerance : kDefaultTolerance;
  if (options.permutation) {
    const std::vector<int64_t> order =
        options.permutation_order.empty()
            ? SeededPermutation(s, options.permutation_seed)
            : options.permutation_order;
    ASSIGN_OR_RETURN(api::PermutationResult result,
                     RunPermutationProbe(model, base, order, tolerance));
    report.permutation = std::move(result);
  }
  if (options.shift) {
    const bool rope = model::Traits(model.config().positional.type).rotary;
    const double shift_tolerance =
        options.tolerance > 0
            ? options.tolerance
            : (rope ? kDefaultRopeShiftTolerance : kDefaultTolerance);
    ASSIGN_OR_RETURN(
        api::ShiftResult result,
        RunShiftProbe(model, base, options.shift_offset, shift_tolerance));
    report.shift = std::move(result);
  }
  if (options.attention_stats) {
    report.uniform_entropy = std::log(static_cast<double>(s));
    for (int64_t l = 0; l < layers; ++l) {
      std::vector<AttentionHeadStats> stats =
          ComputeHeadStats(out.attention.at(l).select(0, 0), l);
      report.attention_stats.insert(report.attention_stats.end(), stats.begin(),
                                    stats.end());
    }
  }
  if (options.return_attention_maps) {
    std::vector<at::Tensor> maps;
    for (int64_t l = 0; l < layers; ++l) {
      maps.push_back(out.attention.at(l).select(0, 0));  // [H, S, S]
    }
    report.attention_maps = ToDense<float>(at::stack(maps));
  }
  return report;
}

}  // namespace

template <typename T>
api::DenseArray<T> ToDense(const at::Tensor& t) {
  const at::Tensor c =
      t.to(at::kCPU, c10::CppTypeToScalarType<T>::value).contiguous();
  api::DenseArray<T> out;
  out.shape.assign(c.sizes().begin(), c.sizes().end());
  out.values.assign(c.data_ptr<T>(), c.data_ptr<T>() + c.numel());
  return out;
}
template api::DenseArray<double> ToDense<double>(const at::Tensor&);
template api::DenseArray<float> ToDense<float>(const at::Tensor&);

absl::StatusOr<api::DiagnoseReport> Diagnose(
    const model::Encoder& model, const api::DiagnoseOptions& options) {
  RETURN_IF_ERROR(Validate(options));
  try {
    c10::InferenceMode guard;
    return Run(model, options);
  } catch (const c10::Error& e) {
    return model::StatusFromTorchError(e, "diagnostics");
  }
}

}  // namespace encoder::diagnostics
