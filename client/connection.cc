#include "client/connection.h"

#include <chrono>

namespace encoder_client {

std::shared_ptr<grpc::Channel> CreateChannel(const ConnectionOptions& options) {
  grpc::ChannelArguments arguments;
  arguments.SetMaxReceiveMessageSize(-1);
  return grpc::CreateCustomChannel(
      options.target, grpc::InsecureChannelCredentials(), arguments);
}

void SetDeadline(int64_t deadline_ms, grpc::ClientContext* context) {
  context->set_deadline(std::chrono::system_clock::now() +
                        std::chrono::milliseconds(deadline_ms));
}

}  // namespace encoder_client
