#include "server/service/tensor_proto.h"

#include <cstring>
#include <string>

namespace encoder::service {
namespace {

static_assert(sizeof(float) == 4 && sizeof(double) == 8);

// The wire format is little-endian; so is every platform this builds for
// (x86-64, aarch64), which lets the bytes be copied as they are.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "big-endian hosts need a byte swap here");

template <typename T>
void Pack(const T* values, size_t count, const std::vector<int64_t>& shape,
          v1::DType dtype, v1::Tensor* out) {
  out->clear_shape();
  for (int64_t d : shape) out->add_shape(d);
  out->set_dtype(dtype);
  std::string* data = out->mutable_data();
  data->resize(count * sizeof(T));
  if (count > 0) std::memcpy(data->data(), values, count * sizeof(T));
}

}  // namespace

void PackFloat32(const std::vector<float>& values,
                 const std::vector<int64_t>& shape, v1::Tensor* out) {
  PackFloat32(values.data(), values.size(), shape, out);
}

void PackFloat32(const float* values, size_t count,
                 const std::vector<int64_t>& shape, v1::Tensor* out) {
  Pack(values, count, shape, v1::DTYPE_FLOAT32, out);
}

void PackFloat64(const double* values, size_t count,
                 const std::vector<int64_t>& shape, v1::Tensor* out) {
  Pack(values, count, shape, v1::DTYPE_FLOAT64, out);
}

void PackAttentionStats(const AttentionHeadStats& stats,
                        v1::AttentionHeadStats* out) {
  out->set_layer(stats.layer);
  out->set_head(stats.head);
  out->set_entropy(stats.entropy);
  out->set_mean_distance(stats.mean_distance);
  out->set_self_mass(stats.self_mass);
  out->set_prev_mass(stats.prev_mass);
  out->set_next_mass(stats.next_mass);
  out->set_first_mass(stats.first_mass);
}

}  // namespace encoder::service
