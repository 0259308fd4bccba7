#include "client/json_output.h"

#include <string>

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

// One element of a (possibly repeated, index >= 0) field.
nlohmann::ordered_json FieldValue(const Message& message,
                                  const FieldDescriptor* field, int index) {
  const Reflection* reflection = message.GetReflection();
  const bool repeated = index >= 0;
  switch (field->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32:
      return repeated ? reflection->GetRepeatedInt32(message, field, index)
                      : reflection->GetInt32(message, field);
    case FieldDescriptor::CPPTYPE_INT64:
      return repeated ? reflection->GetRepeatedInt64(message, field, index)
                      : reflection->GetInt64(message, field);
    case FieldDescriptor::CPPTYPE_UINT32:
      return repeated ? reflection->GetRepeatedUInt32(message, field, index)
                      : reflection->GetUInt32(message, field);
    case FieldDescriptor::CPPTYPE_UINT64:
      return repeated ? reflection->GetRepeatedUInt64(message, field, index)
                      : reflection->GetUInt64(message, field);
    case FieldDescriptor::CPPTYPE_DOUBLE:
      return repeated ? reflection->GetRepeatedDouble(message, field, index)
                      : reflection->GetDouble(message, field);
    case FieldDescriptor::CPPTYPE_FLOAT:
      return repeated ? reflection->GetRepeatedFloat(message, field, index)
                      : reflection->GetFloat(message, field);
    case FieldDescriptor::CPPTYPE_BOOL:
      return repeated ? reflection->GetRepeatedBool(message, field, index)
                      : reflection->GetBool(message, field);
    case FieldDescriptor::CPPTYPE_STRING:
      return repeated ? reflection->GetRepeatedString(message, field, index)
                      : reflection->GetString(message, field);
    case FieldDescriptor::CPPTYPE_ENUM: {
      const int number =
          repeated ? reflection->GetRepeatedEnumValue(message, field, index)
                   : reflection->GetEnumValue(message, field);
      const auto* value = field->enum_type()->FindValueByNumber(number);
      if (value == nullptr) return number;
      return value->name();
    }
    case FieldDescriptor::CPPTYPE_MESSAGE:
      return MessageToJson(
          repeated ? reflection->GetRepeatedMessage(message, field, index)
                   : reflection->GetMessage(message, field));
  }
  return nullptr;
}

// A map field (repeated entries with `key` and `value`) as a JSON object.
nlohmann::ordered_json MapToJson(const Message& message,
                                 const FieldDescriptor* field) {
  const Reflection* reflection = message.GetReflection();
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  const int size = reflection->FieldSize(message, field);
  for (int i = 0; i < size; ++i) {
    const Message& entry = reflection->GetRepeatedMessage(message, field, i);
    const auto* key_field = entry.GetDescriptor()->FindFieldByName("key");
    const auto* value_field = entry.GetDescriptor()->FindFieldByName("value");
    nlohmann::ordered_json key = FieldValue(entry, key_field, -1);
    out[key.is_string() ? key.get<std::string>() : key.dump()] =
        FieldValue(entry, value_field, -1);
  }
  return out;
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

nlohmann::ordered_json MessageToJson(const Message& message) {
  if (const auto* tensor = dynamic_cast<const encoder::v1::Tensor*>(&message)) {
    return TensorToJson(*tensor);
  }
  const auto* descriptor = message.GetDescriptor();
  const Reflection* reflection = message.GetReflection();
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  for (int i = 0; i < descriptor->field_count(); ++i) {
    const FieldDescriptor* field = descriptor->field(i);
    if (field->is_map()) {
      out[field->name()] = MapToJson(message, field);
    } else if (field->is_repeated()) {
      nlohmann::ordered_json list = nlohmann::ordered_json::array();
      const int size = reflection->FieldSize(message, field);
      for (int j = 0; j < size; ++j)
        list.push_back(FieldValue(message, field, j));
      out[field->name()] = std::move(list);
    } else if (!field->has_presence() || reflection->HasField(message, field)) {
      out[field->name()] = FieldValue(message, field, -1);
    }
  }
  return out;
}

nlohmann::ordered_json EmbedResponseToJson(
    const encoder::v1::EmbedResponse& response) {
  nlohmann::ordered_json out = MessageToJson(response);
  for (nlohmann::ordered_json& result : out["results"]) {
    for (const char* name : {"pooled", "token_embeddings"}) {
      if (result.contains(name) && result[name].contains("values")) {
        nlohmann::ordered_json values = std::move(result[name]["values"]);
        result[name] = std::move(values);
      }
    }
  }
  return out;
}

}  // namespace encoder_client
