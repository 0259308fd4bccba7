// Packing of tensors into encoder.v1.Tensor: little-endian, row-major.
#ifndef ENCODER_SERVER_SERVICE_TENSOR_PROTO_H_
#define ENCODER_SERVER_SERVICE_TENSOR_PROTO_H_

#include <cstdint>
#include <vector>

#include "encoder/v1/encoder.pb.h"

namespace encoder::service {

// float32 values with a shape; values.size() must equal prod(shape).
void PackFloat32(const std::vector<float>& values,
                 const std::vector<int64_t>& shape, v1::Tensor* out);
void PackFloat32(const float* values, size_t count,
                 const std::vector<int64_t>& shape, v1::Tensor* out);
// float64 values (diagnostic matrices).
void PackFloat64(const double* values, size_t count,
                 const std::vector<int64_t>& shape, v1::Tensor* out);

}  // namespace encoder::service

#endif  // ENCODER_SERVER_SERVICE_TENSOR_PROTO_H_
