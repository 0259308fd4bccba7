// The tensors of a checkpoint directory, memory-mapped and read one at a
// time: `model.safetensors`, or the shards named by
// `model.safetensors.index.json`. Loading a tensor converts it to the
// serving dtype into memory of its own and then releases the mapped pages
// it came from, so peak memory stays near one copy of the weights.
//
// Not thread-safe; used once, at model load.
#ifndef ENCODER_SERVER_MODEL_WEIGHTS_WEIGHT_SOURCE_H_
#define ENCODER_SERVER_MODEL_WEIGHTS_WEIGHT_SOURCE_H_

#include <ATen/ATen.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/model/weights/safetensors.h"

namespace encoder::model {

class WeightSource {
 public:
  // Opens the directory's weights. NotFound when neither file exists or a
  // shard named by the index is missing; InvalidArgument for a malformed
  // file or index (naming it).
  static absl::StatusOr<std::unique_ptr<WeightSource>> Open(
      const std::string& dir);
  ~WeightSource();

  // Every tensor's name, dtype and shape, across all shards.
  const std::map<std::string, TensorLayout>& tensors() const {
    return layouts_;
  }
  bool Has(const std::string& name) const { return layouts_.count(name) > 0; }
  // Bytes of all floating-point tensors as stored.
  int64_t stored_bytes() const;

  // Reads `name` converted to `dtype` (CPU, contiguous, owning its memory)
  // and releases the source pages. NotFound for an unknown name.
  absl::StatusOr<at::Tensor> Load(const std::string& name,
                                  at::ScalarType dtype);

 private:
  struct MappedFile;
  WeightSource() = default;
  absl::Status AddFile(const std::string& path,
                       const std::vector<std::string>* expected_names);

  std::vector<std::unique_ptr<MappedFile>> files_;
  std::map<std::string, TensorLayout> layouts_;
  std::map<std::string, size_t> file_of_;  // tensor -> index into files_
};

// A view of a WeightSource under a name prefix, as in
// `source.Scoped("encoder.layer.0.").Name("attention.self.query.weight")`.
class WeightPrefix {
 public:
  explicit WeightPrefix(std::string prefix = "") : prefix_(std::move(prefix)) {}
  WeightPrefix Scoped(const std::string& more) const {
    return WeightPrefix(prefix_ + more + ".");
  }
  std::string Name(const std::string& leaf) const { return prefix_ + leaf; }
  const std::string& prefix() const { return prefix_; }

 private:
  std::string prefix_;
};

}  // namespace encoder::model

#endif  // ENCODER_SERVER_MODEL_WEIGHTS_WEIGHT_SOURCE_H_
