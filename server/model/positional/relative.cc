// T5's relative buckets on the logits, one bias table shared by every layer
// (docs/positional-encodings.md#relative).
#include "server/model/positional/relative.h"

#include "server/common/status_macros.h"
#include "server/model/positional/schemes.h"

namespace encoder::model {

absl::Status ValidateRelativeBuckets(const PositionalConfig& pc) {
  if (pc.num_buckets < 4 || pc.num_buckets % 2 != 0) {
    return absl::InvalidArgumentError(
        "positional.num_buckets must be even and >= 4");
  }
  if (pc.max_distance <= pc.num_buckets / 4) {
    return absl::InvalidArgumentError(
        "positional.max_distance must exceed num_buckets / 4");
  }
  return absl::OkStatus();
}

void RelativeBucketsReach(const PositionalConfig& pc, SchemeReach* r) {
  r->num_buckets = pc.num_buckets;
  r->max_distance = pc.max_distance;
  r->bucket_saturation_distance =
      BucketSaturation(pc.num_buckets, pc.max_distance);
}

namespace {

absl::StatusOr<std::unique_ptr<PositionalScheme>> Make(
    const ModelConfig& config, const std::map<std::string, at::Tensor>& params,
    at::Device device, at::ScalarType dtype) {
  ASSIGN_OR_RETURN(auto table, SchemeParameter(config, params,
                                               "relative_attention_bias.weight",
                                               device, dtype));
  return std::make_unique<RelativeScheme>(config, table);
}

std::map<std::string, std::vector<int64_t>> Shapes(const ModelConfig& config) {
  return {{"relative_attention_bias.weight",
           {config.positional.num_buckets, config.num_heads}}};
}

void Reach(const ModelConfig& c, SchemeReach* r) {
  RelativeBucketsReach(c.positional, r);
  r->distance_only_reason =
      absl::StrCat("relative buckets saturate from distance ",
                   r->bucket_saturation_distance);
}

}  // namespace

PositionalConfig RelativeConfig(int64_t num_buckets, int64_t max_distance) {
  PositionalConfig p;
  p.type = SchemeType::kRelative;
  p.num_buckets = num_buckets;
  p.max_distance = max_distance;
  return p;
}

const SchemeEntry& RelativeEntry() {
  static const SchemeEntry entry = [] {
    SchemeEntry e;
    e.traits.type = SchemeType::kRelative;
    e.traits.name = "relative";
    e.traits.builtin = true;
    e.traits.relative_buckets = true;
    e.traits.structure = ExpectedStructure::kBias;
    e.traits.validate = [](const ModelConfig& c) {
      return ValidateRelativeBuckets(c.positional);
    };
    e.traits.reach = Reach;
    e.make = Make;
    e.parameter_shapes = Shapes;
    return e;
  }();
  return entry;
}

}  // namespace encoder::model
