// Inputs longer than their model accepts (EmbedQuery's chunk and
// extrapolate): the windows an input is cut into, how far past its length a
// model may run, and the windows' vectors joined into the input's one.
#ifndef ENCODER_SERVER_CORE_LONG_INPUT_H_
#define ENCODER_SERVER_CORE_LONG_INPUT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/api/served_model.h"
#include "server/core/embed_request.h"

namespace encoder::core {

// One window of a chunked input: the ids it runs (the model's special
// tokens around a stretch of the input's own) and the input tokens it
// covers.
struct Window {
  std::vector<int64_t> ids;  // empty for late chunking (the whole runs)
  ChunkSpan span;
  int64_t whole_begin = 0;  // where span.token_begin sits in the whole ids
};

// inputs[i]'s windows: the input's own tokens in windows of
// query.chunk_tokens, else as many as fill the model's length with its
// special tokens around them or (`late`: late chunking) the whole input, each
// repeating chunk_overlap tokens of the one before, the last ending at the
// input's end. Each window's ids are framed by the special tokens; late
// chunking leaves them empty. INVALID_ARGUMENT past
// limits.max_chunks_per_input windows, or for bad sizes.
absl::StatusOr<std::vector<Window>> Windows(const EmbedQuery& query, int i,
                                            const api::ServedModel& model,
                                            const std::vector<int64_t>& whole,
                                            bool late,
                                            const ServiceLimits& limits);

// The longest input `model` may run past its length (Diagnose's
// extrapolation probe, an extrapolating Embed): its repository entry's
// max_extrapolation_tokens, else `server_default`.
int64_t ModelExtrapolationTokens(const api::ServedModel& model,
                                 int64_t server_default);

// The longest input `model` runs when a request extrapolates: the model's
// max_extrapolation_tokens, else the server's, within what its positional
// scheme can represent; FAILED_PRECONDITION when that is no more than its
// max_length (a learned position table).
absl::StatusOr<int64_t> ExtrapolationLimit(const api::ServedModel& model,
                                           const ServiceLimits& limits);

// A windowed input's answer (plan.spans set): its windows' vectors
// (separate results, or the late-chunked sequence's span_pooled) weighted
// by the input tokens each covers, or their element-wise max, cut and
// normalized as the query asks, into out->result.pooled; tokens summed and
// batch times maxed over the windows; every window's vector in
// out->chunk_vectors when the query returns them.
void JoinWindows(const PreparedEmbed& prepared,
                 const PreparedEmbed::Input& plan,
                 std::vector<api::EmbedResult>* results, EmbeddedInput* out);

// The policy an input past `model`'s length gets when its request names
// none: the model's repository entry's long_input, else limits.long_input;
// auto resolved from the positional scheme. `reason` says why, in a
// sentence (ListModels shows both).
struct LongInputDefault {
  LongInputPolicy policy = LongInputPolicy::kRefuse;  // never auto
  std::string reason;
  // auto's extrapolation: inputs past the extrapolation limit are chunked
  // instead of refused.
  bool chunk_past_limit = false;
  // auto's extrapolation of a scaled rotary code: inputs past this length
  // (its scaled reach) are chunked too; 0: the extrapolation limit alone.
  int64_t whole_up_to = 0;
};
LongInputDefault DefaultLongInput(const api::ServedModel& model,
                                  const ServiceLimits& limits);

// The policy as configured, before auto is resolved: the model's
// repository entry's long_input, else limits.long_input.
LongInputPolicy ConfiguredLongInput(const api::ServedModel& model,
                                    const ServiceLimits& limits);

}  // namespace encoder::core

#endif  // ENCODER_SERVER_CORE_LONG_INPUT_H_
