// EncoderRunner: a mixed batch (pooling modes, normalization, token and
// attention requests) gives each sequence what it gives alone, and what the
// model computes directly.
#include "server/runner/encoder_runner.h"

#include <gtest/gtest.h>

#include <any>
#include <cmath>
#include <random>
#include <string>
#include <thread>

#include "server/runner/thread_policy.h"

namespace encoder::runner {
namespace {

// A two-layer model of width `d_model` (feed-forward 2 x d_model when
// small, 4 x otherwise) with random weights.
std::unique_ptr<model::Encoder> SmallModel(
    int64_t d_model = 32,
    model::SchemeType scheme = model::SchemeType::kRelative,
    uint64_t seed = 9) {
  model::ModelConfig c;
  c.vocab_size = 300;
  c.d_model = d_model;
  c.num_heads = 4;
  c.num_layers = 2;
  c.d_ff = d_model <= 32 ? 2 * d_model : 4 * d_model;
  c.positional.type = scheme;
  return std::move(model::Encoder::Create(
                       c, model::Encoder::RandomStateDict(c, seed), at::kCPU)
                       .value());
}

double MaxDiff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double d = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    d = std::max(d, static_cast<double>(std::abs(a[i] - b[i])));
  }
  return d;
}

TEST(EncoderRunner, MixedBatchEqualsEachSequenceAlone) {
  auto model = SmallModel();
  EncoderRunner runner(model.get());
  std::vector<api::EmbedSpec> specs(4);
  specs[0].token_ids = {1, 5, 6, 7, 2};
  specs[0].pooling = model::Pooling::kFirst;
  specs[0].normalize = true;
  specs[1].token_ids = {1, 9, 2};
  specs[1].want_tokens = true;
  specs[1].attention_layers = {1};
  specs[1].attention_heads = {2, 0};
  specs[2].token_ids = {1, 40, 41, 42, 43, 44, 45, 2};
  specs[2].normalize = true;
  specs[2].attention_layers = {0, 1};
  specs[2].average_heads = true;
  specs[3].token_ids = {1, 2};
  specs[3].pooling = model::Pooling::kFirst;
  specs[3].want_attention_stats = true;
  std::vector<const api::EmbedSpec*> batch;
  for (const auto& s : specs) batch.push_back(&s);
  std::vector<api::EmbedResult> together;
  ASSERT_TRUE(runner.RunEmbed(batch, &together).ok());
  ASSERT_EQ(together.size(), 4u);
  for (size_t i = 0; i < specs.size(); ++i) {
    std::vector<api::EmbedResult> alone;
    ASSERT_TRUE(runner.RunEmbed({&specs[i]}, &alone).ok());
    EXPECT_LT(MaxDiff(together[i].pooled, alone[0].pooled), 1e-5) << i;
    EXPECT_LT(MaxDiff(together[i].tokens, alone[0].tokens), 1e-5) << i;
    EXPECT_LT(MaxDiff(together[i].attention, alone[0].attention), 1e-5) << i;
    EXPECT_EQ(together[i].attention_shape, alone[0].attention_shape) << i;
    EXPECT_EQ(together[i].attention_stats.size(),
              alone[0].attention_stats.size());
    EXPECT_EQ(together[i].num_tokens,
              static_cast<int64_t>(specs[i].token_ids.size()));
  }
  // Normalized rows have unit norm; first pooling is token 0's output.
  double norm = 0;
  for (float v : together[0].pooled) norm += v * v;
  EXPECT_NEAR(std::sqrt(norm), 1.0, 1e-5);
  model::EncoderInput in;
  in.ids = at::tensor(specs[3].token_ids, at::kLong).view({1, -1});
  in.mask = at::ones_like(in.ids, at::kBool);
  at::Tensor first = model->Forward(in, {}).value().tokens[0][0].contiguous();
  std::vector<float> want(first.data_ptr<float>(),
                          first.data_ptr<float>() + 32);
  EXPECT_LT(MaxDiff(together[3].pooled, want), 1e-5);
  // Shapes: selected heads [1 layer, 2 heads, 3, 3]; averaged [2, 8, 8].
  EXPECT_EQ(together[1].attention_shape, (std::vector<int64_t>{1, 2, 3, 3}));
  EXPECT_EQ(together[2].attention_shape, (std::vector<int64_t>{2, 8, 8}));
  EXPECT_EQ(together[1].tokens.size(), 3u * 32u);
  EXPECT_EQ(together[3].attention_stats.size(), 2u * 4u);
}

