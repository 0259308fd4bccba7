// Protobuf responses as JSON for printing, keys in .proto field order.
// Printed compact (one line) unless asked to indent.
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

// Any message as protobuf's JSON printer writes it
// (google::protobuf::util::MessageToJsonString, the proto3 JSON mapping:
// int64 as strings, enums by name, fields without presence always printed),
// under the .proto field names, or the lowerCamelCase JSON names when
// `camel_case`; only the encoder.v1.Tensor fields are replaced by
// TensorToJson.
nlohmann::ordered_json MessageToJson(const google::protobuf::Message& message,
                                     bool camel_case = false);

// Like MessageToJson, but each result's `pooled` is a flat list and its
// `token_embeddings` the bare nested [S, D] lists.
nlohmann::ordered_json EmbedResponseToJson(
    const encoder::v1::EmbedResponse& response, bool camel_case = false);

// How the subcommands print JSON on stdout: compact (one line) unless
// `pretty`; field names as in the .proto unless `camel_case`.
struct JsonStyle {
  bool pretty = false;
  bool camel_case = false;
};

// The process-wide style, set once from the command line.
JsonStyle& OutputJsonStyle();

// Writes `value` and a newline to stdout in OutputJsonStyle().
void PrintJson(const nlohmann::ordered_json& value);

}  // namespace encoder_client

#endif  // ENCODER_CLIENT_JSON_OUTPUT_H_
