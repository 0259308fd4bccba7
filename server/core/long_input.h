// Inputs longer than their model accepts (EmbedQuery's chunk and
// extrapolate): the windows an input is cut into, how far past its length a
// model may run, and the windows' vectors joined into the input's one.
#ifndef ENCODER_SERVER_CORE_LONG_INPUT_H_
#define ENCODER_SERVER_CORE_LONG_INPUT_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "server/core/embed_request.h"
#include "server/runner/served_model.h"

namespace encoder::core {

// One window of a chunked input: the ids it runs (the model's special
// tokens around a stretch of the input's own) and how many of the input's
// tokens it covers.
struct Window {
  std::vector<int64_t> ids;
  int64_t tokens = 0;  // input tokens it covers
};

// inputs[i]'s windows when its `whole` ids are longer than the model
// accepts: the input's own tokens in windows that, with the model's special
// tokens around them for text, fill the model's length, each repeating
// chunk_overlap tokens of the one before, the last ending at the input's
// end.
absl::StatusOr<std::vector<Window>> Windows(const EmbedQuery& query, int i,
                                            const runner::ServedModel& model,
                                            const std::vector<int64_t>& whole,
                                            const ServiceLimits& limits);

// The longest input `model` may run past its length (Diagnose's
// extrapolation probe, an extrapolating Embed): its repository entry's
// max_extrapolation_tokens, else `server_default`.
int64_t ModelExtrapolationTokens(const runner::ServedModel& model,
                                 int64_t server_default);

// The longest input `model` runs when a request extrapolates: the model's
// max_extrapolation_tokens, else the server's, within what its positional
// scheme can represent; FAILED_PRECONDITION when that is no more than its
// max_length (a learned position table).
absl::StatusOr<int64_t> ExtrapolationLimit(const runner::ServedModel& model,
                                           const ServiceLimits& limits);

// One input's windows aggregated into its first window's result: the
// pooled vectors weighted by the input tokens each covers, or their
// element-wise max; tokens and batch times summed and maxed.
runner::EmbedResult Aggregate(const PreparedEmbed& prepared,
                              const PreparedEmbed::Input& plan,
                              std::vector<runner::EmbedResult>* results);

}  // namespace encoder::core

#endif  // ENCODER_SERVER_CORE_LONG_INPUT_H_
