// libFuzzer target: the model repository JSON parser. Relative paths
// resolve against a directory that does not exist, so no file is read
// unless the input names an absolute path.
#include <cstddef>
#include <cstdint>
#include <string>

#include "server/model/weights/model_repository.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  (void)encoder::model::ParseRepository(text, "/nonexistent-fuzz-dir");
  return 0;
}
