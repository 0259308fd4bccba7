#include "server/core/diagnose_request.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/common/status_macros.h"

namespace encoder::core {
namespace {

using Input = DiagnoseQuery::Input;

// The query's input as token ids (a random input longer than the limit
// stays empty: its length is refused by the caller).
absl::Status ReadInput(const DiagnoseQuery& q, const api::ServedModel& model,
                       const DiagnoseLimits& limits, api::DiagnoseOptions* o) {
  switch (q.input) {
    case Input::kTokenIds:
      o->token_ids = q.token_ids;
      return absl::OkStatus();
    case Input::kText: {
      if (q.text.empty()) return absl::InvalidArgumentError("text is empty");
      ASSIGN_OR_RETURN(auto tokens, TokenizeText(model, q.text, q.text_options,
                                                 /*truncate=*/false, 0));
      o->token_ids = std::move(tokens.encoding.ids);
      return absl::OkStatus();
    }
    case Input::kRandom:
      if (q.random_length <= 0) {
        return absl::InvalidArgumentError("random.length must be > 0");
      }
      if (q.random_length <= limits.max_tokens) {
        o->token_ids = SeededRandomIds(q.random_length, q.random_seed,
                                       model.description().config.vocab_size);
      }
      return absl::OkStatus();
    case Input::kNone:
      break;
  }
  return absl::InvalidArgumentError("no input: set token_ids, text or random");
}

// The input's length against the limits, and its ids against the
// vocabulary.
absl::Status CheckInput(const DiagnoseQuery& q, const api::ServedModel& model,
                        const DiagnoseLimits& limits,
                        const api::DiagnoseOptions& o) {
  const model::ModelConfig& c = model.description().config;
  const int64_t n = q.input == Input::kRandom
                        ? q.random_length
                        : static_cast<int64_t>(o.token_ids.size());
  if (n == 0) return absl::InvalidArgumentError("the input has no tokens");
  const int64_t model_max = model.description().max_length;
  const int64_t max_len = std::min(limits.max_tokens, model_max);
  if (n > max_len) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the input has ", n, " tokens; Diagnose accepts at most ", max_len,
        " for model \"", model.name(), "\" (--max-diagnose-tokens=",
        limits.max_tokens, ", model limit ", model_max, ")"));
  }
  for (int64_t id : o.token_ids) {
    if (id < 0 || id >= c.vocab_size) {
      return absl::InvalidArgumentError(
          absl::StrCat("token id ", id, " is outside the vocabulary [0, ",
                       c.vocab_size, ")"));
    }
  }
  return absl::OkStatus();
}

// Which probes run and their parameters.
absl::Status ReadProbes(const DiagnoseQuery& q, const DiagnoseLimits& limits,
                        api::DiagnoseOptions* o) {
  const bool any = q.permutation || q.shift || q.structure ||
                   q.attention_stats || q.extrapolation;
  o->permutation = !any || q.permutation;
  o->shift = !any || q.shift;
  o->structure = !any || q.structure;
  o->attention_stats = !any || q.attention_stats;
  o->return_attention_maps = q.return_attention_maps;
  o->permutation_order = q.permutation_order;
  if (!o->permutation_order.empty() &&
      o->permutation_order.size() != o->token_ids.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "permutation_order has ", o->permutation_order.size(),
        " entries; the input has ", o->token_ids.size(), " tokens"));
  }
  o->permutation_seed = q.permutation_seed;
  if (q.shift_offset < -kMaxShiftOffset || q.shift_offset > kMaxShiftOffset) {
    return absl::InvalidArgumentError(
        absl::StrCat("shift_offset ", q.shift_offset, " is out of range [",
                     -kMaxShiftOffset, ", ", kMaxShiftOffset, "]"));
  }
  if (q.shift_offset != 0) o->shift_offset = q.shift_offset;
  o->structure_positions =
      q.structure_positions != 0
          ? q.structure_positions
          : std::min(o->structure_positions, limits.max_structure_positions);
  if (o->structure &&
      (o->structure_positions < 2 ||
       o->structure_positions > limits.max_structure_positions)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "structure_positions ", o->structure_positions, " must be in [2, ",
        limits.max_structure_positions, "] (--max-structure-positions)"));
  }
  if (!std::isfinite(q.tolerance) || q.tolerance < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("tolerance ", q.tolerance,
                     " must be a finite number >= 0 (0: the probe's default)"));
  }
  o->tolerance = q.tolerance;
  return absl::OkStatus();
}

