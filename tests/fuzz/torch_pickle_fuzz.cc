// libFuzzer target: the restricted pickle machine that reads torch.save's
// data.pkl (BGE-M3's colbert_linear.pt, sparse_linear.pt) on arbitrary
// bytes, with every storage it asks for made here (zeros, at most 4096
// values). Any result is fine; a crash, leak, sanitizer report or hang is
// not.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "server/model/weights/torch_pickle.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view pickle(reinterpret_cast<const char*>(data), size);
  auto load = [](const std::string&, at::ScalarType dtype,
                 int64_t numel) -> absl::StatusOr<at::Tensor> {
    if (numel > 4096) return absl::InvalidArgumentError("too large");
    return at::zeros({numel}, at::TensorOptions().dtype(dtype));
  };
  auto parsed = encoder::model::ParseTorchPickle(pickle, load);
  if (parsed.ok()) {
    for (const auto& [name, tensor] : *parsed) {
      if (tensor.numel() > 0) (void)tensor.to(at::kDouble).sum().item<double>();
    }
  }
  return 0;
}
