// MPNet: a learned table at the input and T5 buckets on the logits
// (docs/positional-encodings.md#learned-relative). Both parts are the
// learned and relative schemes' layers; the description joins theirs.
#include "server/common/status_macros.h"
#include "server/model/positional/learned.h"
#include "server/model/positional/relative.h"
#include "server/model/positional/schemes.h"

namespace encoder::model {
namespace {

// The table is read at the given positions (RoBERTa's numbering, which
// skips padding ids); the buckets count plain sequence indices, as
// MPNetEncoder computes its bias from arange(seq) whatever the position
// ids.
class LearnedRelativeScheme : public PositionalScheme {
 public:
  LearnedRelativeScheme(const ModelConfig& config, at::Tensor table,
                        at::Tensor bias_table)
      : learned_(config, std::move(table)),
        relative_(config, std::move(bias_table)) {}

  at::Tensor AddToInput(const at::Tensor& x,
                        const at::Tensor& positions) const override {
    return learned_.AddToInput(x, positions);
  }
  at::Tensor InputCode(const at::Tensor& positions) const override {
    return learned_.InputCode(positions);
  }
  at::Tensor AttentionBias(const at::Tensor& query_positions,
                           const at::Tensor& key_positions,
                           at::ScalarType dtype) const override {
    auto index = [](const at::Tensor& positions) {
      return at::arange(positions.size(-1), positions.options())
          .expand_as(positions);
    };
    return relative_.AttentionBias(index(query_positions), index(key_positions),
                                   dtype);
  }
  std::map<std::string, at::Tensor> Parameters() const override {
    std::map<std::string, at::Tensor> p = learned_.Parameters();
    p.merge(relative_.Parameters());
    return p;
  }
  SchemeDescription Describe() const override {
    SchemeDescription d = learned_.Describe();
    const SchemeDescription r = relative_.Describe();
    d.name = "learned_relative";
    d.params.insert(r.params.begin(), r.params.end());
    d.hooks.insert(d.hooks.end(), r.hooks.begin(), r.hooks.end());
    return d;
  }

 private:
  LearnedScheme learned_;
  RelativeScheme relative_;
};

absl::StatusOr<std::unique_ptr<PositionalScheme>> Make(
    const ModelConfig& config, const std::map<std::string, at::Tensor>& params,
    at::Device device, at::ScalarType dtype) {
  ASSIGN_OR_RETURN(
      auto table,
      SchemeParameter(config, params, "pos_embedding.weight", device, dtype));
  ASSIGN_OR_RETURN(auto bias, SchemeParameter(config, params,
                                              "relative_attention_bias.weight",
                                              device, dtype));
  return std::make_unique<LearnedRelativeScheme>(config, table, bias);
}

std::map<std::string, std::vector<int64_t>> Shapes(const ModelConfig& config) {
  return {{"pos_embedding.weight", {config.max_positions, config.d_model}},
          {"relative_attention_bias.weight",
           {config.positional.num_buckets, config.num_heads}}};
}

// The buckets saturate, but the table at the input bounds the length: no
// distance-only reason.
void Reach(const ModelConfig& c, SchemeReach* r) {
  RelativeBucketsReach(c.positional, r);
}

}  // namespace

PositionalConfig LearnedRelativeConfig(int64_t num_buckets,
                                       int64_t max_distance) {
  PositionalConfig p;
  p.type = SchemeType::kLearnedRelative;
  p.num_buckets = num_buckets;
  p.max_distance = max_distance;
  return p;
}

const SchemeEntry& LearnedRelativeEntry() {
  static const SchemeEntry entry = [] {
    SchemeEntry e;
    e.traits.type = SchemeType::kLearnedRelative;
    e.traits.name = "learned_relative";
    e.traits.relative_buckets = true;
    e.traits.structure = ExpectedStructure::kAdditiveAndBias;
    e.traits.table_bounds_length = [](const PositionalConfig&) { return true; };
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
