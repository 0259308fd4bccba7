#include "server/app/build_info.h"

#include <torch/version.h>

#include "absl/strings/str_cat.h"
#include "server/app/build_info_gen.h"

namespace encoder {

const BuildInfo& GetBuildInfo() {
  static const BuildInfo* info = new BuildInfo {
    ENCODER_VERSION, ENCODER_GIT_COMMIT,
        ENCODER_BUILD_TYPE[0] != '\0' ? ENCODER_BUILD_TYPE : "unspecified",
#if defined(__clang__)
        "clang " __clang_version__,
#elif defined(__GNUC__)
        "gcc " __VERSION__,
#else
        "unknown",
#endif
        TORCH_VERSION
  };
  return *info;
}

std::string VersionText() {
  const BuildInfo& b = GetBuildInfo();
  return absl::StrCat("encoder-server ", b.version, "\ncommit: ", b.commit,
                      "\nbuild type: ", b.build_type,
                      "\ncompiler: ", b.compiler, "\nLibTorch: ", b.libtorch);
}

}  // namespace encoder
