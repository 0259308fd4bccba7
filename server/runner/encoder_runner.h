// Runs batches of sequences on a model::Encoder: pads them into one tensor
// with a key-padding mask, runs one forward pass, and slices each sequence's
// pooled output, token embeddings, attention maps and statistics back out.
// The bridge between the torch-free batcher and the LibTorch model.
#ifndef ENCODER_SERVER_RUNNER_ENCODER_RUNNER_H_
#define ENCODER_SERVER_RUNNER_ENCODER_RUNNER_H_

#include <memory>
#include <vector>

#include "server/api/embed_types.h"
#include "server/batching/model_runner.h"
#include "server/model/encoder.h"

namespace encoder::runner {

class EncoderRunner : public batching::ModelRunner {
 public:
  // `model` must outlive the runner.
  explicit EncoderRunner(const model::Encoder* model);
  ~EncoderRunner() override;

  // The batcher's entry: every item's work must be an EmbedSpec
  // (INVALID_ARGUMENT otherwise); each result's output is its EmbedResult.
  // context.should_stop is asked before every layer and before each
  // layer's attention statistics of each sequence.
  absl::Status Run(const std::vector<const batching::BatchItem*>& batch,
                   std::vector<batching::ItemResult>* results,
                   const batching::RunContext& context) override;

  // Runs `batch` in one forward pass. CUDA out-of-memory comes back as
  // RESOURCE_EXHAUSTED (after releasing cached blocks); other library
  // failures as INTERNAL; a stop `context` asked for, as its status.
  absl::Status RunEmbed(const std::vector<const api::EmbedSpec*>& batch,
                        std::vector<api::EmbedResult>* results,
                        const batching::RunContext& context = {});

  // The memory `spec` needs while its batch runs (see SequenceCost): the
  // layer's activations per token, and per token pair the attention
  // scores and probabilities of one layer plus every kept layer's
  // probabilities (all layers when statistics are asked) and the returned
  // maps; per token, the kept hidden states. An estimate at the model's
  // dtype, meant to err high.
  batching::SequenceCost Price(const api::EmbedSpec& spec) const;

  // The compute `spec` takes (BatchItem::compute), in floating-point
  // operations: per token two per weight of the layers' projections and
  // feed-forward; per token pair the attention products (4 x width per
  // layer) and about 16 operations per head and layer for bias, mask and
  // softmax, plus the kept maps' copies and, with statistics, their
  // float64 reductions on the host (512 per head and layer, as measured on
  // the built-in shape: statistics nearly double a 2048-token pass).
  batching::SequenceCost Compute(const api::EmbedSpec& spec) const;

  // One forward pass on a short input, so the first request is not slow.
  absl::Status WarmUp();

  // The model's compute rate (Compute's units per second), from the faster
  // of two passes of 2 sequences of up to 128 tokens: the batcher's first
  // estimate (BatchOptions::work_per_second) before it measures its own
  // batches. Run it after WarmUp.
  absl::StatusOr<double> MeasureWorkRate();

  // One pass over `sequences` probe inputs of up to `length` tokens (the
  // model's longest input caps it): the shape ModelHost traces, beside the
  // warm-up, for the kernels a served batch runs (model::TraceKernels).
  absl::Status RunProbeBatch(int64_t sequences, int64_t length);

  // A probe input for timing the model (MeasureWorkRate, the batch
  // profile): `length` ids from 1 .. vocab_size-1 (never 0, a common
  // padding id), differing with `index`; pooled output only.
  api::EmbedSpec ProbeSpec(int64_t index, int64_t length) const;

  // From which share of padding in a batch the token-wise work skips the
  // padded positions (model::ForwardOptions::skip_padding_min_share; 1:
  // never). Set before serving.
  void set_skip_padding_min_share(double share) {
    skip_padding_min_share_ = share;
  }
  // Whether attention without maps goes through the fused kernel
  // (model::ForwardOptions::fused_attention). Set before serving.
  void set_fused_attention(bool fused) { fused_attention_ = fused; }

 private:
  struct DeviceState;  // CUDA stream, when built with CUDA

  absl::Status RunImpl(const std::vector<const api::EmbedSpec*>& batch,
                       std::vector<api::EmbedResult>* results,
                       const batching::RunContext& context);

  const model::Encoder* model_;
  std::unique_ptr<DeviceState> device_state_;
  double skip_padding_min_share_ = model::kDefaultSkipPaddingMinShare;
  bool fused_attention_ = true;
};

}  // namespace encoder::runner

#endif  // ENCODER_SERVER_RUNNER_ENCODER_RUNNER_H_
