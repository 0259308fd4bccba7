// libFuzzer target: a Hugging Face config.json through the whole import
// (model_type dispatch, each family's importer, validation, the tensor
// check against the checkpoint). The directory holds a one-tensor
// safetensors file written at start; each input becomes its config.json.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>

#include "server/model/hf/checkpoint.h"

namespace {

std::string* dir = nullptr;

void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// embeddings.word_embeddings.weight, float32 [4, 4].
std::string TinySafetensors() {
  const std::string header =
      R"({"embeddings.word_embeddings.weight":{"dtype":"F32",)"
      R"("shape":[4,4],"data_offsets":[0,64]}})";
  std::string out(8, '\0');
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out + header + std::string(64, '\0');
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  char tmpl[] = "/tmp/hf_config_fuzz.XXXXXX";
  if (mkdtemp(tmpl) == nullptr) std::abort();
  dir = new std::string(tmpl);
  WriteFile(*dir + "/model.safetensors", TinySafetensors());
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  WriteFile(*dir + "/config.json",
            std::string(reinterpret_cast<const char*>(data), size));
  (void)encoder::model::LoadCheckpoint(*dir, {}, at::kCPU, at::kFloat);
  return 0;
}
