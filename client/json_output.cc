#include "client/json_output.h"

#include <iostream>
#include <string>

#include <google/protobuf/util/json_util.h>

#include "client/tensor_codec.h"

namespace encoder_client {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

// The sub-tensor of `shape[dim:]` whose first element is values[*next];
// advances `*next` past it.
nlohmann::ordered_json NestFrom(const std::vector<double>& values,
                                const std::vector<int64_t>& shape, size_t dim,
                                size_t* next) {
  if (dim == shape.size()) return values[(*next)++];
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (int64_t i = 0; i < shape[dim]; ++i) {
    out.push_back(NestFrom(values, shape, dim + 1, next));
  }
  return out;
}

// Replaces the encoder.v1.Tensor fields of `message` inside `json` (its
// protobuf JSON form) by TensorToJson, recursing into sub-messages.
void DecodeTensors(const Message& message, bool camel_case,
                   nlohmann::ordered_json* json) {
  const auto* descriptor = message.GetDescriptor();
  const Reflection* reflection = message.GetReflection();
  for (int i = 0; i < descriptor->field_count(); ++i) {
    const FieldDescriptor* field = descriptor->field(i);
    if (field->cpp_type() != FieldDescriptor::CPPTYPE_MESSAGE ||
        field->is_map()) {
      continue;
    }
    const std::string& name = camel_case ? field->json_name() : field->name();
    auto it = json->find(name);
    if (it == json->end()) continue;
    const bool is_tensor =
        field->message_type() == encoder::v1::Tensor::descriptor();
    if (field->is_repeated()) {
      const int size = reflection->FieldSize(message, field);
      if (!it->is_array() || static_cast<int>(it->size()) != size) continue;
      for (int j = 0; j < size; ++j) {
        const Message& element =
            reflection->GetRepeatedMessage(message, field, j);
        if (is_tensor) {
          (*it)[j] =
              TensorToJson(static_cast<const encoder::v1::Tensor&>(element));
        } else {
          DecodeTensors(element, camel_case, &(*it)[j]);
        }
      }
    } else {
      const Message& element = reflection->GetMessage(message, field);
      if (is_tensor) {
        *it = TensorToJson(static_cast<const encoder::v1::Tensor&>(element));
      } else {
        DecodeTensors(element, camel_case, &*it);
      }
    }
  }
}

}  // namespace

nlohmann::ordered_json NestValues(const std::vector<double>& values,
                                  const std::vector<int64_t>& shape) {
  if (ElementCount(shape) != static_cast<int64_t>(values.size())) {
    return nullptr;
  }
  size_t next = 0;
  return NestFrom(values, shape, 0, &next);
}

nlohmann::ordered_json TensorToJson(const encoder::v1::Tensor& tensor) {
  if (tensor.shape_size() == 0 &&
      tensor.dtype() == encoder::v1::DTYPE_UNSPECIFIED &&
      tensor.data().empty()) {
    return nullptr;
  }
  const std::vector<int64_t> shape(tensor.shape().begin(),
                                   tensor.shape().end());
  nlohmann::ordered_json out = {{"shape", shape},
                                {"dtype", DTypeName(tensor.dtype())}};
  std::vector<double> values;
  std::string error;
  if (DecodeTensor(tensor, &values, &error)) {
    out["values"] = NestValues(values, shape);
  } else {
    out["error"] = error;
  }
  return out;
}

nlohmann::ordered_json MessageToJson(const Message& message, bool camel_case) {
  if (const auto* tensor = dynamic_cast<const encoder::v1::Tensor*>(&message)) {
    return TensorToJson(*tensor);
  }
  google::protobuf::util::JsonPrintOptions options;
  options.always_print_primitive_fields = true;
  options.preserve_proto_field_names = !camel_case;
  std::string text;
  const auto status =
      google::protobuf::util::MessageToJsonString(message, &text, options);
  if (!status.ok()) {
    return {{"error", "cannot print " + message.GetTypeName() +
                          " as JSON: " + std::string(status.message())}};
  }
  nlohmann::ordered_json out = nlohmann::ordered_json::parse(text);
  DecodeTensors(message, camel_case, &out);
  return out;
}

nlohmann::ordered_json EmbedResponseToJson(
    const encoder::v1::EmbedResponse& response, bool camel_case) {
  nlohmann::ordered_json out = MessageToJson(response, camel_case);
  for (nlohmann::ordered_json& result : out["results"]) {
    for (const char* name :
         {"pooled", camel_case ? "tokenEmbeddings" : "token_embeddings"}) {
      if (result.contains(name) && result[name].contains("values")) {
        nlohmann::ordered_json values = std::move(result[name]["values"]);
        result[name] = std::move(values);
      }
    }
    const char* chunks = camel_case ? "chunkVectors" : "chunk_vectors";
    if (!result.contains(chunks)) continue;
    for (nlohmann::ordered_json& chunk : result[chunks]) {
      if (chunk.contains("embedding") &&
          chunk["embedding"].contains("values")) {
        nlohmann::ordered_json values = std::move(chunk["embedding"]["values"]);
        chunk["embedding"] = std::move(values);
      }
    }
  }
  return out;
}

JsonStyle& OutputJsonStyle() {
  static JsonStyle style;
  return style;
}

void PrintJson(const nlohmann::ordered_json& value) {
  std::cout << value.dump(OutputJsonStyle().pretty ? 2 : -1) << std::endl;
}

}  // namespace encoder_client