// Two batches running at once on one runner (--executions-per-model 2),
// splitting OpenBLAS's threads between them, give what each gives alone:
// in float32 and in int8, with products large enough to use the threads.
// With the intra-op share on, one of the two runs on the wide thread and
// the other here, on a share of the cores.
TEST(EncoderRunner, BatchesRunningAtOnceMatchEachRunAlone) {
  ApplyThreadPolicy(1, 2);
  for (const int share : {0, 2}) {
    SCOPED_TRACE(share > 0 ? "intra-op share" : "fixed intra-op threads");
    EnableIntraOpShare(share);
    for (const bool int8 : {false, true}) {
      auto model = SmallModel(128, model::SchemeType::kRope, 4);
      if (int8) ASSERT_TRUE(model->QuantizeInt8().ok());
      EncoderRunner runner(model.get());
      std::mt19937 rng(7);
      std::uniform_int_distribution<int64_t> id(3, 299), length(20, 60);
      std::vector<std::vector<api::EmbedSpec>> specs(2);
      specs[0].resize(5);
      specs[1].resize(3);
      for (auto& batch : specs) {
        for (api::EmbedSpec& s : batch) {
          s.token_ids.resize(length(rng));
          for (int64_t& t : s.token_ids) t = id(rng);
          s.want_tokens = true;
        }
      }
      specs[1][0].attention_layers = {1};
      std::vector<std::vector<const api::EmbedSpec*>> batches(2);
      std::vector<std::vector<api::EmbedResult>> alone(2);
      for (int b = 0; b < 2; ++b) {
        for (const api::EmbedSpec& s : specs[b]) batches[b].push_back(&s);
        ASSERT_TRUE(runner.RunEmbed(batches[b], &alone[b]).ok());
      }
      std::vector<double> worst(2, 0);
      std::vector<int> errors(2, 0);
      std::vector<std::thread> threads;
      for (int b = 0; b < 2; ++b) {
        threads.emplace_back([&, b] {
          for (int round = 0; round < 8; ++round) {
            std::vector<api::EmbedResult> got;
            if (!runner.RunEmbed(batches[b], &got).ok() ||
                got.size() != alone[b].size()) {
              ++errors[b];
              continue;
            }
            for (size_t i = 0; i < got.size(); ++i) {
              worst[b] = std::max(
                  {worst[b], MaxDiff(got[i].pooled, alone[b][i].pooled),
                   MaxDiff(got[i].tokens, alone[b][i].tokens),
                   MaxDiff(got[i].attention, alone[b][i].attention)});
            }
          }
        });
      }
      for (std::thread& t : threads) t.join();
      for (int b = 0; b < 2; ++b) {
        EXPECT_EQ(errors[b], 0) << "int8 " << int8 << ", batch " << b;
        EXPECT_LT(worst[b], 1e-5) << "int8 " << int8 << ", batch " << b;
      }
      EXPECT_EQ(ThreadShare::running(), 0);
    }
  }
  EnableIntraOpShare(0);
  ApplyThreadPolicy(1, 0);
}

