// Reader for the safetensors weight format
// (docs/positional-encodings.md#the-safetensors-format): u64 little-endian
// header length N, N bytes of JSON, then a data buffer.
//
// Every structural violation (bad header length, malformed JSON, unknown
// dtype, offsets out of range, overlaps, holes, trailing bytes, size that
// does not match shape x dtype) is returned as an InvalidArgument status
// naming the file and, where one is involved, the tensor. Never throws.
#ifndef ENCODER_SERVER_MODEL_SAFETENSORS_H_
#define ENCODER_SERVER_MODEL_SAFETENSORS_H_

#include <ATen/ATen.h>

#include <cstdint>
#include <map>
#include <string>

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

#endif  // ENCODER_SERVER_MODEL_SAFETENSORS_H_
