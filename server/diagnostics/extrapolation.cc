// RunExtrapolation: the source at each length of the grid, one forward pass
// per length with every layer's attention, reduced to per-layer curves and
// drifts against the shortest length
// (docs/positional-encodings.md#extrapolation).
#include "server/diagnostics/extrapolation.h"

#include <c10/core/InferenceMode.h>
#include <c10/util/Exception.h>

#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "server/common/status_macros.h"
#include "server/diagnostics/diagnostics.h"
#include "server/model/torch_status.h"

namespace encoder::diagnostics {
namespace {

absl::Status Validate(const api::ExtrapolationOptions& o) {
  if (o.source.empty()) {
    return absl::InvalidArgumentError("the extrapolation source is empty");
  }
  if (o.lengths.empty() ||
      static_cast<int64_t>(o.lengths.size()) > api::kMaxExtrapolationLengths) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the extrapolation grid needs 1 to ", api::kMaxExtrapolationLengths,
        " lengths, got ", o.lengths.size()));
  }
  for (size_t i = 0; i < o.lengths.size(); ++i) {
    if (o.lengths[i] < 1 || (i > 0 && o.lengths[i] <= o.lengths[i - 1])) {
      return absl::InvalidArgumentError(
          "extrapolation lengths must be >= 1 and strictly increasing");
    }
  }
  if (o.prefix_length < 1 || o.prefix_length > o.lengths[0]) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the extrapolation prefix length must be in [1, ", o.lengths[0],
        "] (the shortest length), got ", o.prefix_length));
  }
  return absl::OkStatus();
}

// What one length's run leaves for the comparison with the reference.
struct Outputs {
  at::Tensor pooled;  // [D] float64
  at::Tensor prefix;  // [P, D] float64
};

void FillAttention(const model::EncoderOutput& out, int64_t layers,
                   api::LengthPoint* point) {
  const double ln_s = std::log(static_cast<double>(point->length));
  for (int64_t l = 0; l < layers; ++l) {
    const std::vector<AttentionHeadStats> heads =
        ComputeHeadStats(out.attention.at(l).select(0, 0), l);
    double entropy = 0, distance = 0, first = 0;
    for (const AttentionHeadStats& h : heads) {
      entropy += h.entropy;
      distance += h.mean_distance;
      first += h.first_mass;
    }
    const double n = static_cast<double>(heads.size());
    point->entropy.push_back(entropy / n);
    point->relative_entropy.push_back(ln_s > 0 ? entropy / n / ln_s : 0.0);
    point->mean_distance.push_back(distance / n);
    point->first_mass.push_back(first / n);
  }
}

absl::StatusOr<Outputs> RunLength(const model::Encoder& model,
                                  const api::ExtrapolationOptions& o,
                                  api::LengthPoint* point) {
  const int64_t s = point->length;
  const int64_t n = static_cast<int64_t>(o.source.size());
  std::vector<int64_t> ids(s);
  for (int64_t i = 0; i < s; ++i) ids[i] = o.source[i % n];
  model::EncoderInput input;
  input.ids = at::tensor(ids, at::kLong).view({1, s}).to(model.device());
  input.mask = at::ones({1, s}, input.ids.options().dtype(at::kBool));
  model::ForwardOptions forward;
  const int64_t layers = model.config().num_layers;
  for (int64_t l = 0; l < layers; ++l) forward.attention_layers.push_back(l);
  ASSIGN_OR_RETURN(model::EncoderOutput out, model.Forward(input, forward));
  FillAttention(out, layers, point);
  at::Tensor tokens = out.tokens.select(0, 0).to(at::kCPU, at::kDouble);
  return Outputs{tokens.mean(0), tokens.narrow(0, 0, o.prefix_length)};
}

double RelativeDistance(const at::Tensor& a, const at::Tensor& ref) {
  const double scale = ref.norm().item<double>();
  const double d = (a - ref).norm().item<double>();
  return scale > 0 ? d / scale : d;
}

void FillDrift(const Outputs& now, const Outputs& ref,
               api::LengthPoint* point) {
  point->pooled_drift = RelativeDistance(now.pooled, ref.pooled);
  const at::Tensor scale = ref.prefix.norm(2, {1}).clamp_min(1e-300);
  point->prefix_drift =
      ((now.prefix - ref.prefix).norm(2, {1}) / scale).mean().item<double>();
}

absl::StatusOr<api::ExtrapolationResult> Run(
    const model::Encoder& model, const api::ExtrapolationOptions& o) {
  api::ExtrapolationResult result;
  result.reach = model::AnalyzeReach(model.config());
  result.prefix_length = o.prefix_length;
  Outputs reference;
  for (int64_t length : o.lengths) {
    api::LengthPoint point;
    point.length = length;
    for (double w : result.reach.wavelengths) {
      if (w < static_cast<double>(length)) ++point.wrapped_pairs;
    }
    const int64_t limit = result.reach.max_length;
    if (limit > 0 && length > limit) {
      point.skipped_reason =
          absl::StrCat("not run: the learned position table covers ", limit,
                       " positions, so longer inputs cannot be represented");
      result.points.push_back(std::move(point));
      continue;
    }
    if (o.is_cancelled && o.is_cancelled()) {
      return absl::CancelledError(
          absl::StrCat("extrapolation probe cancelled before length ", length));
    }
    ASSIGN_OR_RETURN(Outputs outputs, RunLength(model, o, &point));
    point.ran = true;
    if (result.reference_length == 0) {
      result.reference_length = length;
      reference = outputs;
    }
    FillDrift(outputs, reference, &point);
    result.points.push_back(std::move(point));
  }
  return result;
}

}  // namespace

absl::StatusOr<api::ExtrapolationResult> RunExtrapolation(
    const model::Encoder& model, const api::ExtrapolationOptions& options) {
  RETURN_IF_ERROR(Validate(options));
  try {
    c10::InferenceMode guard;
    return Run(model, options);
  } catch (const c10::Error& e) {
    return model::StatusFromTorchError(e, "extrapolation probe");
  }
}

}  // namespace encoder::diagnostics
