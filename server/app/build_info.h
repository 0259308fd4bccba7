// What this binary is: version, git commit, build type, compiler and
// LibTorch, for --version, the start-up log and encoder_build_info.
#ifndef ENCODER_SERVER_APP_BUILD_INFO_H_
#define ENCODER_SERVER_APP_BUILD_INFO_H_

#include <string>

namespace encoder {

struct BuildInfo {
  std::string version;     // the CMake project version
  std::string commit;      // git rev-parse --short HEAD, or "unknown"
  std::string build_type;  // CMAKE_BUILD_TYPE
  std::string compiler;    // "gcc 12.2.0", "clang 14.0.6"
  std::string libtorch;    // "2.15.0"
};

const BuildInfo& GetBuildInfo();

// The --version text: one "key: value" line per field after the first.
std::string VersionText();

}  // namespace encoder

#endif  // ENCODER_SERVER_APP_BUILD_INFO_H_
