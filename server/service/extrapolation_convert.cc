#include "server/service/extrapolation_convert.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/common/status_macros.h"
#include "server/core/inference.h"
#include "server/diagnostics/scheme_reach.h"

namespace encoder::service {
namespace {

absl::StatusOr<std::vector<int64_t>> Grid(const v1::ExtrapolationOptions& r,
                                          int64_t trained, int64_t limit) {
  const int64_t max_points = diagnostics::kMaxExtrapolationLengths;
  if (!r.lengths().empty()) {
    if (r.lengths_size() > max_points) {
      return absl::InvalidArgumentError(
          absl::StrCat("extrapolation_options.lengths has ", r.lengths_size(),
                       " entries; at most ", max_points));
    }
    std::vector<int64_t> out;
    for (int32_t length : r.lengths()) {
      if (length < 1 || (!out.empty() && length <= out.back())) {
        return absl::InvalidArgumentError(
            "extrapolation_options.lengths must be >= 1 and strictly "
            "increasing");
      }
      if (length > limit) {
        return absl::InvalidArgumentError(
            absl::StrCat("extrapolation length ", length,
                         " is over this model's limit of ", limit,
                         " tokens (ModelInfo.max_extrapolation_tokens: "
                         "--max-extrapolation-tokens or the repository entry's "
                         "max_extrapolation_tokens)"));
      }
      out.push_back(length);
    }
    return out;
  }
  const double multiple =
      r.max_multiple() == 0 ? kDefaultExtrapolationMultiple : r.max_multiple();
  if (!(multiple > 0 && multiple <= kMaxExtrapolationMultiple)) {
    return absl::InvalidArgumentError(
        absl::StrCat("extrapolation_options.max_multiple ", r.max_multiple(),
                     " must be in (0, ", kMaxExtrapolationMultiple, "]"));
  }
  const int32_t points =
      r.points() == 0 ? kDefaultExtrapolationPoints : r.points();
  if (points < 1 || points > max_points) {
    return absl::InvalidArgumentError(
        absl::StrCat("extrapolation_options.points ", r.points(),
                     " must be in [1, ", max_points, "]"));
  }
  return DefaultGrid(trained, multiple, points, limit);
}

}  // namespace

std::vector<int64_t> DefaultGrid(int64_t trained, double multiple,
                                 int32_t points, int64_t limit) {
  const double lo = std::max(1.0, static_cast<double>(trained) / 8);
  const double hi = std::max(lo, multiple * static_cast<double>(trained));
  std::vector<int64_t> out;
  for (int32_t k = 0; k < points; ++k) {
    const double t = points == 1 ? 1.0 : static_cast<double>(k) / (points - 1);
    int64_t length = std::llround(lo * std::pow(hi / lo, t));
    length = std::clamp<int64_t>(length, 1, limit);
    if (out.empty() || length > out.back()) out.push_back(length);
  }
  return out;
}

std::vector<int64_t> SeededRandomIds(int64_t n, uint64_t seed, int64_t vocab) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int64_t> id(0, vocab - 1);
  std::vector<int64_t> out(n);
  for (int64_t& t : out) t = id(rng);
  return out;
}

absl::Status BuildExtrapolation(const v1::DiagnoseRequest& request,
                                const runner::ServedModel& model,
                                const core::DiagnoseLimits& limits,
                                diagnostics::DiagnoseOptions* options) {
  const model::ModelConfig& c = model.description().config;
  const v1::ExtrapolationOptions& r = request.extrapolation_options();
  const int64_t limit = core::MaxExtrapolationTokens(model, limits);
  const diagnostics::SchemeReach reach = diagnostics::AnalyzeReach(c);
  ASSIGN_OR_RETURN(std::vector<int64_t> grid,
                   Grid(r, reach.trained_length, limit));
  diagnostics::ExtrapolationOptions o;
  o.lengths = std::move(grid);
  if (request.input_case() == v1::DiagnoseRequest::kRandom) {
    o.source = SeededRandomIds(o.lengths.back(), request.random().seed(),
                               c.vocab_size);
  } else {
    o.source = options->token_ids;
  }
  o.prefix_length =
      r.prefix_length() != 0
          ? r.prefix_length()
          : std::min(kDefaultExtrapolationPrefix, o.lengths.front());
  if (o.prefix_length < 1 || o.prefix_length > o.lengths.front()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "extrapolation_options.prefix_length ", r.prefix_length(),
        " must be in [1, ", o.lengths.front(), "] (the shortest length)"));
  }
  options->extrapolation = std::move(o);
  return absl::OkStatus();
}

void FillExtrapolation(const diagnostics::ExtrapolationResult& result,
                       const diagnostics::ExtrapolationOptions& options,
                       int64_t max_tokens, v1::ExtrapolationProbe* out) {
  const diagnostics::SchemeReach& r = result.reach;
  out->set_trained_length(static_cast<int32_t>(r.trained_length));
  out->set_max_length(static_cast<int32_t>(r.max_length));
  for (double w : r.alibi_windows) out->add_alibi_windows(w);
  out->set_bucket_saturation_distance(
      static_cast<int32_t>(r.bucket_saturation_distance));
  out->set_num_buckets(static_cast<int32_t>(r.num_buckets));
  out->set_max_distance(static_cast<int32_t>(r.max_distance));
  for (double w : r.wavelengths) out->add_wavelengths(w);
  out->set_pairs_beyond_trained(static_cast<int32_t>(r.pairs_beyond_trained));
  out->set_prefix_length(static_cast<int32_t>(result.prefix_length));
  out->set_reference_length(static_cast<int32_t>(result.reference_length));
  out->set_max_tokens(static_cast<int32_t>(max_tokens));
  for (int64_t id : options.source) {
    out->add_source_ids(static_cast<int32_t>(id));
  }
  for (const diagnostics::LengthPoint& p : result.points) {
    v1::ExtrapolationPoint* q = out->add_points();
    q->set_length(static_cast<int32_t>(p.length));
    q->set_ran(p.ran);
    q->set_skipped_reason(p.skipped_reason);
    for (double v : p.entropy) q->add_entropy(v);
    for (double v : p.relative_entropy) q->add_relative_entropy(v);
    for (double v : p.mean_distance) q->add_mean_distance(v);
    for (double v : p.first_mass) q->add_first_mass(v);
    q->set_pooled_drift(p.pooled_drift);
    q->set_prefix_drift(p.prefix_drift);
    q->set_wrapped_pairs(static_cast<int32_t>(p.wrapped_pairs));
  }
}

}  // namespace encoder::service
