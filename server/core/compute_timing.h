// A call's counts and times as text-embeddings-inference names them, for
// both fronts to send: the HTTP front as response headers, the gRPC front
// as trailing metadata. One list, so the two cannot drift apart.
#ifndef ENCODER_SERVER_CORE_COMPUTE_TIMING_H_
#define ENCODER_SERVER_CORE_COMPUTE_TIMING_H_

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace encoder::core {

// {name, value} of an EmbedAnswer or ScoreAnswer, in whole milliseconds
// (floored) as text-embeddings-inference writes them: x-total-time (and
// x-compute-time, the same) from admission to answer, x-tokenization-time
// until the sequences were queued, x-queue-time and x-inference-time of
// the slowest input; and x-compute-tokens.
template <typename Answer>
std::vector<std::pair<std::string, std::string>> ComputeTimingFields(
    const Answer& answer) {
  auto ms = [](double v) {
    return absl::StrCat(static_cast<int64_t>(std::max(0.0, v)));
  };
  return {{"x-compute-time", ms(answer.total_ms)},
          {"x-compute-tokens", absl::StrCat(answer.total_tokens)},
          {"x-total-time", ms(answer.total_ms)},
          {"x-tokenization-time", ms(answer.tokenization_ms)},
          {"x-queue-time", ms(answer.queue_ms)},
          {"x-inference-time", ms(answer.inference_ms)}};
}

}  // namespace encoder::core

#endif  // ENCODER_SERVER_CORE_COMPUTE_TIMING_H_
