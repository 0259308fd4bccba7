// Reader for the safetensors weight format
// (docs/positional-encodings.md#the-safetensors-format): u64 little-endian
// header length N, N bytes of JSON, then a data buffer.
//
// Every structural violation (bad header length, malformed JSON, unknown
// dtype, offsets out of range, overlaps, holes, trailing bytes, size that
// does not match shape x dtype) is returned as an InvalidArgument status
// naming the file and, where one is involved, the tensor. Never throws.
#ifndef ENCODER_SERVER_MODEL_WEIGHTS_SAFETENSORS_H_
#define ENCODER_SERVER_MODEL_WEIGHTS_SAFETENSORS_H_

#include <ATen/ATen.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"

namespace encoder::model {

// Largest accepted JSON header, as in the reference implementation.
inline constexpr uint64_t kMaxSafetensorsHeaderBytes = 100'000'000;

struct SafetensorsFile {
  // Tensors by name, on CPU, contiguous, in their stored dtype. Each owns its
  // memory (nothing refers back into the file buffer).
  std::map<std::string, at::Tensor> tensors;
  std::map<std::string, std::string> metadata;
};

// Where one tensor lies in a safetensors image (offsets from the start of
// the image, end exclusive), validated as ParseSafetensors validates it.
struct TensorLayout {
  at::ScalarType dtype = at::kFloat;
  std::vector<int64_t> shape;
  uint64_t begin = 0;
  uint64_t end = 0;
};

struct SafetensorsLayout {
  std::map<std::string, TensorLayout> tensors;
  std::map<std::string, std::string> metadata;
};

// Validates an image's header and offsets without copying any tensor data
// (for memory-mapped files). `bytes` may be a mapping of the whole file.
absl::StatusOr<SafetensorsLayout> ParseSafetensorsLayout(
    absl::string_view bytes, const std::string& source);

// Parses an in-memory safetensors image. `source` names it in error messages.
absl::StatusOr<SafetensorsFile> ParseSafetensors(const std::string& bytes,
                                                 const std::string& source);

// Reads and parses a file.
absl::StatusOr<SafetensorsFile> ReadSafetensors(const std::string& path);

// Serializes tensors (CPU; F32, F64, F16, BF16, I64, I32, I16, I8, U8, BOOL)
// into the format. Used by tools and tests that write weights.
absl::StatusOr<std::string> SerializeSafetensors(
    const std::map<std::string, at::Tensor>& tensors,
    const std::map<std::string, std::string>& metadata = {});

}  // namespace encoder::model

#endif  // ENCODER_SERVER_MODEL_WEIGHTS_SAFETENSORS_H_
