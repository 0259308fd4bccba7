#include "server/model/hf/importer.h"

#include "absl/strings/str_cat.h"
#include "server/common/status_macros.h"

namespace encoder::model::hf {

absl::StatusOr<int64_t> ConfigReader::Int(const std::string& key) const {
  if (!json_.contains(key)) {
    return absl::InvalidArgumentError(
        absl::StrCat("config.json has no \"", key, "\""));
  }
  if (!json_[key].is_number_integer()) {
    return absl::InvalidArgumentError(
        absl::StrCat("config.json \"", key, "\" must be an integer"));
  }
  const int64_t v = json_[key].get<int64_t>();
  if (v < 1 || v > kMaxConfigSize) {
    return absl::InvalidArgumentError(
        absl::StrCat("config.json \"", key, "\" is ", v, "; it must be in [1, ",
                     kMaxConfigSize, "]"));
  }
  return v;
}

absl::Status CheckLayerCount(int64_t layers) {
  if (layers > kMaxLayers) {
    return absl::InvalidArgumentError(
        absl::StrCat("config.json asks for ", layers,
                     " encoder layers; at most ", kMaxLayers, " are served"));
  }
  return absl::OkStatus();
}

absl::Status ConfigReader::Ints(
    std::initializer_list<std::pair<const char*, int64_t*>> fields) const {
  for (auto [key, field] : fields) {
    ASSIGN_OR_RETURN(auto v, Int(key));
    *field = v;
  }
  return absl::OkStatus();
}

int64_t ConfigReader::IntOr(const std::string& key, int64_t fallback) const {
  return Has(key) && json_[key].is_number_integer() ? json_[key].get<int64_t>()
                                                    : fallback;
}

double ConfigReader::NumberOr(const std::string& key, double fallback) const {
  return Has(key) && json_[key].is_number() ? json_[key].get<double>()
                                            : fallback;
}

std::string ConfigReader::StringOr(const std::string& key,
                                   const std::string& fallback) const {
  return Has(key) && json_[key].is_string() ? json_[key].get<std::string>()
                                            : fallback;
}

bool ConfigReader::BoolOr(const std::string& key, bool fallback) const {
  return Has(key) && json_[key].is_boolean() ? json_[key].get<bool>()
                                             : fallback;
}

absl::StatusOr<Activation> ParseActivation(const std::string& name) {
  // transformers' ACT2FN names for the activations served.
  static const std::pair<const char*, Activation> kNames[] = {
      {"relu", Activation::kRelu},
      {"gelu", Activation::kGelu},
      {"gelu_pytorch_tanh", Activation::kGeluTanh},
      {"gelu_new", Activation::kGeluNew},
      {"gelu_fast", Activation::kGeluFast},
      {"quick_gelu", Activation::kQuickGelu},
      {"silu", Activation::kSilu},
      {"swish", Activation::kSilu},
      {"mish", Activation::kMish}};
  for (const auto& [known, activation] : kNames) {
    if (name == known) return activation;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "activation \"", name,
      "\" is not supported (relu, gelu, gelu_new, gelu_pytorch_tanh, "
      "gelu_fast, quick_gelu, silu, swish, mish)"));
}

void AddSlot(Import* import, const std::string& slot, const std::string& name,
             std::vector<int64_t> shape) {
  import->slots[slot] = SlotSource{{name}, { std::move(shape) }};
}

void AddConcatSlot(Import* import, const std::string& slot,
                   std::vector<std::string> names,
                   std::vector<std::vector<int64_t>> shapes) {
  import->slots[slot] = SlotSource{std::move(names), std::move(shapes)};
}

std::string LayerSlot(int64_t layer, const std::string& leaf) {
  return absl::StrCat("encoder.layers.", layer, ".", leaf);
}

std::string DetectPrefix(const WeightSource& source,
                         const std::vector<std::string>& candidates,
                         const std::string& probe) {
  for (const std::string& prefix : candidates) {
    if (source.Has(prefix + probe)) return prefix;
  }
  return candidates.front();
}

}  // namespace encoder::model::hf
