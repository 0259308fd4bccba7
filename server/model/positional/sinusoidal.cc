// Vaswani et al.'s sinusoidal codes, added to the input
// (docs/positional-encodings.md#sinusoidal).
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "server/model/config.h"
#include "server/model/positional/pe_math.h"
#include "server/model/positional/schemes.h"

namespace encoder::model {
namespace {

// A table of the first `table_rows` positions is precomputed in float64 and
// cast once; positions outside it are computed on the fly (shift
// diagnostics use large offsets).
class SinusoidalScheme : public PositionalScheme {
 public:
  SinusoidalScheme(const ModelConfig& config, at::Device device,
                   at::ScalarType dtype)
      : config_(config), dtype_(dtype) {
    const int64_t rows =
        std::max(config.max_positions, config.max_input_tokens);
    table_ = SinusoidalCode(at::arange(rows, at::kLong), config.d_model,
                            config.positional)
                 .to(device, dtype);
  }

  at::Tensor AddToInput(const at::Tensor& x,
                        const at::Tensor& positions) const override {
    return x + InputCode(positions);
  }

  at::Tensor InputCode(const at::Tensor& positions) const override {
    const bool in_table = positions.numel() > 0 &&
                          positions.min().item<int64_t>() >= 0 &&
                          positions.max().item<int64_t>() < table_.size(0);
    if (in_table) return at::embedding(table_, positions);
    return SinusoidalCode(positions, config_.d_model, config_.positional)
        .to(dtype_);
  }

  SchemeDescription Describe() const override {
    const PositionalConfig& pc = config_.positional;
    return {"sinusoidal",
            {{"base", absl::StrCat(pc.base)},
             {"layout", pc.sinusoidal_layout == SinusoidalLayout::kConcat
                            ? "concat"
                            : "interleaved"},
             {"denominator",
              pc.sinusoidal_denominator == SinusoidalDenominator::kHalfMinusOne
                  ? "half_minus_one"
                  : "d_model"},
             {"offset", absl::StrCat(pc.sinusoidal_offset)}},
            {},
            /*extrapolates=*/true,
            config_.max_positions,
            {"input"}};
  }

 private:
  ModelConfig config_;
  at::ScalarType dtype_;
  at::Tensor table_;  // [rows, D]
};

absl::StatusOr<std::unique_ptr<PositionalScheme>> Make(
    const ModelConfig& config, const std::map<std::string, at::Tensor>&,
    at::Device device, at::ScalarType dtype) {
  return std::make_unique<SinusoidalScheme>(config, device, dtype);
}

void SetLayout(std::string_view layout, PositionalConfig* p) {
  p->sinusoidal_layout = layout == "concat" ? SinusoidalLayout::kConcat
                                            : SinusoidalLayout::kInterleaved;
}

absl::Status Validate(const ModelConfig& c) {
  const PositionalConfig& pc = c.positional;
  if (!(pc.base > 1)) {
    return absl::InvalidArgumentError("positional.base must be > 1");
  }
  if (c.d_model % 2 != 0) {
    return absl::InvalidArgumentError("sinusoidal codes need an even d_model");
  }
  if (pc.sinusoidal_denominator == SinusoidalDenominator::kHalfMinusOne &&
      c.d_model < 4) {
    return absl::InvalidArgumentError(
        "denominator half_minus_one needs d_model >= 4");
  }
  return absl::OkStatus();
}

void Reach(const ModelConfig& c, SchemeReach* r) {
  r->wavelengths = Wavelengths(SinusoidalFrequencies(
      c.d_model, c.positional.base, c.positional.sinusoidal_denominator));
}

}  // namespace

PositionalConfig SinusoidalConfig(SinusoidalLayout layout,
                                  SinusoidalDenominator denominator,
                                  double base) {
  PositionalConfig p;
  p.type = SchemeType::kSinusoidal;
  p.sinusoidal_layout = layout;
  p.sinusoidal_denominator = denominator;
  p.base = base;
  return p;
}

const SchemeEntry& SinusoidalEntry() {
  static const SchemeEntry entry = [] {
    SchemeEntry e;
    e.traits.type = SchemeType::kSinusoidal;
    e.traits.name = "sinusoidal";
    e.traits.builtin = true;
    e.traits.closed_form_shift = true;
    e.traits.structure = ExpectedStructure::kAdditive;
    e.traits.layouts = "interleaved|concat";
    e.traits.set_layout = SetLayout;
    e.traits.validate = Validate;
    e.traits.reach = Reach;
    e.make = Make;
    return e;
  }();
  return entry;
}

}  // namespace encoder::model
