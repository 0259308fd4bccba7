// Rotary codes on queries and keys (RoFormer, Llama, Qwen, ModernBERT), with
// transformers' rope scalings and per-layer bases
// (docs/positional-encodings.md#rope).
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/common/status_macros.h"
#include "server/model/config.h"
#include "server/model/positional/pe_math.h"
#include "server/model/positional/schemes.h"

namespace encoder::model {
namespace {

// Angles in float64 so that shifting every position by a constant leaves
// scores unchanged to float32 rounding.
class RopeScheme : public PositionalScheme {
 public:
  explicit RopeScheme(const ModelConfig& config) : config_(config) {}

  void RotateQk(at::Tensor& q, at::Tensor& k, const at::Tensor& positions,
                const std::vector<int64_t>& extents,
                int64_t layer) const override {
    const std::vector<double>& bases = config_.arch.layer_rope_base;
    const double base = bases.empty() ? config_.positional.base : bases[layer];
    auto [cos, sin] = RopeCosSin(positions, q.size(-1), base, q.scalar_type(),
                                 Scaling(layer), extents);
    q = RopeRotate(q, cos, sin, config_.positional.rope_layout);
    k = RopeRotate(k, cos, sin, config_.positional.rope_layout);
  }

  bool depends_on_length() const override {
    for (int64_t layer = 0; layer < config_.num_layers; ++layer) {
      if (Scaling(layer).depends_on_length()) return true;
    }
    return config_.positional.rope_scaling.depends_on_length();
  }

  SchemeDescription Describe() const override {
    SchemeDescription d = {
        "rope",
        {{"base", absl::StrCat(config_.positional.base)},
         {"layout", config_.positional.rope_layout == RopeLayout::kHalf
                        ? "half"
                        : "interleaved"},
         {"rotary_dim", absl::StrCat(config_.head_dim())}},
        {},
        /*extrapolates=*/true,
        config_.max_positions,
        {"query_key"}};
    DescribeScaling(config_.positional.rope_scaling, &d);
    for (size_t i = 0; i < config_.arch.layer_rope_scaling.size(); ++i) {
      const RopeScaling& s = config_.arch.layer_rope_scaling[i];
      if (s.type == RopeScalingType::kNone) continue;
      d.params[absl::StrCat("layer_", i, "_scaling")] =
          absl::StrCat(RopeScalingName(s.type), " factor ", s.factor);
    }
    if (!config_.arch.layer_rope_base.empty()) {
      std::string bases;
      for (double b : config_.arch.layer_rope_base) {
        absl::StrAppend(&bases, bases.empty() ? "" : ",", b);
      }
      d.params["layer_bases"] = bases;
    }
    return d;
  }

 private:
  static void DescribeScaling(const RopeScaling& s, SchemeDescription* d) {
    if (s.type != RopeScalingType::kNone) {
      d->params["scaling"] = RopeScalingName(s.type);
      d->params["scaling_factor"] = absl::StrCat(s.factor);
      d->params["attention_factor"] = absl::StrCat(s.attention_factor);
    }
    if (s.type == RopeScalingType::kYarn ||
        s.type == RopeScalingType::kLlama3 ||
        s.type == RopeScalingType::kLongrope ||
        s.type == RopeScalingType::kDynamic) {
      d->params["original_max_positions"] =
          absl::StrCat(s.original_max_positions);
    }
    if (s.type == RopeScalingType::kYarn) {
      d->params["beta_fast"] = absl::StrCat(s.beta_fast);
      d->params["beta_slow"] = absl::StrCat(s.beta_slow);
    }
    if (s.type == RopeScalingType::kLlama3) {
      d->params["low_freq_factor"] = absl::StrCat(s.low_freq_factor);
      d->params["high_freq_factor"] = absl::StrCat(s.high_freq_factor);
    }
    if (s.type == RopeScalingType::kLongrope) {
      d->params["short_factor"] = absl::StrJoin(s.short_factor, ",");
      d->params["long_factor"] = absl::StrJoin(s.long_factor, ",");
    }
    if (s.depends_on_length()) {
      d->params["per_sequence"] = "true";
    }
    if (s.overridden) {
      d->params["scaling_overridden"] = "true";
    }
  }

