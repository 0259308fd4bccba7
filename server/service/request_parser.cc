#include "server/service/request_parser.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/descriptor.pb.h>
#include <google/protobuf/dynamic_message.h>
#include <grpcpp/impl/codegen/proto_utils.h>
#include <grpcpp/support/proto_buffer_reader.h>
#include <unicode/utf8.h>

#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

namespace encoder::service {
namespace {

namespace pb = google::protobuf;

// Turns every string field of `message` (and of its nested messages) into a
// bytes field. Map entries keep string keys: a map key cannot be bytes.
void StringsToBytes(pb::DescriptorProto* message) {
  if (message->options().map_entry()) return;
  for (pb::FieldDescriptorProto& field : *message->mutable_field()) {
    if (field.type() == pb::FieldDescriptorProto::TYPE_STRING) {
      field.set_type(pb::FieldDescriptorProto::TYPE_BYTES);
    }
  }
  for (pb::DescriptorProto& nested : *message->mutable_nested_type()) {
    StringsToBytes(&nested);
  }
}

// The schema's twin with bytes for strings, in a pool of its own. Built once
// per schema file, on first use; never freed.
class LenientSchemas {
 public:
  static LenientSchemas& Get() {
    static LenientSchemas* schemas = new LenientSchemas();
    return *schemas;
  }

  // A new empty twin of `type`, or nullptr when the twin cannot be built.
  std::unique_ptr<pb::Message> New(const pb::Descriptor* type) {
    absl::MutexLock lock(&mu_);
    if (!AddFile(type->file())) return nullptr;
    const pb::Descriptor* twin = pool_.FindMessageTypeByName(type->full_name());
    if (twin == nullptr) return nullptr;
    return std::unique_ptr<pb::Message>(factory_.GetPrototype(twin)->New());
  }

 private:
  LenientSchemas() : factory_(&pool_) {}

  bool AddFile(const pb::FileDescriptor* file)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (pool_.FindFileByName(file->name()) != nullptr) return true;
    for (int i = 0; i < file->dependency_count(); ++i) {
      if (!AddFile(file->dependency(i))) return false;
    }
    pb::FileDescriptorProto proto;
    file->CopyTo(&proto);
    for (pb::DescriptorProto& message : *proto.mutable_message_type()) {
      StringsToBytes(&message);
    }
    return pool_.BuildFile(proto) != nullptr;
  }

  absl::Mutex mu_;
  pb::DescriptorPool pool_ ABSL_GUARDED_BY(mu_);
  pb::DynamicMessageFactory factory_ ABSL_GUARDED_BY(mu_);
};

// Finds the first string field (per the strict schema `strict`) of the
// lenient `message` whose value is not UTF-8; "" when all are. The result
// names the field path and the byte offset.
std::string FindInvalidUtf8(const pb::Message& message,
                            const pb::Descriptor* strict,
                            const std::string& prefix) {
  const pb::Reflection* reflection = message.GetReflection();
  std::vector<const pb::FieldDescriptor*> fields;
  reflection->ListFields(message, &fields);
  for (const pb::FieldDescriptor* field : fields) {
    const pb::FieldDescriptor* strict_field =
        strict->FindFieldByNumber(field->number());
    if (strict_field == nullptr) continue;
    const int count =
        field->is_repeated() ? reflection->FieldSize(message, field) : 1;
    for (int i = 0; i < count; ++i) {
      std::string path = absl::StrCat(prefix, field->name());
      if (field->is_repeated()) absl::StrAppend(&path, "[", i, "]");
      if (strict_field->type() == pb::FieldDescriptor::TYPE_STRING) {
        const std::string value =
            field->is_repeated()
                ? reflection->GetRepeatedString(message, field, i)
                : reflection->GetString(message, field);
        const int64_t at = FirstInvalidUtf8(value);
        if (at >= 0) {
          return absl::StrCat(path, " is not valid UTF-8 (byte ", at,
                              " of the field)");
        }
      } else if (field->type() == pb::FieldDescriptor::TYPE_MESSAGE &&
                 strict_field->message_type() != nullptr) {
        const pb::Message& child =
            field->is_repeated()
                ? reflection->GetRepeatedMessage(message, field, i)
                : reflection->GetMessage(message, field);
        std::string found = FindInvalidUtf8(child, strict_field->message_type(),
                                            absl::StrCat(path, "."));
        if (!found.empty()) return found;
      }
    }
  }
  return "";
}

bool ParseFrom(const grpc::ByteBuffer& buffer, pb::Message* message) {
  grpc::ByteBuffer copy(buffer);  // shares the slices; the reader consumes
  grpc::ProtoBufferReader reader(&copy);
  return reader.status().ok() && message->ParseFromZeroCopyStream(&reader);
}

}  // namespace

int64_t FirstInvalidUtf8(const std::string& text) {
  // Protobuf fields are below 2 GiB, so ICU's int32_t offsets suffice.
  const auto* s = reinterpret_cast<const uint8_t*>(text.data());
  const int32_t n = static_cast<int32_t>(text.size());
  int32_t i = 0;
  while (i < n) {
    const int32_t start = i;
    UChar32 c;
    U8_NEXT(s, i, n, c);
    if (c < 0) return start;
  }
  return -1;
}

absl::Status ParseRequest(const grpc::ByteBuffer& buffer, pb::Message* message,
                          std::string* request_id) {
  message->Clear();
  if (ParseFrom(buffer, message)) return absl::OkStatus();
  message->Clear();
  const pb::Descriptor* type = message->GetDescriptor();
  std::unique_ptr<pb::Message> lenient = LenientSchemas::Get().New(type);
  if (lenient != nullptr && ParseFrom(buffer, lenient.get())) {
    if (request_id != nullptr) {
      const pb::FieldDescriptor* id =
          lenient->GetDescriptor()->FindFieldByName("request_id");
      if (id != nullptr && !id->is_repeated()) {
        std::string value = lenient->GetReflection()->GetString(*lenient, id);
        if (FirstInvalidUtf8(value) < 0) *request_id = std::move(value);
      }
    }
    std::string found = FindInvalidUtf8(*lenient, type, "");
    if (!found.empty()) return absl::InvalidArgumentError(found);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("the request is not a valid ", type->full_name(),
                   " message (malformed protobuf encoding)"));
}

absl::Status SerializeResponse(const pb::Message& message,
                               grpc::ByteBuffer* buffer) {
  bool own_buffer = false;
  grpc::Status status = grpc::SerializationTraits<pb::Message>::Serialize(
      message, buffer, &own_buffer);
  if (!status.ok()) {
    return absl::InternalError(absl::StrCat("cannot serialize the response: ",
                                            status.error_message()));
  }
  return absl::OkStatus();
}

}  // namespace encoder::service
