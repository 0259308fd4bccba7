#include "server/model/dtype.h"

#include <c10/util/Exception.h>

#include "server/common/status_macros.h"

namespace encoder::model {

absl::StatusOr<at::ScalarType> ParseDtype(const std::string& name) {
  ASSIGN_OR_RETURN(Dtype dtype, ParseDtypeName(name));
  return ScalarTypeOf(dtype);
}

at::ScalarType ScalarTypeOf(Dtype dtype) {
  switch (dtype) {
    case Dtype::kFloat16:
      return at::kHalf;
    case Dtype::kBfloat16:
      return at::kBFloat16;
    case Dtype::kFloat32:
      break;
  }
  return at::kFloat;
}

Dtype DtypeOf(at::ScalarType dtype) {
  switch (dtype) {
    case at::kFloat:
      return Dtype::kFloat32;
    case at::kHalf:
      return Dtype::kFloat16;
    case at::kBFloat16:
      return Dtype::kBfloat16;
    default:
      TORCH_CHECK(false, "no model is held in ", c10::toString(dtype));
  }
}

std::string DtypeName(at::ScalarType dtype) {
  switch (dtype) {
    case at::kFloat:
    case at::kHalf:
    case at::kBFloat16:
      return DtypeName(DtypeOf(dtype));
    case at::kDouble:
      return "float64";
    default:
      return c10::toString(dtype);
  }
}

}  // namespace encoder::model
