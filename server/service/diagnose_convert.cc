#include "server/service/diagnose_convert.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "server/common/status_macros.h"
#include "server/core/inference.h"
#include "server/core/text_input.h"
#include "server/service/embed_proto.h"
#include "server/service/extrapolation_convert.h"
#include "server/service/tensor_proto.h"

namespace encoder::service {
namespace {

void PackMatrix(const diagnostics::DenseArray<double>& m, v1::Tensor* out) {
  if (!m.present()) return;
  PackFloat64(m.values.data(), m.values.size(), m.shape, out);
}

}  // namespace

absl::StatusOr<diagnostics::DiagnoseOptions> BuildDiagnoseOptions(
    const v1::DiagnoseRequest& request, const runner::ServedModel& model,
    const core::DiagnoseLimits& limits) {
  const model::ModelConfig& c = model.description().config;
  diagnostics::DiagnoseOptions o;
  switch (request.input_case()) {
    case v1::DiagnoseRequest::kTokenIds:
      o.token_ids.assign(request.token_ids().ids().begin(),
                         request.token_ids().ids().end());
      break;
    case v1::DiagnoseRequest::kText: {
      if (request.text().empty()) {
        return absl::InvalidArgumentError("text is empty");
      }
      ASSIGN_OR_RETURN(auto tokens,
                       core::TokenizeText(model, request.text(),
                                          ToTextOptions(request.text_options()),
                                          /*truncate=*/false, 0));
      o.token_ids = std::move(tokens.encoding.ids);
      break;
    }
    case v1::DiagnoseRequest::kRandom: {
      const int64_t n = request.random().length();
      if (n <= 0) {
        return absl::InvalidArgumentError("random.length must be > 0");
      }
      if (n > limits.max_tokens) break;  // reported below
      o.token_ids = SeededRandomIds(n, request.random().seed(), c.vocab_size);
      break;
    }
    default:
      return absl::InvalidArgumentError(
          "no input: set token_ids, text or random");
  }
  const int64_t n = request.input_case() == v1::DiagnoseRequest::kRandom
                        ? request.random().length()
                        : static_cast<int64_t>(o.token_ids.size());
  if (n == 0) return absl::InvalidArgumentError("the input has no tokens");
  const int64_t max_len = std::min(limits.max_tokens, c.max_length());
  if (n > max_len) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the input has ", n, " tokens; Diagnose accepts at most ", max_len,
        " for model \"", model.name(), "\" (--max-diagnose-tokens=",
        limits.max_tokens, ", model limit ", c.max_length(), ")"));
  }
  for (int64_t id : o.token_ids) {
    if (id < 0 || id >= c.vocab_size) {
      return absl::InvalidArgumentError(
          absl::StrCat("token id ", id, " is outside the vocabulary [0, ",
                       c.vocab_size, ")"));
    }
  }
  const bool any = request.permutation() || request.shift() ||
                   request.structure() || request.attention_stats() ||
                   request.extrapolation();
  o.permutation = !any || request.permutation();
  o.shift = !any || request.shift();
  o.structure = !any || request.structure();
  o.attention_stats = !any || request.attention_stats();
  o.return_attention_maps = request.return_attention_maps();
  o.permutation_order.assign(request.permutation_order().begin(),
                             request.permutation_order().end());
  if (!o.permutation_order.empty() &&
      static_cast<int64_t>(o.permutation_order.size()) != n) {
    return absl::InvalidArgumentError(
        absl::StrCat("permutation_order has ", o.permutation_order.size(),
                     " entries; the input has ", n, " tokens"));
  }
  o.permutation_seed = request.permutation_seed();
  if (request.shift_offset() < -kMaxShiftOffset ||
      request.shift_offset() > kMaxShiftOffset) {
    return absl::InvalidArgumentError(absl::StrCat(
        "shift_offset ", request.shift_offset(), " is out of range [",
        -kMaxShiftOffset, ", ", kMaxShiftOffset, "]"));
  }
  if (request.shift_offset() != 0) o.shift_offset = request.shift_offset();
  o.structure_positions =
      request.structure_positions() != 0
          ? request.structure_positions()
          : std::min(o.structure_positions, limits.max_structure_positions);
  if (o.structure && (o.structure_positions < 2 ||
                      o.structure_positions > limits.max_structure_positions)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "structure_positions ", o.structure_positions, " must be in [2, ",
        limits.max_structure_positions, "] (--max-structure-positions)"));
  }
  if (!std::isfinite(request.tolerance()) || request.tolerance() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("tolerance ", request.tolerance(),
                     " must be a finite number >= 0 (0: the probe's default)"));
  }
  o.tolerance = request.tolerance();
  if (request.extrapolation()) {
    RETURN_IF_ERROR(BuildExtrapolation(request, model, limits, &o));
  }
  return o;
}

