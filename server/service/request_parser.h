// Parses request messages from their wire bytes, so that every malformed
// request gets INVALID_ARGUMENT with a message a user can act on.
//
// Why not let gRPC parse: protobuf rejects a whole proto3 message when one
// string field holds invalid UTF-8, and gRPC then answers a unary call
// UNIMPLEMENTED with an empty message and ends a stream's reads as if the
// client had half-closed. The service therefore registers its methods raw
// (grpc::ByteBuffer in and out) and parses here: strictly first, and on
// failure a second time against a twin of the schema whose string fields are
// bytes, to name the field and byte offset of the invalid text.
#ifndef ENCODER_SERVER_SERVICE_REQUEST_PARSER_H_
#define ENCODER_SERVER_SERVICE_REQUEST_PARSER_H_

#include <google/protobuf/message.h>
#include <grpcpp/support/byte_buffer.h>

#include <string>

#include "absl/status/status.h"

namespace encoder::service {

// Parses `buffer` into `message` (cleared first). On failure returns
// InvalidArgument: "inputs[2].text is not valid UTF-8 (byte 7)" when the
// bytes are a well-formed message but for the encoding of a string field,
// otherwise that the bytes are not a valid message of the type. Where the
// message could be read leniently, `*request_id` (may be null) receives the
// string field named "request_id" if it is valid UTF-8, so a stream can
// still label its error response. Thread-safe.
absl::Status ParseRequest(const grpc::ByteBuffer& buffer,
                          google::protobuf::Message* message,
                          std::string* request_id = nullptr);

// Serializes `message` into `buffer`. Returns Internal on failure.
absl::Status SerializeResponse(const google::protobuf::Message& message,
                               grpc::ByteBuffer* buffer);

// The byte offset of the first ill-formed UTF-8 sequence in `text`, or -1
// when it is well formed.
int64_t FirstInvalidUtf8(const std::string& text);

}  // namespace encoder::service

#endif  // ENCODER_SERVER_SERVICE_REQUEST_PARSER_H_
