// The encoder's attention kernels against each other: LibTorch's fused
// kernel against the explicit products, and bfloat16 models on the
// server's bfloat16 kernel against the fused one.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "server/model/encoder.h"
#include "server/model/kernels/bf16_attention.h"
#include "tests/model/encoder_configs.h"

namespace encoder::model {
namespace {

// Layers that return no maps run the fused kernel (where LibTorch has it):
// against the explicit products on every architecture (scheme biases,
// RoPE, a sliding window, no scaling), with and without padding, skipping
// it or not, in float32 and bfloat16; and with the fused kernel a sequence
// alone equals itself in a padded batch.
TEST(Encoder, FusedAttentionMatchesTheExplicitProducts) {
  at::manual_seed(4);
  std::vector<std::pair<std::string, ModelConfig>> configs = PackingConfigs();
  ModelConfig unscaled = SmallConfig(SchemeType::kRelative);
  unscaled.arch.attention_scale = false;  // T5 scales in its weights
  configs.emplace_back("unscaled", unscaled);
  for (const auto& [name, config] : configs) {
    const auto weights = Encoder::RandomStateDict(config, 1);
    auto f32 = Encoder::Create(config, weights, at::kCPU, at::kFloat);
    auto bf16 = Encoder::Create(config, weights, at::kCPU, at::kBFloat16);
    ASSERT_TRUE(f32.ok()) << f32.status();
    ASSERT_TRUE(bf16.ok()) << bf16.status();
    for (double share : {0.0, 1.0}) {
      const std::string what = name + " share " + std::to_string(share);
      const EncoderInput in = Padded({9, 4, 1, 9, 6});
      ForwardOptions fused;
      fused.skip_padding_min_share = share;
      fused.hidden_layers = {1};
      ForwardOptions explicit_products = fused;
      explicit_products.fused_attention = false;
      // A map requested for layer 1 leaves layer 0 fused.
      ForwardOptions mixed = fused;
      mixed.attention_layers = {1};
      const at::Tensor real = in.mask.unsqueeze(-1);
      auto on_real = [&](const at::Tensor& t) {
        return t.to(at::kFloat).masked_fill(real.logical_not(), 0);
      };
      auto run = [&](const Encoder& enc, const ForwardOptions& o) {
        auto out = enc.Forward(in, o);
        EXPECT_TRUE(out.ok()) << out.status();
        return std::move(out).value();
      };
      // float32: the fused kernel within float32 rounding of the products.
      const EncoderOutput reference = run(**f32, explicit_products);
      for (const ForwardOptions* o : {&fused, &mixed}) {
        const EncoderOutput got = run(**f32, *o);
        EXPECT_LT(MaxAbs(on_real(got.tokens) - on_real(reference.tokens)), 1e-5)
            << what;
        EXPECT_LT(
            MaxAbs(on_real(got.hidden.at(1)) - on_real(reference.hidden.at(1))),
            1e-5)
            << what;
      }
      // bfloat16 (weights and activations rounded to 8 significant bits):
      // the fused kernel keeps the scores in float32, the explicit products
      // round them to bfloat16 first. Against float32 (root mean square of
      // the error over that of the values; 0.6-0.9% here) the fused result
      // is within 15% of the explicit one's error, both under 1e-2 (the
      // ratio ranged 0.90-1.11 over these architectures: rounding noise).
      auto relative = [&](const at::Tensor& t) {
        return (on_real(t) - on_real(reference.tokens)).norm().item<double>() /
               on_real(reference.tokens).norm().item<double>();
      };
      const double explicit_error =
          relative(run(**bf16, explicit_products).tokens);
      EXPECT_LT(explicit_error, 1e-2) << what;
      for (const ForwardOptions* o : {&fused, &mixed}) {
        const double fused_error = relative(run(**bf16, *o).tokens);
        EXPECT_LT(fused_error, 1e-2) << what;
        EXPECT_LE(fused_error, 1.15 * explicit_error) << what;
      }
      // A sequence alone equals itself in the padded batch: within float32
      // rounding, and in bfloat16 (attention on each sequence's own length;
      // bit for bit on this project's AMD machine, where the products'
      // kernels do not depend on the row count) within one bfloat16
      // rounding, relative, on CPUs whose kernels change with it.
      const EncoderOutput batched32 = run(**f32, fused);
      const EncoderOutput batched16 = run(**bf16, fused);
      for (int64_t i : {1, 3}) {
        const int64_t n = in.mask[i].sum().item<int64_t>();
        EncoderInput alone;
        alone.ids = in.ids.narrow(0, i, 1).narrow(1, 0, n);
        alone.mask = in.mask.narrow(0, i, 1).narrow(1, 0, n);
        auto one32 = (*f32)->Forward(alone, fused);
        auto one16 = (*bf16)->Forward(alone, fused);
        ASSERT_TRUE(one32.ok()) << one32.status();
        ASSERT_TRUE(one16.ok()) << one16.status();
        EXPECT_LT(
            MaxAbs(batched32.tokens[i].narrow(0, 0, n) - one32->tokens[0]),
            1e-5)
            << what << " row " << i;
        const at::Tensor got16 =
            batched16.tokens[i].narrow(0, 0, n).to(at::kFloat);
        const at::Tensor want16 = one16->tokens[0].to(at::kFloat);
        EXPECT_LE((got16 - want16).norm().item<double>() /
                      want16.norm().item<double>(),
                  1.0 / 256)
            << what << " row " << i;
      }
    }
  }
}

// A bfloat16 CPU model whose heads the server's kernel takes (32
// channels) runs it where asked, and by default where its products run
// on AMX tiles (Bf16Attention: bfloat16 products of the bfloat16 queries,
// keys and values, float32 scores and softmax). Against the float32
// model's explicit
// products its error stays within 15% of LibTorch's fused kernel's on the
// same bfloat16 model (both under 1e-2 relative), padded batches included,
// and a sequence alone equals itself in the batch within one bfloat16
// rounding.
TEST(Encoder, BFloat16ModelsRunTheBFloat16AttentionKernel) {
  at::manual_seed(6);
  for (SchemeType type :
       {SchemeType::kRope, SchemeType::kAlibi, SchemeType::kRelative}) {
    ModelConfig config = SmallConfig(type);
    config.d_model = 64;
    config.num_heads = 2;
    const auto weights = Encoder::RandomStateDict(config, 2);
    auto f32 = Encoder::Create(config, weights, at::kCPU, at::kFloat);
    auto bf16 = Encoder::Create(config, weights, at::kCPU, at::kBFloat16);
    ASSERT_TRUE(f32.ok()) << f32.status();
    ASSERT_TRUE(bf16.ok()) << bf16.status();
    EXPECT_FALSE((*f32)->bf16_attention());
    EXPECT_EQ((*f32)->SetBf16Attention("auto").code(),
              absl::StatusCode::kFailedPrecondition);
    EXPECT_EQ((*bf16)->SetBf16Attention("fast").code(),
              absl::StatusCode::kInvalidArgument);
    const bool runs = Bf16AttentionSupported(32);
    EXPECT_EQ((*bf16)->bf16_attention(), runs && Bf16AttentionOnAmx());
    if (!runs) {
      EXPECT_EQ((*bf16)->SetBf16Attention("bfloat16").code(),
                absl::StatusCode::kFailedPrecondition);
      continue;
    }
    ASSERT_TRUE((*bf16)->SetBf16Attention("bfloat16").ok());
    const EncoderInput in = Padded({9, 4, 1, 9, 6});
    ForwardOptions explicit_products;
    explicit_products.fused_attention = false;
    const at::Tensor real = in.mask.unsqueeze(-1);
    auto tokens = [&](const Encoder& enc, const EncoderInput& input,
                      const ForwardOptions& o) {
      auto out = enc.Forward(input, o);
      EXPECT_TRUE(out.ok()) << out.status();
      return out.ok() ? out->tokens.to(at::kFloat) : at::Tensor();
    };
    const at::Tensor reference =
        tokens(**f32, in, explicit_products).masked_fill(real.logical_not(), 0);
    auto error = [&](const at::Tensor& t) {
      return (t.masked_fill(real.logical_not(), 0) - reference)
                 .norm()
                 .item<double>() /
             reference.norm().item<double>();
    };
    const at::Tensor ours = tokens(**bf16, in, ForwardOptions());
    ASSERT_TRUE((*bf16)->SetBf16Attention("fused").ok());
    EXPECT_FALSE((*bf16)->bf16_attention());
    const at::Tensor fused = tokens(**bf16, in, ForwardOptions());
    ASSERT_TRUE((*bf16)->SetBf16Attention("bfloat16").ok());
    const std::string what = SchemeName(type);
    EXPECT_LT(error(ours), 1e-2) << what;
    EXPECT_LE(error(ours), 1.15 * error(fused)) << what;
    for (int64_t i : {1, 3}) {
      const int64_t n = in.mask[i].sum().item<int64_t>();
      EncoderInput alone;
      alone.ids = in.ids.narrow(0, i, 1).narrow(1, 0, n);
      alone.mask = in.mask.narrow(0, i, 1).narrow(1, 0, n);
      const at::Tensor one = tokens(**bf16, alone, ForwardOptions())[0];
      EXPECT_LE((ours[i].narrow(0, 0, n) - one).norm().item<double>() /
                    one.norm().item<double>(),
                1.0 / 256)
          << what << " row " << i;
    }
  }
}

}  // namespace
}  // namespace encoder::model
