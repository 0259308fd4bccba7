// Hosts the models of a repository: for each, the encoder, its runner and
// its batcher (one worker per model), behind the ServedModel handle. Built
// once at start-up; read-only and thread-safe afterwards, except DrainAll.
#ifndef ENCODER_SERVER_RUNNER_MODEL_HOST_H_
#define ENCODER_SERVER_RUNNER_MODEL_HOST_H_

#include <array>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/api/served_model.h"
#include "server/batching/batch_profile.h"
#include "server/batching/batcher.h"
#include "server/batching/memory_budget.h"
#include "server/model/kernels/packed_linear.h"
#include "server/model/weights/model_repository.h"
#include "server/runner/encoder_runner.h"
#include "server/runner/precision_choice.h"
#include "server/tokenizer/tokenizer.h"

namespace encoder::runner {

struct HostOptions {
  at::Device device = at::kCPU;
  at::ScalarType dtype = at::kFloat;
  // "none" or "int8" (CPU, float32): every model's default; a model's
  // repository entry may set its own ("quantize").
  std::string quantize = "none";
  // --dtype auto: each model runs the fastest precision that passes the
  // quality gate (ChoosePrecision); dtype and quantize are then ignored.
  bool auto_precision = false;
  // Float32 on the CPU: pack each layer's projection weights once at load
  // (model::Encoder::PrepackWeights) where the LibTorch can.
  bool pack_weights = false;
  // int8 models too (model::PackingPlan::pack_int8).
  bool pack_int8_models = false;
  model::PackedLimits packed_limits;
  // The same for bfloat16 models (--dtype=bfloat16, and the bfloat16
  // candidate of --dtype=auto): only where the CPU multiplies bfloat16
  // natively.
  bool pack_bfloat16 = false;
  model::PackedLimits packed_limits_bfloat16{model::PackedLinear::kEveryProduct,
                                             0};
  // int8 models: input channels per projection kept in float32
  // (model::Encoder::QuantizeInt8).
  int64_t int8_float_channels = model::kDefaultInt8FloatChannels;
  // And each token's this many largest |x| in the feed-forward's second
  // projection (0: none).
  int64_t int8_row_outliers = 0;
  // How int8 models' attention runs: auto, float32 or bfloat16
  // (model::Encoder::SetInt8Attention).
  std::string int8_attention = "auto";
  // How bfloat16 CPU models' attention runs: auto, bfloat16 or fused
  // (model::Encoder::SetBf16Attention).
  std::string bf16_attention = "auto";
  // Defaults for every model; a model's repository entry may override.
  batching::BatchOptions batching;
  bool warm_up = true;
  // From which share of padding in a batch the projections, feed-forward
  // and norms skip the padded positions (model::ForwardOptions); 1: never.
  double skip_padding_min_share = model::kDefaultSkipPaddingMinShare;
  // Attention without maps through the fused kernel where the LibTorch has
  // it (model::ForwardOptions::fused_attention).
  bool fused_attention = true;
  // On CUDA, whether the fused kernel may choose cuDNN's attention
  // (model::SetCudnnAttention). Off by default: on an H100 with LibTorch
  // 2.11, half-precision serving at 32 callers ran 1.7-5.9x slower with it
  // and p99 went from 16 ms to 126-154 ms (docs/benchmarks-history.md,
  // "GPU").
  bool cudnn_attention = false;
  // Wall time each distinct model shape may spend measuring its throughput
  // by batch size and length at start-up (batching::MeasureBatchProfile);
  // the batch-size caps it finds join the model's batching options. Zero
  // (the server's default): no profile, fixed caps only. Models of the same
  // family, width, heads, layers, feed-forward width, precision and batching
  // limits share one.
  absl::Duration batch_profile_budget = absl::ZeroDuration();
  // The memory the process may use; 0: detect (cgroup limit, else RAM).
  int64_t memory_limit_bytes = 0;
  // Bytes the running batches of all models may hold at once; 0: derive
  // as kBudgetFraction of what the limit leaves after the loaded models
  // and `reserved_bytes`.
  int64_t batch_memory_budget_bytes = 0;
  // Memory kept out of the derived budget for the transport's buffers and
  // for responses waiting for their clients to read them.
  int64_t reserved_bytes = 0;
  // The long-input policy auto's measured reach (MeasureLongInputReach):
  // taken at load for each model whose policy (its repository entry's,
  // else `long_input`) is auto, up to its extrapolation limit (its
  // entry's, else `max_extrapolation_tokens`). long_input_drift 0: not
  // measured; auto then decides by the scheme's parameters.
  LongInputPolicy long_input = LongInputPolicy::kTruncate;
  int64_t max_extrapolation_tokens = 2048;
  double long_input_drift = kDefaultLongInputDrift;
  // Observer for a model's batcher (metrics); may be empty.
  std::function<batching::BatcherObserver(const std::string& model)>
      make_observer;
};

// One loaded model: what start-up builds (encoder, tokenizer, runner,
// batcher) and the handle the service uses (ServedModel). The fields are for
// start-up code and tests; the service sees only the interface.
class HostedModel final : public api::ServedModel {
 public:
  const api::ModelDescription& description() const override { return desc; }
  const tokenizer::Tokenizer* tokenizer() const override {
    return text_tokenizer.get();
  }
  batching::SequenceCost Price(const api::EmbedSpec& spec) const override;
  absl::Status Embed(api::EmbedWork work) const override;
  int64_t queued_sequences() const override;
  absl::Status Diagnose(api::DiagnoseWork work) const override;