// A batch that fails inside LibTorch on the wide thread (an id past the
// vocabulary) gets an error status here, and the next batch runs.
TEST(EncoderRunner, AFailureOnTheWideThreadComesBackAsAStatus) {
  ApplyThreadPolicy(1, 0);
  const std::string enabled = EnableIntraOpShare(2);
  if (IntraOpShareCores() == 0) GTEST_SKIP() << enabled;
  auto model = SmallModel();
  EncoderRunner runner(model.get());
  api::EmbedSpec bad;
  bad.token_ids = {1, 5000, 2};  // vocab_size is 300
  api::EmbedSpec good;
  good.token_ids = {1, 5, 6, 2};
  std::vector<api::EmbedResult> out;
  const absl::Status failed = runner.RunEmbed({&bad}, &out);
  EXPECT_FALSE(failed.ok());
  std::vector<api::EmbedResult> fine;
  ASSERT_TRUE(runner.RunEmbed({&good}, &fine).ok());
  ASSERT_EQ(fine.size(), 1u);
  EXPECT_EQ(fine[0].pooled.size(), 32u);
  EXPECT_EQ(ThreadShare::running(), 0);
  EnableIntraOpShare(0);
}

TEST(EncoderRunner, BatchItemsCarryTheirSpecAndResultThroughTheBatcherEntry) {
  auto model = SmallModel();
  EncoderRunner runner(model.get());
  api::EmbedSpec spec;
  spec.token_ids = {1, 5, 6, 7, 2};
  spec.want_tokens = true;
  std::vector<api::EmbedResult> direct;
  ASSERT_TRUE(runner.RunEmbed({&spec}, &direct).ok());
  const batching::BatchItem item = ToBatchItem(spec);
  EXPECT_EQ(item.length, 5);
  std::vector<batching::ItemResult> results;
  ASSERT_TRUE(runner.Run({&item}, &results, batching::RunContext{}).ok());
  ASSERT_EQ(results.size(), 1u);
  const auto* out = std::any_cast<api::EmbedResult>(&results[0].output);
  ASSERT_NE(out, nullptr);
  EXPECT_LT(MaxDiff(out->pooled, direct[0].pooled), 1e-6);
  EXPECT_EQ(results[0].bytes,
            static_cast<int64_t>((out->pooled.size() + out->tokens.size()) *
                                 sizeof(float)));
  // Work of another runner's type fails the batch, naming what is missing.
  batching::BatchItem foreign;
  foreign.length = 3;
  foreign.work = 42;
  const absl::Status refused =
      runner.Run({&foreign}, &results, batching::RunContext{});
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.message().find("EmbedSpec"), std::string::npos);
}

TEST(EncoderRunner, StopsBetweenLayersWhenItsContextSaysSo) {
  auto model = SmallModel();
  EncoderRunner runner(model.get());
  const int64_t layers = model->config().num_layers;
  ASSERT_GE(layers, 2);
  api::EmbedSpec spec;
  spec.token_ids = {1, 5, 6, 7, 2};
  spec.want_attention_stats = true;
  // Asked before every layer, then before each layer's statistics.
  int asked = 0;
  batching::RunContext keep_going;
  keep_going.should_stop = [&asked] {
    ++asked;
    return absl::OkStatus();
  };
  std::vector<api::EmbedResult> results;
  ASSERT_TRUE(runner.RunEmbed({&spec}, &results, keep_going).ok());
  EXPECT_EQ(asked, 2 * layers);
  EXPECT_FALSE(results[0].attention_stats.empty());
  // A stop at the second layer ends the pass with the context's status.
  asked = 0;
  batching::RunContext stop;
  stop.should_stop = [&asked] {
    return ++asked < 2 ? absl::OkStatus()
                       : absl::DeadlineExceededError("gave up");
  };
  const absl::Status stopped = runner.RunEmbed({&spec}, &results, stop);
  EXPECT_EQ(stopped.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(stopped.message(), "gave up");
  EXPECT_EQ(asked, 2);
  // Without statistics, only the layers ask.
  spec.want_attention_stats = false;
  asked = 0;
  ASSERT_TRUE(runner.RunEmbed({&spec}, &results, keep_going).ok());
  EXPECT_EQ(asked, layers);
}

}  // namespace
}  // namespace encoder::runner
