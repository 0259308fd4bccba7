// Names of the floating-point dtypes a model can run in, as flags, the
// metrics and the tools spell them: float32, float16, bfloat16.
#ifndef ENCODER_SERVER_MODEL_DTYPE_H_
#define ENCODER_SERVER_MODEL_DTYPE_H_

#include <c10/core/ScalarType.h>

#include <string>

#include "absl/status/statusor.h"

namespace encoder::model {

// InvalidArgument "must be float32, float16 or bfloat16, got NAME" for any
// other name (callers prefix the flag or variable that held it).
absl::StatusOr<at::ScalarType> ParseDtype(const std::string& name);

// The name ParseDtype accepts for `dtype`; c10's own name for others.
std::string DtypeName(at::ScalarType dtype);

}  // namespace encoder::model

#endif  // ENCODER_SERVER_MODEL_DTYPE_H_