// The caller's lengths, each checked against `limit`.
absl::StatusOr<std::vector<int64_t>> GivenGrid(const DiagnoseQuery& q,
                                               int64_t limit) {
  const int64_t max_points = api::kMaxExtrapolationLengths;
  const auto& lengths = q.extrapolation_lengths;
  if (static_cast<int64_t>(lengths.size()) > max_points) {
    return absl::InvalidArgumentError(
        absl::StrCat("extrapolation_options.lengths has ", lengths.size(),
                     " entries; at most ", max_points));
  }
  std::vector<int64_t> out;
  for (int64_t length : lengths) {
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

absl::StatusOr<std::vector<int64_t>> Grid(const DiagnoseQuery& q,
                                          int64_t trained, int64_t limit) {
  if (!q.extrapolation_lengths.empty()) return GivenGrid(q, limit);
  const double multiple = q.extrapolation_max_multiple == 0
                              ? kDefaultExtrapolationMultiple
                              : q.extrapolation_max_multiple;
  if (!(multiple > 0 && multiple <= kMaxExtrapolationMultiple)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "extrapolation_options.max_multiple ", q.extrapolation_max_multiple,
        " must be in (0, ", kMaxExtrapolationMultiple, "]"));
  }
  const int64_t max_points = api::kMaxExtrapolationLengths;
  const int64_t points = q.extrapolation_points == 0
                             ? kDefaultExtrapolationPoints
                             : q.extrapolation_points;
  if (points < 1 || points > max_points) {
    return absl::InvalidArgumentError(
        absl::StrCat("extrapolation_options.points ", q.extrapolation_points,
                     " must be in [1, ", max_points, "]"));
  }
  return DefaultGrid(trained, multiple, static_cast<int32_t>(points), limit);
}

// The extrapolation probe's grid, source and prefix. The source is the
// input, or for a random input a draw of the longest length with the
// query's seed (its first ids are the base input's).
absl::Status ReadExtrapolation(const DiagnoseQuery& q,
                               const api::ServedModel& model,
                               const DiagnoseLimits& limits,
                               api::DiagnoseOptions* options) {
  const model::ModelConfig& c = model.description().config;
  const int64_t limit = MaxExtrapolationTokens(model, limits);
  ASSIGN_OR_RETURN(std::vector<int64_t> grid,
                   Grid(q, model.description().reach.trained_length, limit));
  api::ExtrapolationOptions o;
  o.lengths = std::move(grid);
  o.source =
      q.input == Input::kRandom
          ? SeededRandomIds(o.lengths.back(), q.random_seed, c.vocab_size)
          : options->token_ids;
  o.prefix_length =
      q.extrapolation_prefix_length != 0
          ? q.extrapolation_prefix_length
          : std::min(kDefaultExtrapolationPrefix, o.lengths.front());
  if (o.prefix_length < 1 || o.prefix_length > o.lengths.front()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "extrapolation_options.prefix_length ", q.extrapolation_prefix_length,
        " must be in [1, ", o.lengths.front(), "] (the shortest length)"));
  }
  options->extrapolation = std::move(o);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<api::DiagnoseOptions> BuildDiagnoseOptions(
    const DiagnoseQuery& query, const api::ServedModel& model,
    const DiagnoseLimits& limits) {
  api::DiagnoseOptions o;
  RETURN_IF_ERROR(ReadInput(query, model, limits, &o));
  RETURN_IF_ERROR(CheckInput(query, model, limits, o));
  RETURN_IF_ERROR(ReadProbes(query, limits, &o));
  if (query.extrapolation) {
    RETURN_IF_ERROR(ReadExtrapolation(query, model, limits, &o));
  }
  return o;
}

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

}  // namespace encoder::core
