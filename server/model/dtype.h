// A model's dtype (config.h's Dtype, whose names are the one table) as
// LibTorch's scalar type, and back.
#ifndef ENCODER_SERVER_MODEL_DTYPE_H_
#define ENCODER_SERVER_MODEL_DTYPE_H_

#include <c10/core/ScalarType.h>

#include <string>

#include "absl/status/statusor.h"
#include "server/model/config.h"

namespace encoder::model {

// ParseDtypeName's dtype (config.h) as LibTorch's type: InvalidArgument
// "must be float32, float16 or bfloat16, got NAME" for any other name
// (callers prefix the flag or variable that held it).
absl::StatusOr<at::ScalarType> ParseDtype(const std::string& name);

// The two spellings of a model's dtype. DtypeOf throws c10::Error for a
// type no model is held in.
at::ScalarType ScalarTypeOf(Dtype dtype);
Dtype DtypeOf(at::ScalarType dtype);

// The name ParseDtype accepts for `dtype`; c10's own name for others.
std::string DtypeName(at::ScalarType dtype);

}  // namespace encoder::model

#endif  // ENCODER_SERVER_MODEL_DTYPE_H_
