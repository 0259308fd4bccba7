#include "server/diagnostics/probes.h"

#include <algorithm>
#include <numeric>
#include <random>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/common/status_macros.h"

namespace encoder::diagnostics {
namespace {

// Max |a - b| in float64.
double MaxAbsDiff(const at::Tensor& a, const at::Tensor& b) {
  return (a.to(at::kDouble) - b.to(at::kDouble)).abs().max().item<double>();
}

// Mean pooling [1, S, D] -> [1, D], independent of the model's own pooling.
at::Tensor MeanPool(const at::Tensor& tokens, const at::Tensor& mask) {
  return model::Pool(tokens, mask, model::Pooling::kMean,
                     /*normalize=*/false);
}

absl::StatusOr<at::Tensor> RunAt(const model::Encoder& model,
                                 const BaseRun& base, const at::Tensor& ids,
                                 const at::Tensor& positions) {
  model::EncoderInput input{ids, base.mask, positions};
  model::ForwardOptions options;
  options.full_precision = true;  // as the base run (Diagnose)
  ASSIGN_OR_RETURN(model::EncoderOutput out, model.Forward(input, options));
  return std::move(out.tokens);
}

}  // namespace

std::vector<int64_t> SeededPermutation(int64_t n, uint64_t seed) {
  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  // Fisher-Yates on mt19937_64, whose output sequence the standard fixes
  // (std::shuffle and the distributions are implementation-defined).
  std::mt19937_64 rng(seed);
  for (int64_t i = n - 1; i > 0; --i) {
    const int64_t j =
        static_cast<int64_t>(rng() % static_cast<uint64_t>(i + 1));
    std::swap(order[i], order[j]);
  }
  bool identity = true;
  for (int64_t i = 0; i < n; ++i) identity = identity && order[i] == i;
  if (identity && n >= 2) {
    std::rotate(order.begin(), order.begin() + 1, order.end());
  }
  return order;
}

absl::StatusOr<api::PermutationResult> RunPermutationProbe(
    const model::Encoder& model, const BaseRun& base,
    const std::vector<int64_t>& order, double tolerance) {
  const int64_t s = base.ids.size(1);
  at::Tensor perm = at::tensor(order, at::kLong).to(base.ids.device());
  at::Tensor permuted_ids = base.ids.index_select(1, perm);
  at::Tensor positions = at::arange(s, base.ids.options()).unsqueeze(0);
  ASSIGN_OR_RETURN(at::Tensor permuted,
                   RunAt(model, base, permuted_ids, positions));

  api::PermutationResult result;
  result.order = order;
  result.tolerance = tolerance;
  result.max_token_error =
      MaxAbsDiff(permuted, base.tokens.index_select(1, perm));
  result.max_pooled_error = MaxAbsDiff(MeanPool(permuted, base.mask),
                                       MeanPool(base.tokens, base.mask));
  result.equivariant = result.max_token_error <= tolerance &&
                       result.max_pooled_error <= tolerance;
  const std::string errors =
      absl::StrCat("max token error ", result.max_token_error,
                   ", max pooled error ", result.max_pooled_error);
  result.verdict =
      result.equivariant
          ? absl::StrCat("equivariant: f(Px) = P f(x) within tolerance ",
                         tolerance, " (", errors, ")")
          : absl::StrCat(
                "not equivariant: f(Px) differs from P f(x) by more "
                "than tolerance ",
                tolerance, " (", errors, ")");
  return result;
}

absl::StatusOr<api::ShiftResult> RunShiftProbe(const model::Encoder& model,
                                               const BaseRun& base,
                                               int64_t offset,
                                               double tolerance) {
  const int64_t s = base.ids.size(1);
  api::ShiftResult result;
  result.offset = offset;
  result.tolerance = tolerance;
  const std::string range = absl::StrCat(offset, "..", offset + s - 1);

  const model::SchemeDescription scheme = model.scheme().Describe();
  if (!scheme.extrapolates &&
      (offset < 0 || offset + s > scheme.max_positions)) {
    result.relative_only = false;
    result.verdict = absl::StrCat(
        "not relative: the shifted positions ", range, " leave the ",
        scheme.name, " position table of ", scheme.max_positions,
        " positions, so the model only has absolute positions");
    return result;
  }

  at::Tensor positions =
      at::arange(offset, offset + s, base.ids.options()).unsqueeze(0);
  ASSIGN_OR_RETURN(at::Tensor shifted, RunAt(model, base, base.ids, positions));

  result.max_token_error = MaxAbsDiff(shifted, base.tokens);
  result.max_pooled_error = MaxAbsDiff(MeanPool(shifted, base.mask),
                                       MeanPool(base.tokens, base.mask));
  result.relative_only = result.max_token_error <= tolerance &&
                         result.max_pooled_error <= tolerance;
  const std::string errors =
      absl::StrCat("max token error ", result.max_token_error,
                   ", max pooled error ", result.max_pooled_error);
  result.verdict =
      result.relative_only
          ? absl::StrCat("purely relative position dependence: positions ",
                         range, " give the outputs of 0..", s - 1,
                         " within tolerance ", tolerance, " (", errors, ")")
          : absl::StrCat("absolute position dependence: positions ", range,
                         " change the outputs of 0..", s - 1,
                         " by more than tolerance ", tolerance, " (", errors,
                         ")");
  return result;
}

}  // namespace encoder::diagnostics
