// Diagnose's verdicts on the built-in models do not change when a model
// serves in int8: the probes measure the architecture.
#include <gtest/gtest.h>

#include "server/diagnostics/diagnostics.h"
#include "server/model/kernels/int8_linear.h"
#include "server/model/weights/model_repository.h"

namespace encoder::diagnostics {
namespace {

api::DiagnoseReport Probe(const model::Encoder& enc) {
  api::DiagnoseOptions o;
  for (int64_t i = 0; i < 24; ++i) o.token_ids.push_back(3 + 37 * i % 9000);
  o.permutation_seed = 5;
  o.structure_positions = 32;
  auto r = Diagnose(enc, o);
  EXPECT_TRUE(r.ok()) << r.status();
  return std::move(r).value();
}

TEST(PrecisionDiagnose, Int8KeepsEveryVerdict) {
  if (!model::Int8Supported()) GTEST_SKIP() << "no oneDNN quantized engine";
  for (const model::ModelSpec& spec : model::BuiltinRepository().models) {
    auto reference = model::LoadModel(spec, at::kCPU, at::kFloat);
    auto quantized = model::LoadModel(spec, at::kCPU, at::kFloat);
    ASSERT_TRUE(reference.ok() && quantized.ok());
    ASSERT_TRUE((*quantized)->QuantizeInt8().ok());
    const api::DiagnoseReport want = Probe(**reference);
    const api::DiagnoseReport got = Probe(**quantized);
    ASSERT_TRUE(got.permutation && got.shift && got.structure);
    EXPECT_EQ(got.permutation->equivariant, want.permutation->equivariant)
        << spec.name;
    EXPECT_EQ(got.shift->relative_only, want.shift->relative_only) << spec.name;
    EXPECT_EQ(got.structure->kind, want.structure->kind) << spec.name;
    // The verdicts are those the schemes' math predicts: only "none" is
    // permutation equivariant; rope, alibi and relative depend on relative
    // positions only.
    const bool none = spec.name == "none";
    const bool relative = spec.name == "rope" || spec.name == "alibi" ||
                          spec.name == "relative" || none;
    EXPECT_EQ(got.permutation->equivariant, none) << spec.name;
    EXPECT_EQ(got.shift->relative_only, relative) << spec.name;
  }
}

}  // namespace
}  // namespace encoder::diagnostics
