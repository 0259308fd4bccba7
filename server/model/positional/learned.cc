// A learned position table at the input (BERT, RoBERTa, DistilBERT): no
// position past its rows.
#include "server/model/positional/learned.h"

#include "server/common/status_macros.h"
#include "server/model/positional/schemes.h"

namespace encoder::model {
namespace {

absl::StatusOr<std::unique_ptr<PositionalScheme>> Make(
    const ModelConfig& config, const std::map<std::string, at::Tensor>& params,
    at::Device device, at::ScalarType dtype) {
  ASSIGN_OR_RETURN(
      auto table,
      SchemeParameter(config, params, "pos_embedding.weight", device, dtype));
  return std::make_unique<LearnedScheme>(config, table);
}

std::map<std::string, std::vector<int64_t>> Shapes(const ModelConfig& config) {
  return {{"pos_embedding.weight", {config.max_positions, config.d_model}}};
}

}  // namespace

PositionalConfig LearnedConfig() {
  PositionalConfig p;
  p.type = SchemeType::kLearned;
  return p;
}

const SchemeEntry& LearnedEntry() {
  static const SchemeEntry entry = [] {
    SchemeEntry e;
    e.traits.type = SchemeType::kLearned;
    e.traits.name = "learned";
    e.traits.builtin = true;
    e.traits.structure = ExpectedStructure::kAdditive;
    e.traits.table_bounds_length = [](const PositionalConfig&) { return true; };
    e.make = Make;
    e.parameter_shapes = Shapes;
    return e;
  }();
  return entry;
}

}  // namespace encoder::model
