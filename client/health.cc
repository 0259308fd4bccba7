#include "client/health.h"

#include <cstdint>
#include <future>
#include <iostream>
#include <vector>

#include <grpcpp/generic/generic_stub.h>

#include "client/errors.h"

namespace encoder_client {
namespace {

constexpr char kCheckMethod[] = "/grpc.health.v1.Health/Check";

void AppendVarint(uint64_t value, std::string* out) {
  while (value >= 0x80) {
    out->push_back(static_cast<char>((value & 0x7f) | 0x80));
    value >>= 7;
  }
  out->push_back(static_cast<char>(value));
}

// Reads a varint at `*pos`, advancing it. False on truncation or overflow.
bool ReadVarint(const std::string& bytes, size_t* pos, uint64_t* value) {
  *value = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (*pos >= bytes.size()) return false;
    const auto byte = static_cast<unsigned char>(bytes[(*pos)++]);
    *value |= static_cast<uint64_t>(byte & 0x7f) << shift;
    if ((byte & 0x80) == 0) return true;
  }
  return false;
}

}  // namespace

std::string ServingStatusName(int status) {
  switch (static_cast<ServingStatus>(status)) {
    case ServingStatus::kUnknown:
      return "UNKNOWN";
    case ServingStatus::kServing:
      return "SERVING";
    case ServingStatus::kNotServing:
      return "NOT_SERVING";
    case ServingStatus::kServiceUnknown:
      return "SERVICE_UNKNOWN";
  }
  return "STATUS_" + std::to_string(status);
}

std::string EncodeHealthCheckRequest(const std::string& service) {
  std::string bytes;
  if (service.empty()) return bytes;  // proto3 omits default values
  bytes.push_back(0x0a);              // field 1, length-delimited
  AppendVarint(service.size(), &bytes);
  bytes += service;
  return bytes;
}

std::optional<int> DecodeHealthCheckStatus(const std::string& bytes) {
  int status = 0;
  size_t pos = 0;
  while (pos < bytes.size()) {
    uint64_t key;
    if (!ReadVarint(bytes, &pos, &key)) return std::nullopt;
    const uint64_t field = key >> 3;
    uint64_t value;
    switch (key & 7) {
      case 0:  // varint
        if (!ReadVarint(bytes, &pos, &value)) return std::nullopt;
        if (field == 1) status = static_cast<int>(value);
        break;
      case 1:  // 64-bit
        if (bytes.size() - pos < 8) return std::nullopt;
        pos += 8;
        break;
      case 2:  // length-delimited
        if (!ReadVarint(bytes, &pos, &value) || bytes.size() - pos < value) {
          return std::nullopt;
        }
        pos += value;
        break;
      case 5:  // 32-bit
        if (bytes.size() - pos < 4) return std::nullopt;
        pos += 4;
        break;
      default:
        return std::nullopt;
    }
  }
  return status;
}

int RunHealth(const ConnectionOptions& connection, const std::string& service) {
  grpc::GenericStub stub(CreateChannel(connection));
  const std::string request_bytes = EncodeHealthCheckRequest(service);
  grpc::Slice request_slice(request_bytes);
  const grpc::ByteBuffer request(&request_slice, 1);
  grpc::ByteBuffer response;
  grpc::ClientContext context;
  SetDeadline(connection.deadline_ms, &context);

  std::promise<grpc::Status> done;
  stub.UnaryCall(&context, kCheckMethod, grpc::StubOptions(), &request,
                 &response,
                 [&done](grpc::Status status) { done.set_value(status); });
  const grpc::Status status = done.get_future().get();
  if (!status.ok()) {
    PrintRpcError(status);
    return kExitRpcError;
  }

  std::vector<grpc::Slice> slices;
  std::string response_bytes;
  if (response.Dump(&slices).ok()) {
    for (const grpc::Slice& slice : slices) {
      response_bytes.append(reinterpret_cast<const char*>(slice.begin()),
                            slice.size());
    }
  }
  const std::optional<int> serving = DecodeHealthCheckStatus(response_bytes);
  if (!serving.has_value()) {
    PrintRpcError(grpc::Status(grpc::StatusCode::INTERNAL,
                               "malformed HealthCheckResponse"));
    return kExitRpcError;
  }
  std::cout << ServingStatusName(*serving) << std::endl;
  return *serving == static_cast<int>(ServingStatus::kServing) ? kExitOk
                                                               : kExitRpcError;
}

}  // namespace encoder_client
