#include "server/model/positional/positional.h"

#include "absl/strings/str_cat.h"
#include "server/common/status_macros.h"
#include "server/model/positional/schemes.h"

namespace encoder::model {

at::Tensor PositionalScheme::AddToInput(const at::Tensor& x,
                                        const at::Tensor& positions) const {
  (void)positions;
  return x;
}

void PositionalScheme::RotateQk(at::Tensor& q, at::Tensor& k,
                                const at::Tensor& positions,
                                const std::vector<int64_t>& extents,
                                int64_t layer) const {
  (void)q;
  (void)k;
  (void)positions;
  (void)extents;
  (void)layer;
}

at::Tensor PositionalScheme::AttentionBias(const at::Tensor& query_positions,
                                           const at::Tensor& key_positions,
                                           at::ScalarType dtype) const {
  (void)query_positions;
  (void)key_positions;
  (void)dtype;
  return {};
}

at::Tensor PositionalScheme::ContentBias(const at::Tensor& q,
                                         const at::Tensor& k,
                                         const at::Tensor& positions,
                                         int64_t layer) const {
  (void)q;
  (void)k;
  (void)positions;
  (void)layer;
  return {};
}

absl::StatusOr<at::Tensor> SchemeParameter(
    const ModelConfig& config, const std::map<std::string, at::Tensor>& params,
    const std::string& name, at::Device device, at::ScalarType dtype) {
  auto it = params.find(name);
  if (it == params.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("missing tensor \"", name, "\" for scheme ",
                     std::string(Traits(config.positional.type).name)));
  }
  return it->second.to(device, dtype).contiguous();
}

std::map<std::string, std::vector<int64_t>> SchemeParameterShapes(
    const ModelConfig& config) {
  const SchemeEntry& entry = SchemeEntryOf(config.positional.type);
  if (entry.parameter_shapes == nullptr) return {};
  return entry.parameter_shapes(config);
}

absl::StatusOr<std::unique_ptr<PositionalScheme>> MakePositionalScheme(
    const ModelConfig& config, const std::map<std::string, at::Tensor>& params,
    at::Device device, at::ScalarType dtype) {
  return SchemeEntryOf(config.positional.type)
      .make(config, params, device, dtype);
}

}  // namespace encoder::model
