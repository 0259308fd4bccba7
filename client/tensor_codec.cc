#include "client/tensor_codec.h"

#include <cmath>
#include <cstring>

namespace encoder_client {
namespace {

using encoder::v1::DType;

uint32_t FloatBits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits;
}

float BitsToFloat(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

// Reads `width` bytes at `p` as a little-endian unsigned integer, whatever
// the host byte order.
uint64_t LoadLittleEndian(const unsigned char* p, int width) {
  uint64_t value = 0;
  for (int i = width - 1; i >= 0; --i) value = (value << 8) | p[i];
  return value;
}

void StoreLittleEndian(uint64_t value, int width, std::string* out) {
  for (int i = 0; i < width; ++i) {
    out->push_back(static_cast<char>(value & 0xff));
    value >>= 8;
  }
}

double DecodeOne(const unsigned char* p, DType dtype) {
  switch (dtype) {
    case encoder::v1::DTYPE_FLOAT32:
      return BitsToFloat(static_cast<uint32_t>(LoadLittleEndian(p, 4)));
    case encoder::v1::DTYPE_FLOAT16:
      return HalfBitsToFloat(static_cast<uint16_t>(LoadLittleEndian(p, 2)));
    case encoder::v1::DTYPE_BFLOAT16:
      return BFloat16BitsToFloat(static_cast<uint16_t>(LoadLittleEndian(p, 2)));
    case encoder::v1::DTYPE_INT64:
      return static_cast<double>(static_cast<int64_t>(LoadLittleEndian(p, 8)));
    case encoder::v1::DTYPE_INT8:
      return static_cast<double>(static_cast<int8_t>(p[0]));
    case encoder::v1::DTYPE_UINT8:
      return static_cast<double>(p[0]);
    case encoder::v1::DTYPE_FLOAT64: {
      uint64_t bits = LoadLittleEndian(p, 8);
      double value;
      std::memcpy(&value, &bits, sizeof(value));
      return value;
    }
    default:
      return 0.0;
  }
}

uint64_t EncodeOne(double value, DType dtype) {
  switch (dtype) {
    case encoder::v1::DTYPE_FLOAT32:
      return FloatBits(static_cast<float>(value));
    case encoder::v1::DTYPE_FLOAT16:
      return FloatToHalfBits(static_cast<float>(value));
    case encoder::v1::DTYPE_BFLOAT16:
      return FloatToBFloat16Bits(static_cast<float>(value));
    case encoder::v1::DTYPE_INT64:
      return static_cast<uint64_t>(static_cast<int64_t>(value));
    case encoder::v1::DTYPE_INT8:
      return static_cast<uint8_t>(static_cast<int8_t>(value));
    case encoder::v1::DTYPE_UINT8:
      return static_cast<uint8_t>(value);
    case encoder::v1::DTYPE_FLOAT64: {
      uint64_t bits;
      std::memcpy(&bits, &value, sizeof(bits));
      return bits;
    }
    default:
      return 0;
  }
}

}  // namespace

int64_t ElementCount(const std::vector<int64_t>& shape) {
  int64_t count = 1;
  for (int64_t dim : shape) {
    if (dim < 0) return -1;
    count *= dim;
  }
  return count;
}

int ElementSize(DType dtype) {
  switch (dtype) {
    case encoder::v1::DTYPE_FLOAT32:
      return 4;
    case encoder::v1::DTYPE_FLOAT16:
    case encoder::v1::DTYPE_BFLOAT16:
      return 2;
    case encoder::v1::DTYPE_INT64:
    case encoder::v1::DTYPE_FLOAT64:
      return 8;
    case encoder::v1::DTYPE_INT8:
    case encoder::v1::DTYPE_UINT8:
      return 1;
    default:
      return 0;
  }
}

std::string DTypeName(DType dtype) {
  switch (dtype) {
    case encoder::v1::DTYPE_FLOAT32:
      return "float32";
    case encoder::v1::DTYPE_FLOAT16:
      return "float16";
    case encoder::v1::DTYPE_BFLOAT16:
      return "bfloat16";
    case encoder::v1::DTYPE_INT64:
      return "int64";
    case encoder::v1::DTYPE_FLOAT64:
      return "float64";
    case encoder::v1::DTYPE_INT8:
      return "int8";
    case encoder::v1::DTYPE_UINT8:
      return "uint8";
    default:
      return "unspecified";
  }
}

bool DecodeTensor(const encoder::v1::Tensor& tensor,
                  std::vector<double>* values, std::string* error) {
  values->clear();
  const int width = ElementSize(tensor.dtype());
  if (width == 0) {
    *error = "tensor dtype is unspecified";
    return false;
  }
  const std::vector<int64_t> shape(tensor.shape().begin(),
                                   tensor.shape().end());
  const int64_t count = ElementCount(shape);
  if (count < 0) {
    *error = "tensor shape has a negative dimension";
    return false;
  }
  const std::string& data = tensor.data();
  if (static_cast<uint64_t>(data.size()) !=
      static_cast<uint64_t>(count) * static_cast<uint64_t>(width)) {
    *error = "tensor data holds " + std::to_string(data.size()) +
             " bytes, shape and dtype need " + std::to_string(count * width);
    return false;
  }
  values->reserve(count);
  const auto* bytes = reinterpret_cast<const unsigned char*>(data.data());
  for (int64_t i = 0; i < count; ++i) {
    values->push_back(DecodeOne(bytes + i * width, tensor.dtype()));
  }
  return true;
}

encoder::v1::Tensor EncodeTensor(const std::vector<int64_t>& shape,
                                 const std::vector<double>& values,
                                 DType dtype) {
  encoder::v1::Tensor tensor;
  for (int64_t dim : shape) tensor.add_shape(dim);
  tensor.set_dtype(dtype);
  const int width = ElementSize(dtype);
  if (width == 0 ||
      ElementCount(shape) != static_cast<int64_t>(values.size())) {
    return tensor;
  }
  std::string* data = tensor.mutable_data();
  data->reserve(values.size() * width);
  for (double value : values) {
    StoreLittleEndian(EncodeOne(value, dtype), width, data);
  }
  return tensor;
}

float HalfBitsToFloat(uint16_t bits) {
  const bool negative = (bits & 0x8000) != 0;
  const int exponent = (bits >> 10) & 0x1f;
  const int mantissa = bits & 0x3ff;
  float magnitude;
  if (exponent == 0) {
    magnitude = std::ldexp(static_cast<float>(mantissa), -24);
  } else if (exponent == 31) {
    magnitude = mantissa == 0 ? INFINITY : NAN;
  } else {
    magnitude = std::ldexp(static_cast<float>(mantissa + 1024), exponent - 25);
  }
  return negative ? -magnitude : magnitude;
}

uint16_t FloatToHalfBits(float value) {
  const uint32_t bits = FloatBits(value);
  const uint32_t sign = (bits >> 16) & 0x8000;
  const uint32_t magnitude = bits & 0x7fffffff;
  if (magnitude >= 0x7f800000) {  // inf stays inf; NaN stays a quiet NaN
    return static_cast<uint16_t>(sign | 0x7c00 |
                                 (magnitude > 0x7f800000 ? 0x200 : 0));
  }
  if (magnitude >= 0x477ff000) {  // >= 65520 rounds past the largest half
    return static_cast<uint16_t>(sign | 0x7c00);
  }
  if (magnitude < 0x38800000) {  // below 2^-14: a subnormal half (or zero)
    // Scaling by 2^24 is exact; nearbyint rounds half to even.
    const float scaled = BitsToFloat(magnitude) * 16777216.0f;
    return static_cast<uint16_t>(sign |
                                 static_cast<uint32_t>(std::nearbyint(scaled)));
  }
  const uint32_t exponent = (magnitude >> 23) - 127 + 15;
  const uint32_t mantissa = magnitude & 0x7fffff;
  uint32_t half = (exponent << 10) | (mantissa >> 13);
  const uint32_t rest = mantissa & 0x1fff;
  if (rest > 0x1000 || (rest == 0x1000 && (half & 1))) ++half;
  return static_cast<uint16_t>(sign | half);
}

float BFloat16BitsToFloat(uint16_t bits) {
  return BitsToFloat(static_cast<uint32_t>(bits) << 16);
}

uint16_t FloatToBFloat16Bits(float value) {
  const uint32_t bits = FloatBits(value);
  if ((bits & 0x7fffffff) > 0x7f800000) {
    return static_cast<uint16_t>((bits >> 16) | 0x40);
  }
  const uint32_t rounding = 0x7fff + ((bits >> 16) & 1);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

}  // namespace encoder_client