  const RopeScaling& Scaling(int64_t layer) const {
    const std::vector<RopeScaling>& scalings = config_.arch.layer_rope_scaling;
    return scalings.empty() ? config_.positional.rope_scaling
                            : scalings[static_cast<size_t>(layer)];
  }

  ModelConfig config_;
};

absl::StatusOr<std::unique_ptr<PositionalScheme>> Make(
    const ModelConfig& config, const std::map<std::string, at::Tensor>&,
    at::Device, at::ScalarType) {
  return std::make_unique<RopeScheme>(config);
}

void SetLayout(std::string_view layout, PositionalConfig* p) {
  p->rope_layout =
      layout == "half" ? RopeLayout::kHalf : RopeLayout::kInterleaved;
}

absl::Status ValidateScaling(const RopeScaling& s, int64_t head_dim) {
  if (s.type == RopeScalingType::kDynamic && head_dim <= 2) {
    return absl::InvalidArgumentError(
        "dynamic rope scaling needs a head dim above 2");
  }
  if (s.type == RopeScalingType::kLongrope &&
      (static_cast<int64_t>(s.short_factor.size()) != head_dim / 2 ||
       static_cast<int64_t>(s.long_factor.size()) != head_dim / 2)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "longrope short_factor and long_factor need head_dim / 2 = ",
        head_dim / 2, " values each, got ", s.short_factor.size(), " and ",
        s.long_factor.size()));
  }
  if (s.depends_on_length() && !(s.original_max_positions >= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat(RopeScalingName(s.type),
                     " rope scaling needs a context of at least 1"));
  }
  return absl::OkStatus();
}

absl::Status Validate(const ModelConfig& c) {
  if (!(c.positional.base > 1)) {
    return absl::InvalidArgumentError("positional.base must be > 1");
  }
  if (c.head_dim() % 2 != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("rope needs an even head dim, got ", c.head_dim()));
  }
  std::vector<const RopeScaling*> scalings = {&c.positional.rope_scaling};
  for (const RopeScaling& s : c.arch.layer_rope_scaling) scalings.push_back(&s);
  for (const RopeScaling* s : scalings) {
    RETURN_IF_ERROR(ValidateScaling(*s, c.head_dim()));
  }
  return absl::OkStatus();
}

void Reach(const ModelConfig& c, SchemeReach* r) {
  const RopeScaling& s = c.positional.rope_scaling;
  r->wavelengths =
      Wavelengths(RopeFrequencies(c.head_dim(), c.positional.base, s));
  // A scaling of every layer that stretches the codes: the length it was
  // made for (per-layer scalings, Gemma's, leave the sliding layers as
  // trained, so they say nothing of the whole model's reach).
  if (s.type != RopeScalingType::kNone && s.factor > 1 &&
      s.original_max_positions > 0 && c.arch.layer_rope_scaling.empty()) {
    r->scaled_length = static_cast<int64_t>(
        std::floor(s.factor * static_cast<double>(s.original_max_positions)));
    r->scaled_reason =
        absl::StrCat("its rotary scaling (", RopeScalingName(s.type),
                     ", factor ", s.factor, " over ", s.original_max_positions,
                     " positions) reaches ", r->scaled_length, " tokens");
  }
}

}  // namespace

PositionalConfig RopeConfig(RopeLayout layout, double base) {
  PositionalConfig p;
  p.type = SchemeType::kRope;
  p.rope_layout = layout;
  p.base = base;
  return p;
}

const SchemeEntry& RopeEntry() {
  static const SchemeEntry entry = [] {
    SchemeEntry e;
    e.traits.type = SchemeType::kRope;
    e.traits.name = "rope";
    e.traits.builtin = true;
    e.traits.rotary = true;
    e.traits.structure = ExpectedStructure::kRotary;
    e.traits.layouts = "interleaved|half";
    e.traits.set_layout = SetLayout;
    e.traits.validate = Validate;
    e.traits.reach = Reach;
    e.make = Make;
    return e;
  }();
  return entry;
}

}  // namespace encoder::model
