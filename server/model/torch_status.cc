#include "server/model/torch_status.h"

#include "absl/strings/str_cat.h"

namespace encoder::model {

absl::Status StatusFromTorchError(const c10::Error& error,
                                  const std::string& what) {
  if (dynamic_cast<const c10::OutOfMemoryError*>(&error) != nullptr) {
    return absl::ResourceExhaustedError(
        absl::StrCat(what,
                     ": device out of memory; retry with fewer or "
                     "shorter inputs"));
  }
  return absl::InternalError(
      absl::StrCat(what, " failed: ", error.what_without_backtrace()));
}

}  // namespace encoder::model
