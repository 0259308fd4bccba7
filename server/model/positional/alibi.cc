// ALiBi, bidirectional: bias_h(i, j) = -m_h |i - j| on the logits
// (docs/positional-encodings.md#alibi).
#include <cmath>
#include <vector>

#include "server/model/config.h"
#include "server/model/positional/pe_math.h"
#include "server/model/positional/schemes.h"

namespace encoder::model {
namespace {

class AlibiScheme : public PositionalScheme {
 public:
  AlibiScheme(const ModelConfig& config, at::Device device)
      : config_(config), slopes_list_(AlibiSlopes(config.num_heads)) {
    slopes_ = at::tensor(slopes_list_, at::kDouble)
                  .to(device)
                  .view({1, config.num_heads, 1, 1});
  }

  at::Tensor AttentionBias(const at::Tensor& query_positions,
                           const at::Tensor& key_positions,
                           at::ScalarType dtype) const override {
    at::Tensor distance =
        (query_positions.unsqueeze(-1) - key_positions.unsqueeze(-2))
            .abs()
            .to(at::kDouble)
            .unsqueeze(1);  // [B, 1, Sq, Sk]
    return (-slopes_ * distance).to(dtype);
  }

  SchemeDescription Describe() const override {
    return {"alibi",
            {{"form", "bidirectional"}},
            slopes_list_,
            /*extrapolates=*/true,
            config_.max_positions,
            {"logits"}};
  }

 private:
  ModelConfig config_;
  std::vector<double> slopes_list_;
  at::Tensor slopes_;  // [1, H, 1, 1] float64
};

absl::StatusOr<std::unique_ptr<PositionalScheme>> Make(
    const ModelConfig& config, const std::map<std::string, at::Tensor>&,
    at::Device device, at::ScalarType) {
  return std::make_unique<AlibiScheme>(config, device);
}

void Reach(const ModelConfig& c, SchemeReach* r) {
  for (double m : AlibiSlopes(c.num_heads)) {
    r->alibi_windows.push_back(-std::log(kAlibiNegligibleFactor) / m);
  }
  r->distance_only_reason = "ALiBi's bias grows linearly with distance";
}

}  // namespace

PositionalConfig AlibiConfig() {
  PositionalConfig p;
  p.type = SchemeType::kAlibi;
  return p;
}

const SchemeEntry& AlibiEntry() {
  static const SchemeEntry entry = [] {
    SchemeEntry e;
    e.traits.type = SchemeType::kAlibi;
    e.traits.name = "alibi";
    e.traits.builtin = true;
    e.traits.structure = ExpectedStructure::kBias;
    e.traits.reach = Reach;
    e.make = Make;
    return e;
  }();
  return entry;
}

}  // namespace encoder::model
