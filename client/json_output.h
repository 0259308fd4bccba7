// Protobuf responses as JSON for printing, keys in .proto field order.
// Tensors become objects holding their shape, dtype and values nested to the
// shape (row-major).
#ifndef ENCODER_CLIENT_JSON_OUTPUT_H_
#define ENCODER_CLIENT_JSON_OUTPUT_H_

#include <cstdint>
#include <vector>

#include <google/protobuf/message.h>
#include <nlohmann/json.hpp>

#include "encoder/v1/encoder.pb.h"

namespace encoder_client {

// `values` (row-major, prod(shape) of them) as lists nested to `shape`;
// a flat list for rank 1, a bare number for rank 0.
nlohmann::ordered_json NestValues(const std::vector<double>& values,
                                  const std::vector<int64_t>& shape);

// {"shape": [...], "dtype": "float32", "values": nested}. A tensor whose
// bytes do not match its shape gets "error" instead of "values"; an empty
// Tensor message (no shape, dtype or data) is null.
nlohmann::ordered_json TensorToJson(const encoder::v1::Tensor& tensor);

// Any message, field by field under the .proto names: fields with presence
// (messages, oneof members, `optional`) only when set, other scalars and
// repeated fields always; enums by value name, maps as objects, int64 as
// numbers, encoder.v1.Tensor as TensorToJson.
nlohmann::ordered_json MessageToJson(const google::protobuf::Message& message);

// Like MessageToJson, but each result's `pooled` is a flat list and its
// `token_embeddings` the bare nested [S, D] lists.
nlohmann::ordered_json EmbedResponseToJson(
    const encoder::v1::EmbedResponse& response);

}  // namespace encoder_client

#endif  // ENCODER_CLIENT_JSON_OUTPUT_H_
