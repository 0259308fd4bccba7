// libFuzzer target: the model config JSON parser and its validation.
#include <cstddef>
#include <cstdint>
#include <string>

#include "server/model/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto config = encoder::model::ParseModelConfig(text);
  if (config.ok()) (void)encoder::model::ValidateConfig(*config);
  return 0;
}
