// Conversion between encoder.v1.Tensor (packed little-endian bytes with a
// shape and dtype) and plain row-major double vectors.
#ifndef ENCODER_CLIENT_TENSOR_CODEC_H_
#define ENCODER_CLIENT_TENSOR_CODEC_H_

#include <cstdint>
#include <string>
#include <vector>

#include "encoder/v1/encoder.pb.h"

namespace encoder_client {

// Number of elements a tensor of `shape` holds (1 for a scalar, shape {}).
// Returns -1 when a dimension is negative.
int64_t ElementCount(const std::vector<int64_t>& shape);

// Bytes per element of `dtype`; 0 for DTYPE_UNSPECIFIED or unknown values.
int ElementSize(encoder::v1::DType dtype);

// Lower-case dtype name ("float32", "bfloat16", ...; "unspecified").
std::string DTypeName(encoder::v1::DType dtype);

// Decodes `tensor` into `values` (row-major, widened to double; int64 values
// beyond 2^53 lose precision). Returns false and sets `error` when the dtype
// is unspecified, a dimension is negative, or data does not hold exactly
// prod(shape) elements. `values` and `error` must not be null.
bool DecodeTensor(const encoder::v1::Tensor& tensor,
                  std::vector<double>* values, std::string* error);

// Packs `values` (row-major, prod(shape) of them) as `dtype`. float16 and
// bfloat16 round to nearest even; int64 truncates toward zero. Returns an
// empty-data tensor when sizes disagree or the dtype is unspecified.
encoder::v1::Tensor EncodeTensor(const std::vector<int64_t>& shape,
                                 const std::vector<double>& values,
                                 encoder::v1::DType dtype);

// IEEE-754 binary16 and bfloat16 bit patterns to and from float.
float HalfBitsToFloat(uint16_t bits);
uint16_t FloatToHalfBits(float value);
float BFloat16BitsToFloat(uint16_t bits);
uint16_t FloatToBFloat16Bits(float value);

}  // namespace encoder_client

#endif  // ENCODER_CLIENT_TENSOR_CODEC_H_
