// No positional scheme: the layer adds nothing anywhere.
#include "server/model/positional/schemes.h"

namespace encoder::model {
namespace {

class NoneScheme : public PositionalScheme {
 public:
  SchemeDescription Describe() const override {
    return {"none", {}, {}, /*extrapolates=*/true, 0, {}};
  }
};

absl::StatusOr<std::unique_ptr<PositionalScheme>> Make(
    const ModelConfig&, const std::map<std::string, at::Tensor>&, at::Device,
    at::ScalarType) {
  return std::make_unique<NoneScheme>();
}

}  // namespace

PositionalConfig NoneConfig() {
  PositionalConfig p;
  p.type = SchemeType::kNone;
  return p;
}

const SchemeEntry& NoneEntry() {
  static const SchemeEntry entry = [] {
    SchemeEntry e;
    e.traits.type = SchemeType::kNone;
    e.traits.name = "none";
    e.traits.builtin = true;
    e.traits.structure = ExpectedStructure::kNone;
    e.make = Make;
    return e;
  }();
  return entry;
}

}  // namespace encoder::model
