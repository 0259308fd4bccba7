// ComputeHeadStats: per-head attention statistics
// (docs/positional-encodings.md#attention-statistics), each a mean over
// query rows, in float64.
#include <c10/core/InferenceMode.h>

#include <cstdint>
#include <vector>

#include "server/diagnostics/diagnostics.h"

namespace encoder::diagnostics {

std::vector<AttentionHeadStats> ComputeHeadStats(const at::Tensor& probs,
                                                 int64_t layer) {
  TORCH_CHECK(probs.dim() == 3 && probs.size(1) == probs.size(2),
              "attention probabilities must be [heads, S, S], got ",
              probs.sizes());
  c10::InferenceMode guard;
  const int64_t heads = probs.size(0);
  const int64_t s = probs.size(1);
  std::vector<AttentionHeadStats> stats(heads);
  for (int64_t h = 0; h < heads; ++h) {
    stats[h].layer = layer;
    stats[h].head = h;
  }
  if (s == 0) return stats;

  at::Tensor a = probs.to(at::kCPU, at::kDouble);  // [H, S, S]
  const double rows = static_cast<double>(s);
  // 0 ln 0 counts as 0 (xlogy), so hard attention has entropy 0.
  at::Tensor entropy = -at::xlogy(a, a).sum({1, 2}) / rows;  // [H]
  at::Tensor index = at::arange(s, a.options());
  at::Tensor distance =
      (index.unsqueeze(1) - index.unsqueeze(0)).abs();  // [S, S]
  at::Tensor mean_distance = (a * distance).sum({1, 2}) / rows;
  at::Tensor self_mass = a.diagonal(0, 1, 2).sum(-1) / rows;
  // Row i's mass on key i-1 lies on the sub-diagonal; rows without such a
  // key contribute 0 but still count in the mean.
  at::Tensor prev_mass = a.diagonal(-1, 1, 2).sum(-1) / rows;
  at::Tensor next_mass = a.diagonal(1, 1, 2).sum(-1) / rows;
  at::Tensor first_mass = a.select(2, 0).sum(-1) / rows;

  for (int64_t h = 0; h < heads; ++h) {
    stats[h].entropy = entropy[h].item<double>();
    stats[h].mean_distance = mean_distance[h].item<double>();
    stats[h].self_mass = self_mass[h].item<double>();
    stats[h].prev_mass = prev_mass[h].item<double>();
    stats[h].next_mass = next_mass[h].item<double>();
    stats[h].first_mass = first_mass[h].item<double>();
  }
  return stats;
}

}  // namespace encoder::diagnostics
