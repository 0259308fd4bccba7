// libFuzzer target: the safetensors parser (u64 header length, JSON header
// of dtypes, shapes and offsets, data buffer) on arbitrary bytes. Any
// result is fine; a crash, leak, sanitizer report or hang is not.
#include <cstddef>
#include <cstdint>
#include <string>

#include "server/model/weights/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  auto parsed = encoder::model::ParseSafetensors(bytes, "fuzz.safetensors");
  if (parsed.ok()) {
    // Every tensor owns its memory: touching it must be valid.
    for (const auto& [name, tensor] : parsed->tensors) {
      if (tensor.numel() > 0) (void)tensor.sum().item<double>();
    }
  }
  return 0;
}