  model::ModelSpec spec;
  std::unique_ptr<model::Encoder> encoder;
  // Text -> ids for this model (the byte tokenizer unless the repository
  // entry names one). Thread-safe.
  std::unique_ptr<tokenizer::Tokenizer> text_tokenizer;  // null: ids only
  std::unique_ptr<EncoderRunner> runner;
  // The compute rate measured after warm-up, the batcher's first estimate
  // (0: not measured, without warm-up).
  double work_per_second = 0;
  // The compute scale of each batching::ComputeClass measured after
  // warm-up (attention statistics: MeasureStatisticsScale), the batcher's
  // first estimate; 1 without warm-up.
  std::array<double, batching::kComputeClasses> compute_scale = {1.0, 1.0};
  // What --dtype auto measured for this model (empty otherwise).
  std::vector<PrecisionTrial> precision_trials;
  // Filled once loading is done; its batching options and batch profile
  // are the ones the batcher runs with.
  api::ModelDescription desc;
  std::unique_ptr<batching::Batcher> batcher;  // destroyed first
};

class ModelHost final : public api::ModelCatalog {
 public:
  // Loads every model of the repository (weights, tokenizer, device,
  // warm-up) and starts its batcher. Fails on the first model that cannot be
  // loaded, naming it. The loading runs on a thread of its own
  // (RunOnTransientThread): the compute threads it starts end with it.
  static absl::StatusOr<std::unique_ptr<ModelHost>> Create(
      const model::Repository& repository, const HostOptions& options);

  ~ModelHost() override;

  // ModelCatalog.
  const api::ServedModel* Find(const std::string& name) const override {
    return FindHosted(name);
  }
  std::vector<const api::ServedModel*> List() const override;
  const std::string& default_model() const override { return default_model_; }
  int64_t batch_memory_budget_bytes() const override {
    return budget_->capacity();
  }
  bool DrainAll(absl::Time deadline) override;

  // The model with what it is built of (start-up and tests), by name as
  // Find: the model by name, else by alias, else the lone model (unless
  // strict names); nullptr: unknown.
  const HostedModel* FindHosted(const std::string& name) const;
  const std::vector<std::unique_ptr<HostedModel>>& models() const {
    return models_;
  }
  const HostOptions& options() const { return options_; }

 private:
  ModelHost() = default;
  // Create's work, on the calling thread.
  static absl::StatusOr<std::unique_ptr<ModelHost>> Load(
      const model::Repository& repository, const HostOptions& options);

  HostOptions options_;
  std::unique_ptr<batching::MemoryBudget> budget_;  // outlives the batchers
  std::vector<std::unique_ptr<HostedModel>> models_;
  std::string default_model_;
  std::map<std::string, std::string> aliases_;  // Repository.aliases
  bool strict_names_ = false;                   // Repository.strict_names
};

// The share of free memory the derived batch budget takes; the rest is
// headroom for responses in flight, allocator slack and the unexpected.
inline constexpr double kBudgetFraction = 0.5;
// Applies a repository entry's batching overrides to the defaults.
batching::BatchOptions MergeBatchOptions(
    const batching::BatchOptions& defaults,
    const model::BatchingOverrides& overrides);

}  // namespace encoder::runner

#endif  // ENCODER_SERVER_RUNNER_MODEL_HOST_H_
