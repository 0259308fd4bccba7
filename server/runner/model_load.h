// What ModelHost::Load reads for one model: its encoder in the precision
// the options and its entry ask for, packed where they say, and its
// tokenizer.
#ifndef ENCODER_SERVER_RUNNER_MODEL_LOAD_H_
#define ENCODER_SERVER_RUNNER_MODEL_LOAD_H_

#include <c10/core/ScalarType.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "server/model/encoder.h"
#include "server/model/weights/model_repository.h"
#include "server/runner/model_host.h"
#include "server/tokenizer/tokenizer.h"

namespace encoder::runner {

// Loads the model in the precision the options and its entry ask for:
// --dtype=auto on a CPU chooses (ChoosePrecision, its trials kept in
// `hosted`), int8 quantizes (--quantize or the entry's), and the weights
// are packed as PackedLimitsFor says. `hosted->spec` receives the spec as
// resolved from the checkpoint.
absl::StatusOr<std::unique_ptr<model::Encoder>> LoadPrecision(
    const model::ModelSpec& spec, const HostOptions& options,
    HostedModel* hosted);

// The limits a model whose products run in `dtype` is packed with
// (model::Encoder::PrepackWeights), or none where it is not packed.
std::optional<model::PackedLimits> PackedLimitsFor(const HostOptions& options,
                                                   at::ScalarType dtype);

// The tokenizer of a spec: the one it names (tokenizer.json or a
// directory), else its checkpoint directory's, else the byte tokenizer.
// Fails when a named tokenizer cannot be loaded or its ids do not fit the
// model's vocabulary; for a checkpoint's own tokenizer that is no error:
// the result is null and `why_none` says why text is refused.
absl::StatusOr<std::unique_ptr<tokenizer::Tokenizer>> LoadModelTokenizer(
    const model::ModelSpec& spec, std::string* why_none);

}  // namespace encoder::runner

#endif  // ENCODER_SERVER_RUNNER_MODEL_LOAD_H_
