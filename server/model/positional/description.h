// What a positional scheme reports about itself: plain data, shared by
// the model (which fills it) and the layers that describe models.
#ifndef ENCODER_SERVER_MODEL_POSITIONAL_DESCRIPTION_H_
#define ENCODER_SERVER_MODEL_POSITIONAL_DESCRIPTION_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace encoder::model {

// What a scheme reports about itself (model info, diagnostics).
struct SchemeDescription {
  std::string name;  // "none", "sinusoidal", ...
  // Human-readable parameters, e.g. {"base": "10000", "layout": "half"}.
  std::map<std::string, std::string> params;
  std::vector<double> alibi_slopes;  // per head, alibi only
  bool extrapolates = true;          // false: longer than max_positions fails
  int64_t max_positions = 0;
  // Where position enters: any of "input", "query_key", "logits".
  std::vector<std::string> hooks;
};

}  // namespace encoder::model

#endif  // ENCODER_SERVER_MODEL_POSITIONAL_DESCRIPTION_H_
