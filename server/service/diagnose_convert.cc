#include "server/service/diagnose_convert.h"

#include "server/service/embed_proto.h"
#include "server/service/extrapolation_convert.h"
#include "server/service/tensor_proto.h"

namespace encoder::service {
namespace {

void PackMatrix(const api::DenseArray<double>& m, v1::Tensor* out) {
  if (!m.present()) return;
  PackFloat64(m.values.data(), m.values.size(), m.shape, out);
}

}  // namespace

core::DiagnoseQuery ToDiagnoseQuery(const v1::DiagnoseRequest& request) {
  using Input = core::DiagnoseQuery::Input;
  core::DiagnoseQuery q;
  switch (request.input_case()) {
    case v1::DiagnoseRequest::kTokenIds:
      q.input = Input::kTokenIds;
      q.token_ids.assign(request.token_ids().ids().begin(),
                         request.token_ids().ids().end());
      break;
    case v1::DiagnoseRequest::kText:
      q.input = Input::kText;
      q.text = request.text();
      q.text_options = ToTextOptions(request.text_options());
      break;
    case v1::DiagnoseRequest::kRandom:
      q.input = Input::kRandom;
      q.random_length = request.random().length();
      q.random_seed = request.random().seed();
      break;
    default:
      break;
  }
  q.permutation = request.permutation();
  q.shift = request.shift();
  q.structure = request.structure();
  q.attention_stats = request.attention_stats();
  q.extrapolation = request.extrapolation();
  q.return_attention_maps = request.return_attention_maps();
  q.permutation_order.assign(request.permutation_order().begin(),
                             request.permutation_order().end());
  q.permutation_seed = request.permutation_seed();
  q.shift_offset = request.shift_offset();
  q.structure_positions = request.structure_positions();
  q.tolerance = request.tolerance();
  const v1::ExtrapolationOptions& e = request.extrapolation_options();
  q.extrapolation_lengths.assign(e.lengths().begin(), e.lengths().end());
  q.extrapolation_max_multiple = e.max_multiple();
  q.extrapolation_points = e.points();
  q.extrapolation_prefix_length = e.prefix_length();
  return q;
}

void FillDiagnoseResponse(const api::DiagnoseReport& report,
                          const api::ServedModel& model,
                          const api::DiagnoseOptions& options,
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