void FillDiagnoseResponse(const diagnostics::DiagnoseReport& report,
                          const runner::ServedModel& model,
                          const diagnostics::DiagnoseOptions& options,
                          v1::DiagnoseResponse* response) {
  response->set_model(model.name());
  response->set_scheme(model.description().scheme.name);
  for (int64_t id : options.token_ids) {
    response->add_token_ids(id);
    response->add_token_labels(model.tokenizer() != nullptr
                                   ? model.tokenizer()->Label(id)
                                   : absl::StrCat("#", id));
  }
  if (report.permutation) {
    const auto& p = *report.permutation;
    v1::PermutationProbe* out = response->mutable_permutation();
    for (int64_t i : p.order) out->add_order(static_cast<int32_t>(i));
    out->set_max_token_error(p.max_token_error);
    out->set_max_pooled_error(p.max_pooled_error);
    out->set_tolerance(p.tolerance);
    out->set_equivariant(p.equivariant);
    out->set_verdict(p.verdict);
  }
  if (report.shift) {
    const auto& s = *report.shift;
    v1::ShiftProbe* out = response->mutable_shift();
    out->set_offset(s.offset);
    out->set_max_token_error(s.max_token_error);
    out->set_max_pooled_error(s.max_pooled_error);
    out->set_tolerance(s.tolerance);
    out->set_relative_only(s.relative_only);
    out->set_verdict(s.verdict);
  }
  if (report.structure) {
    const auto& s = *report.structure;
    v1::StructureProbe* out = response->mutable_structure();
    out->set_kind(s.kind);
    out->set_positions(static_cast<int32_t>(s.positions));
    PackMatrix(s.gram, out->mutable_gram());
    out->set_toeplitz_deviation(s.toeplitz_deviation);
    for (double v : s.similarity_by_distance)
      out->add_similarity_by_distance(v);
    out->set_min_code_distance(s.min_code_distance);
    for (int64_t k : s.shift_ks) out->add_shift_ks(static_cast<int32_t>(k));
    for (double r : s.shift_residuals) out->add_shift_residuals(r);
    PackMatrix(s.relativity, out->mutable_relativity());
    out->set_relativity_deviation(s.relativity_deviation);
    out->set_norm_ratio_deviation(s.norm_ratio_deviation);
    PackMatrix(s.bias, out->mutable_bias());
    for (double m : s.slopes) out->add_slopes(m);
    out->set_symmetric(s.symmetric);
    out->set_symmetry_deviation(s.symmetry_deviation);
    out->set_toeplitz(s.toeplitz);
  }
  for (const auto& h : report.attention_stats) {
    PackAttentionStats(h, response->add_attention_stats());
  }
  response->set_uniform_entropy(report.uniform_entropy);
  if (const auto& m = report.attention_maps; m.present()) {
    PackFloat32(m.values.data(), m.values.size(), m.shape,
                response->mutable_attention_maps());
  }
}

}  // namespace encoder::service
