// The model boundary's one mapping from LibTorch exceptions to statuses.
#ifndef ENCODER_SERVER_MODEL_TORCH_STATUS_H_
#define ENCODER_SERVER_MODEL_TORCH_STATUS_H_

#include <c10/util/Exception.h>

#include <string>

#include "absl/status/status.h"

namespace encoder::model {

// Device out-of-memory -> RESOURCE_EXHAUSTED (the caller may retry with
// less); any other library failure -> INTERNAL. `what` says what was being
// done ("encoder forward").
absl::Status StatusFromTorchError(const c10::Error& error,
                                  const std::string& what);

}  // namespace encoder::model

#endif  // ENCODER_SERVER_MODEL_TORCH_STATUS_H_
