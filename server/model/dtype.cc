#include "server/model/dtype.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace encoder::model {

absl::StatusOr<at::ScalarType> ParseDtype(const std::string& name) {
  if (name == "float32") return at::kFloat;
  if (name == "float16") return at::kHalf;
  if (name == "bfloat16") return at::kBFloat16;
  return absl::InvalidArgumentError(
      absl::StrCat("must be float32, float16 or bfloat16, got ", name));
}

std::string DtypeName(at::ScalarType dtype) {
  switch (dtype) {
    case at::kFloat:
      return "float32";
    case at::kHalf:
      return "float16";
    case at::kBFloat16:
      return "bfloat16";
    case at::kDouble:
      return "float64";
    default:
      return c10::toString(dtype);
  }
}

}  // namespace encoder::model
