// Statistics of one layer and head's attention over the real tokens of one
// sequence (padding excluded), averaged over query rows i. The one struct
// for them: computed by diagnostics::ComputeHeadStats, carried in
// api::EmbedResult, packed into encoder.v1.AttentionHeadStats by
// service::PackAttentionStats. Plain C++: usable in every layer.
#ifndef ENCODER_SERVER_COMMON_ATTENTION_STATS_H_
#define ENCODER_SERVER_COMMON_ATTENTION_STATS_H_

#include <cstdint>

namespace encoder {

struct AttentionHeadStats {
  int64_t layer = 0;
  int64_t head = 0;
  double entropy = 0;        // nats: -sum_j a_ij ln a_ij
  double mean_distance = 0;  // sum_j a_ij |i - j|
  double self_mass = 0;      // a_ii
  double prev_mass = 0;      // a_i,i-1 (rows i >= 1; row 0 counts 0)
  double next_mass = 0;      // a_i,i+1 (rows i < S-1; last row counts 0)
  double first_mass = 0;     // a_i,0
};

}  // namespace encoder

#endif  // ENCODER_SERVER_COMMON_ATTENTION_STATS_H_
