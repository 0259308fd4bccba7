// EncoderRunner's cost model (encoder_runner.h): the bytes a sequence
// holds while it runs (Price) and the work it takes (Compute), and the work
// rate measured on probe batches that turns work into seconds.
#include <algorithm>

#include "absl/time/clock.h"
#include "server/common/status_macros.h"
#include "server/runner/encoder_runner.h"

namespace encoder::runner {

batching::SequenceCost EncoderRunner::Price(const api::EmbedSpec& spec) const {
  const model::ModelConfig& c = model_->config();
  const int64_t e = static_cast<int64_t>(c10::elementSize(model_->dtype()));
  const int64_t f32 = sizeof(float);
  const int64_t heads = c.num_heads;
  batching::SequenceCost cost;
  // Residual stream, q/k/v and their head views, attention output, two
  // feed-forward buffers, norms: about 10 widths and 2 feed-forward widths.
  cost.per_token = (10 * c.d_model + 2 * c.d_ff) * e;
  if (spec.want_tokens) cost.per_token += 2 * c.d_model * f32;
  if (const model::SparseHead* sparse = model_->sparse_head();
      spec.want_sparse && sparse != nullptr) {
    // The logits over the vocabulary (and their float32 copy); a
    // token-weight head's one weight per token and its vector over the
    // vocabulary, priced per token over the spec's tokens.
    const int64_t n = std::max<int64_t>(1, spec.token_ids.size());
    cost.per_token += sparse->kind == model::SparseHead::Kind::kTokenWeight
                          ? (e + f32) + (sparse->vocab() * f32 + n - 1) / n
                          : sparse->vocab() * (e + f32);
  }
  // Kept hidden states (at the model's dtype) and, unpooled, their stacked
  // float32 copy and its host copy.
  const int64_t states = static_cast<int64_t>(spec.hidden_layers.size());
  cost.per_token += states * c.d_model * e;
  if (!spec.pool_hidden) cost.per_token += 2 * states * c.d_model * f32;
  // One layer's scores, bias, mask sum and softmax output.
  int64_t pair = 5 * heads * e;
  if (const int64_t rows = c.content_bias_rows(); rows > 0) {
    // A content bias (disentangled attention): each term's products
    // against the position rows, then per pair the two gathered terms,
    // their sum and the per-head bias.
    cost.per_token += 2 * heads * rows * e;
    pair += 4 * heads * e;
  }
  if (c.arch.causal) pair += e;  // the [S, S] causal bias beside the mask
  const int64_t kept = spec.want_attention_stats
                           ? c.num_layers
                           : static_cast<int64_t>(spec.attention_layers.size());
  pair += kept * heads * e;
  if (spec.want_attention_stats) pair += 3 * heads * f32;  // their temporaries
  if (!spec.attention_layers.empty()) {
    const int64_t shown =
        spec.average_heads ? 1
        : spec.attention_heads.empty()
            ? heads
            : static_cast<int64_t>(spec.attention_heads.size());
    // The stacked maps and their host copy.
    pair +=
        2 * static_cast<int64_t>(spec.attention_layers.size()) * shown * f32;
  }
  cost.per_token_pair = pair;
  return cost;
}

batching::SequenceCost EncoderRunner::Compute(
    const api::EmbedSpec& spec) const {
  const model::ModelConfig& c = model_->config();
  const int64_t layers = c.num_layers;
  const int64_t d = c.d_model;
  const int64_t heads = c.num_heads;
  const int64_t ffn_matrices = c.arch.gated_ffn ? 3 : 2;
  const int64_t a = c.attention_dim(), kv = c.kv_dim();
  batching::SequenceCost compute;
  // q, k, v and output projections (4 d^2 unless the heads are wider or
  // grouped), and the feed-forward.
  compute.per_token =
      2 * layers * (d * (a + 2 * kv) + a * d + ffn_matrices * d * c.d_ff);
  if (const int64_t rows = c.content_bias_rows(); rows > 0) {
    // Each position term: every token's query or key against the rows.
    const int64_t terms = c.score_scale_factor() - 1;
    compute.per_token += 2 * layers * terms * rows * a;
  }
  if (spec.want_sparse && model_->sparse_head() != nullptr) {
    // The decoder onto the vocabulary (the transform is small beside it).
    compute.per_token += 2 * model_->sparse_head()->vocab() * d;
  }
  int64_t pair = layers * (4 * d + 16 * heads);
  const int64_t kept = spec.want_attention_stats
                           ? layers
                           : static_cast<int64_t>(spec.attention_layers.size());
  pair += kept * heads * 8;
  if (spec.want_attention_stats) pair += layers * heads * 512;
  compute.per_token_pair = pair;
  return compute;
}

api::EmbedSpec EncoderRunner::ProbeSpec(int64_t index, int64_t length) const {
  const int64_t span = std::max<int64_t>(model_->config().vocab_size - 1, 1);
  api::EmbedSpec spec;
  spec.token_ids.resize(length);
  for (int64_t t = 0; t < length; ++t) {
    spec.token_ids[t] = 1 + (index * 131 + t * 7) % span;
  }
  return spec;
}

absl::StatusOr<double> EncoderRunner::MeasureWorkRate() {
  const int64_t length = std::min<int64_t>(128, model_->config().max_length());
  const std::vector<api::EmbedSpec> specs = {ProbeSpec(0, length),
                                             ProbeSpec(1, length)};
  const std::vector<const api::EmbedSpec*> batch = {&specs[0], &specs[1]};
  double fastest = 0;
  for (int run = 0; run < 2; ++run) {
    std::vector<api::EmbedResult> results;
    const absl::Time start = absl::Now();
    RETURN_IF_ERROR(RunEmbed(batch, &results));
    const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
    if (run == 0 || seconds < fastest) fastest = seconds;
  }
  const double work = 2.0 * static_cast<double>(Compute(specs[0]).At(length));
  return work / std::max(fastest, 1e-6);
}

absl::Status EncoderRunner::RunProbeBatch(int64_t sequences, int64_t length) {
  length = std::min(length, model_->config().max_length());
  std::vector<api::EmbedSpec> specs;
  specs.reserve(static_cast<size_t>(sequences));
  for (int64_t i = 0; i < sequences; ++i) specs.push_back(ProbeSpec(i, length));
  std::vector<const api::EmbedSpec*> batch;
  for (const api::EmbedSpec& spec : specs) batch.push_back(&spec);
  std::vector<api::EmbedResult> results;
  return RunEmbed(batch, &results);
}

}  // namespace encoder::runner
