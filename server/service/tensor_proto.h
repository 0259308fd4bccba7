// Packing of tensors into encoder.v1.Tensor (little-endian, row-major) and
// of attention statistics into encoder.v1.AttentionHeadStats.
#ifndef ENCODER_SERVER_SERVICE_TENSOR_PROTO_H_
#define ENCODER_SERVER_SERVICE_TENSOR_PROTO_H_

#include <cstdint>
#include <vector>

#include "encoder/v1/encoder.pb.h"
#include "server/common/attention_stats.h"

namespace encoder::service {

// float32 values with a shape; values.size() must equal prod(shape).
void PackFloat32(const std::vector<float>& values,
                 const std::vector<int64_t>& shape, v1::Tensor* out);
void PackFloat32(const float* values, size_t count,
                 const std::vector<int64_t>& shape, v1::Tensor* out);
// float64 values (diagnostic matrices).
void PackFloat64(const double* values, size_t count,
                 const std::vector<int64_t>& shape, v1::Tensor* out);

// The one conversion of AttentionHeadStats to its message (Embed and
// Diagnose both use it).
void PackAttentionStats(const AttentionHeadStats& stats,
                        v1::AttentionHeadStats* out);

}  // namespace encoder::service

#endif  // ENCODER_SERVER_SERVICE_TENSOR_PROTO_H_
