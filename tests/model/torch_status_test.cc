#include "server/model/torch_status.h"

#include <gtest/gtest.h>

namespace encoder::model {
namespace {

TEST(TorchStatus, OutOfMemoryIsResourceExhaustedOtherErrorsInternal) {
  const c10::SourceLocation here{__func__, __FILE__, __LINE__};
  const c10::OutOfMemoryError oom(here,
                                  "CUDA out of memory. Tried to "
                                  "allocate 2.00 GiB");
  absl::Status s = StatusFromTorchError(oom, "a batch of 8 sequences");
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(std::string(s.message()).find("a batch of 8 sequences"),
            std::string::npos);
  EXPECT_NE(std::string(s.message()).find("out of memory"), std::string::npos);

  const c10::Error other(here, "shape mismatch");
  s = StatusFromTorchError(other, "encoder forward");
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_NE(std::string(s.message()).find("shape mismatch"), std::string::npos);
}

TEST(TorchStatus, AThrownOutOfMemoryIsStillRecognizedThroughItsBase) {
  try {
    TORCH_CHECK_WITH(OutOfMemoryError, false, "out of device memory");
  } catch (const c10::Error& e) {
    EXPECT_EQ(StatusFromTorchError(e, "forward").code(),
              absl::StatusCode::kResourceExhausted);
    return;
  }
  FAIL() << "TORCH_CHECK_WITH did not throw";
}

}  // namespace
}  // namespace encoder::model
