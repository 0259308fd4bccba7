// Reader for the tensors of a file torch.save wrote in its zip format
// (PyTorch >= 1.6): a state dictionary such as FlagEmbedding's
// colbert_linear.pt and sparse_linear.pt. No Python runs: the pickle is
// read by a machine that knows only what a dictionary of tensors needs
// (dictionaries, including collections.OrderedDict, tuples, numbers, text,
// torch._utils._rebuild_tensor_v2 / _rebuild_parameter and the typed
// storages), and refuses any other global or opcode by name, as
// torch.load(weights_only=True) refuses what it does not allow.
//
// Every failure is an InvalidArgument status naming the file. Never throws.
#ifndef ENCODER_SERVER_MODEL_WEIGHTS_TORCH_PICKLE_H_
#define ENCODER_SERVER_MODEL_WEIGHTS_TORCH_PICKLE_H_

#include <ATen/ATen.h>

#include <functional>
#include <map>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace encoder::model {

// Largest pickle (data.pkl) accepted; a state dictionary's is a few KiB.
inline constexpr size_t kMaxTorchPickleBytes = 64 << 20;

// The file's top-level dictionary of name -> tensor (CPU, contiguous, in
// the stored dtype, each owning its memory). InvalidArgument when the file
// is not a torch.save zip archive, the top level is not a dictionary with
// text keys and tensor values, or the pickle uses anything outside the
// subset above.
absl::StatusOr<std::map<std::string, at::Tensor>> ReadTorchStateDict(
    const std::string& path);

// Loads storage `key` of `numel` values of `dtype` (a 1-D CPU tensor).
using TorchStorageLoader = std::function<absl::StatusOr<at::Tensor>(
    const std::string& key, at::ScalarType dtype, int64_t numel)>;

// The pickle machine alone, on the bytes of an archive's data.pkl, with
// storages from `load` (ReadTorchStateDict's come from the archive's
// records; the fuzz target makes its own). Errors are InvalidArgument
// without a file name.
absl::StatusOr<std::map<std::string, at::Tensor>> ParseTorchPickle(
    std::string_view pickle, const TorchStorageLoader& load);

}  // namespace encoder::model

#endif  // ENCODER_SERVER_MODEL_WEIGHTS_TORCH_PICKLE_H_
