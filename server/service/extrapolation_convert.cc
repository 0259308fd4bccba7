#include "server/service/extrapolation_convert.h"

namespace encoder::service {

void FillExtrapolation(const api::ExtrapolationResult& result,
                       const api::ExtrapolationOptions& options,
                       int64_t max_tokens, v1::ExtrapolationProbe* out) {
  const model::SchemeReach& r = result.reach;
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
  for (const api::LengthPoint& p : result.points) {
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
