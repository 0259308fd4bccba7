#include "server/runner/encoder_runner.h"

#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <any>
#include <map>
#include <optional>
#include <set>

#include "absl/strings/str_cat.h"
#include "server/common/status_macros.h"
#include "server/diagnostics/diagnostics.h"
#include "server/model/torch_status.h"
#include "server/runner/thread_policy.h"

#ifdef ENCODER_WITH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace encoder::runner {
namespace {

std::vector<float> ToFloats(const at::Tensor& t) {
  at::Tensor c = t.to(at::kCPU, at::kFloat).contiguous();
  return std::vector<float>(c.data_ptr<float>(),
                            c.data_ptr<float>() + c.numel());
}

}  // namespace

// Per-runner device resources: its own CUDA stream, so that several model
// workers do not serialize on the default stream.
struct EncoderRunner::DeviceState {
#ifdef ENCODER_WITH_CUDA
  std::optional<c10::cuda::CUDAStream> stream;
#endif
};

EncoderRunner::EncoderRunner(const model::Encoder* model)
    : model_(model), device_state_(std::make_unique<DeviceState>()) {
#ifdef ENCODER_WITH_CUDA
  if (model_->device().is_cuda()) {
    device_state_->stream =
        c10::cuda::getStreamFromPool(false, model_->device().index());
  }
#endif
}

EncoderRunner::~EncoderRunner() = default;

absl::Status EncoderRunner::Run(
    const std::vector<const batching::BatchItem*>& batch,
    std::vector<batching::ItemResult>* results,
    const batching::RunContext& context) {
  std::vector<const api::EmbedSpec*> specs;
  specs.reserve(batch.size());
  for (const batching::BatchItem* item : batch) {
    const auto* spec = std::any_cast<api::EmbedSpec>(&item->work);
    if (spec == nullptr) {
      return absl::InvalidArgumentError(
          "a batch item for the encoder runner carries no api::EmbedSpec");
    }
    specs.push_back(spec);
  }
  std::vector<api::EmbedResult> embedded;
  RETURN_IF_ERROR(RunEmbed(specs, &embedded, context));
  results->clear();
  results->reserve(embedded.size());
  for (api::EmbedResult& r : embedded) {
    batching::ItemResult item;
    item.bytes = r.ValueBytes();
    item.output = std::move(r);
    results->push_back(std::move(item));
  }
  return absl::OkStatus();
}

absl::Status EncoderRunner::RunEmbed(
    const std::vector<const api::EmbedSpec*>& batch,
    std::vector<api::EmbedResult>* results,
    const batching::RunContext& context) {
  absl::Status status;
  try {
#ifdef ENCODER_WITH_CUDA
    std::optional<c10::cuda::CUDAStreamGuard> guard;
    if (device_state_->stream) guard.emplace(*device_state_->stream);
#endif
    // Batches running side by side split the intra-op and OpenBLAS threads;
    // a small one runs on one thread.
    int64_t work = 0;
    for (const api::EmbedSpec* spec : batch) {
      work = batching::AddSaturating(
          work,
          Compute(*spec).At(static_cast<int64_t>(spec->token_ids.size())));
    }
    const ThreadShare share(/*counts=*/!model_->device().is_cuda(),
                            static_cast<double>(work));
    status = share.Run([&] { return RunImpl(batch, results, context); });
  } catch (const c10::Error& e) {
    status = model::StatusFromTorchError(
        e, absl::StrCat("a batch of ", batch.size(), " sequences"));
  }
#ifdef ENCODER_WITH_CUDA
  // Out of memory: give the cached blocks back so the next batch can run.
  if (status.code() == absl::StatusCode::kResourceExhausted &&
      model_->device().is_cuda()) {
    c10::cuda::CUDACachingAllocator::emptyCache();
  }
#endif
  return status;
}

namespace {

// One padded batch: ids and key-padding mask on the host (pinned for a GPU
// model) or on the device, and the layers whose attention and hidden
// states any sequence asks for (all layers' attention for statistics).
struct PaddedBatch {
  model::EncoderInput input;
  model::ForwardOptions options;
};

PaddedBatch PadBatch(const std::vector<const api::EmbedSpec*>& batch,
                     const model::Encoder& model) {
  const int64_t b = static_cast<int64_t>(batch.size());
  int64_t longest = 0;
  for (const api::EmbedSpec* spec : batch) {
    longest = std::max<int64_t>(longest, spec->token_ids.size());
  }
  const bool cuda = model.device().is_cuda();
  auto host = at::TensorOptions().pinned_memory(cuda);
  PaddedBatch padded;
  model::EncoderInput& input = padded.input;
  input.ids = at::zeros({b, longest}, host.dtype(at::kLong));
  input.mask = at::zeros({b, longest}, host.dtype(at::kBool));
  int64_t* ids = input.ids.data_ptr<int64_t>();
  bool* mask = input.mask.data_ptr<bool>();
  const bool any_types = std::any_of(
      batch.begin(), batch.end(),
      [](const api::EmbedSpec* spec) { return !spec->type_ids.empty(); });
  if (any_types) input.types = at::zeros({b, longest}, host.dtype(at::kLong));
  std::set<int64_t> layers;
  std::set<int64_t> hidden_layers;
  bool any_stats = false;
  for (int64_t i = 0; i < b; ++i) {
    const std::vector<int64_t>& t = batch[i]->token_ids;
    std::copy(t.begin(), t.end(), ids + i * longest);
    const std::vector<int64_t>& types = batch[i]->type_ids;
    if (!types.empty()) {
      std::copy(types.begin(), types.end(),
                input.types.data_ptr<int64_t>() + i * longest);
    }
    std::fill(mask + i * longest, mask + i * longest + t.size(), true);
    layers.insert(batch[i]->attention_layers.begin(),
                  batch[i]->attention_layers.end());
    any_stats |= batch[i]->want_attention_stats;
    hidden_layers.insert(batch[i]->hidden_layers.begin(),
                         batch[i]->hidden_layers.end());
  }
  // Tokens computed but never attended (EmbedSpec::attended_tokens).
  for (int64_t i = 0; i < b; ++i) {
    const int64_t n = static_cast<int64_t>(batch[i]->token_ids.size());
    const int64_t attended = batch[i]->attended_tokens;
    if (attended <= 0 || attended >= n) continue;
    if (!input.keys.defined()) input.keys = input.mask.clone();
    bool* keys = input.keys.data_ptr<bool>() + i * longest;
    std::fill(keys + attended, keys + n, false);
  }
  if (cuda) {
    input.ids = input.ids.to(model.device(), /*non_blocking=*/true);
    input.mask = input.mask.to(model.device(), /*non_blocking=*/true);
    if (input.keys.defined()) {
      input.keys = input.keys.to(model.device(), /*non_blocking=*/true);
    }
    if (any_types) {
      input.types = input.types.to(model.device(), /*non_blocking=*/true);
    }
  }
  if (any_stats) {
    for (int64_t l = 0; l < model.config().num_layers; ++l) layers.insert(l);
  }
  padded.options.attention_layers.assign(layers.begin(), layers.end());
  padded.options.hidden_layers.assign(hidden_layers.begin(),
                                      hidden_layers.end());
  return padded;
}

// Every row's pooled output on the host as float32 [B, pooled_dim]: each
// pooling mode present once for the whole batch, then each row's choice,
// One sequence's real tokens [n, D] pooled with its first `skip` tokens
// left out, as sentence-transformers pools without a prompt: mean, max and
// weighted mean (weights still counted from the first token) over the rest,
// the first token after them, the last token as ever.
at::Tensor PoolSkipping(const at::Tensor& tokens, model::Pooling pooling,
                        int64_t skip) {
  const int64_t n = tokens.size(0);
  if (pooling == model::Pooling::kFirst) return tokens[skip];
  if (pooling == model::Pooling::kLastToken) return tokens[n - 1];
  at::Tensor mask = at::ones({1, n}, tokens.options().dtype(at::kBool));
  mask.narrow(1, 0, skip).fill_(false);
  return model::Pool(tokens.unsqueeze(0), mask, pooling,
                     /*normalize=*/false)[0];
}

// Each of `spec`'s pool_spans of row `i` pooled with its pooling and
// projected by the model's dense layers: [spans, pooled_dim] on the CPU.
std::vector<float> PoolSpans(const api::EmbedSpec& spec, int64_t i,
                             const model::Encoder& model,
                             const at::Tensor& tokens) {
  std::vector<at::Tensor> rows;
  rows.reserve(spec.pool_spans.size());
  for (const auto& [begin, end] : spec.pool_spans) {
    const at::Tensor span = tokens[i].narrow(0, begin, end - begin);
    if (spec.pooling == model::Pooling::kFirst) {
      rows.push_back(span[0]);
    } else if (spec.pooling == model::Pooling::kLastToken) {
      rows.push_back(span[end - begin - 1]);
    } else {
      const at::Tensor mask =
          at::ones({1, end - begin}, span.options().dtype(at::kBool));
      rows.push_back(model::Pool(span.unsqueeze(0), mask, spec.pooling,
                                 /*normalize=*/false)[0]);
    }
  }
  return ToFloats(model.ProjectPooled(at::stack(rows)));
}

// the model's dense layers, normalization where asked, one copy. The rows
// that want scores also go through the classification head (before the
// dense layers): `scores` [rows, labels] on the host, in batch order.
struct PooledBatch {
  at::Tensor pooled;
  at::Tensor scores;
  std::vector<int64_t> score_rows;
};

PooledBatch PoolBatch(const std::vector<const api::EmbedSpec*>& batch,
                      const model::Encoder& model, const at::Tensor& tokens,
                      const at::Tensor& mask) {
  PooledBatch out;
  const at::Tensor mask_dev = mask.to(model.device());
  std::map<model::Pooling, std::vector<int64_t>> by_mode;
  std::vector<int64_t> normalize_rows;
  for (int64_t i = 0; i < static_cast<int64_t>(batch.size()); ++i) {
    by_mode[batch[i]->pooling].push_back(i);
    if (batch[i]->normalize) normalize_rows.push_back(i);
    if (batch[i]->want_scores) out.score_rows.push_back(i);
  }
  auto rows = [&](const std::vector<int64_t>& v) {
    return at::tensor(v, at::kLong).to(model.device());
  };
  at::Tensor pooled;
  for (const auto& [mode, members] : by_mode) {
    at::Tensor all = model::Pool(tokens, mask_dev, mode,
                                 /*normalize=*/false);
    if (!pooled.defined()) {
      pooled = all.clone();  // kFirst pools to a view of the tokens
    } else {
      at::Tensor index = rows(members);
      pooled.index_copy_(0, index, all.index_select(0, index));
    }
  }
  for (int64_t i = 0; i < static_cast<int64_t>(batch.size()); ++i) {
    const api::EmbedSpec& spec = *batch[i];
    if (spec.pool_skip <= 0) continue;
    const int64_t n = static_cast<int64_t>(spec.token_ids.size());
    pooled[i].copy_(
        PoolSkipping(tokens[i].narrow(0, 0, n), spec.pooling, spec.pool_skip));
  }
  if (!out.score_rows.empty()) {
    out.scores = model.Score(pooled.index_select(0, rows(out.score_rows)))
                     .to(at::kCPU, at::kFloat)
                     .contiguous();
  }
  pooled = model.ProjectPooled(pooled);
  if (!normalize_rows.empty()) {
    at::Tensor index = rows(normalize_rows);
    at::Tensor picked = pooled.index_select(0, index);
    pooled.index_copy_(
        0, index,
        picked / picked.norm(2, {-1}, /*keepdim=*/true).clamp_min(1e-12));
  }
  out.pooled = pooled.to(at::kCPU, at::kFloat).contiguous();
  return out;
}

// One sequence's sparse weights [vocab] -> the entries `spec` keeps, in
// index order.
void KeepSparse(const at::Tensor& weights, const api::EmbedSpec& spec,
                api::EmbedResult* r) {
  at::Tensor w = weights.to(at::kCPU).contiguous();
  at::Tensor index;
  if (spec.sparse_top_k > 0 && spec.sparse_top_k < w.size(0)) {
    index = std::get<1>(w.topk(spec.sparse_top_k));
    index =
        index.masked_select(w.index_select(0, index) > spec.sparse_threshold);
    index = std::get<0>(index.sort());
  } else {
    index = (w > spec.sparse_threshold).nonzero().squeeze(1);
  }
  const at::Tensor values = w.index_select(0, index).contiguous();
  const at::Tensor ids = index.to(at::kInt).contiguous();
  r->sparse_indices.assign(ids.data_ptr<int32_t>(),
                           ids.data_ptr<int32_t>() + ids.numel());
  r->sparse_values.assign(values.data_ptr<float>(),
                          values.data_ptr<float>() + values.numel());
}

// Row `i`'s token embeddings, attention maps, hidden states and attention
// statistics, as `spec` asks, cut to its real length; asks `context`
// before each layer's statistics.
absl::Status SliceSequence(const api::EmbedSpec& spec, int64_t i,
                           const model::EncoderOutput& out,
                           const model::Encoder& model,
                           const batching::RunContext& context,
                           api::EmbedResult* r) {
  const int64_t num_layers = model.config().num_layers;
  const int64_t n = static_cast<int64_t>(spec.token_ids.size());
  if (spec.want_tokens) {
    at::Tensor t = out.tokens[i].narrow(0, 0, n);
    if (spec.project_tokens) {
      t = model.ProjectTokens(t);
      r->dim = t.size(1);
    }
    r->tokens = ToFloats(t);
  }
  if (!spec.attention_layers.empty()) {
    std::vector<at::Tensor> maps;
    for (int64_t l : spec.attention_layers) {
      at::Tensor m = out.attention.at(l)[i].narrow(1, 0, n).narrow(2, 0, n);
      if (!spec.attention_heads.empty()) {
        m = m.index_select(
            0, at::tensor(spec.attention_heads, at::kLong).to(m.device()));
      }
      maps.push_back(spec.average_heads ? m.mean(0) : m);
    }
    at::Tensor stacked = at::stack(maps);
    r->attention_shape.assign(stacked.sizes().begin(), stacked.sizes().end());
    r->attention = ToFloats(stacked);
  }
  if (!spec.hidden_layers.empty()) {
    std::vector<at::Tensor> states;
    for (int64_t l : spec.hidden_layers) {
      at::Tensor h = out.hidden.at(l)[i].narrow(0, 0, n);  // [n, D]
      if (spec.pool_hidden) {
        h = spec.pool_skip > 0
                ? PoolSkipping(h, spec.pooling, spec.pool_skip)
                : model::Pool(h.unsqueeze(0),
                              at::ones({1, n}, h.options().dtype(at::kBool)),
                              spec.pooling, /*normalize=*/false)[0];
      }
      states.push_back(h);
    }
    at::Tensor stacked = at::stack(states);
    r->hidden_shape.assign(stacked.sizes().begin(), stacked.sizes().end());
    r->hidden = ToFloats(stacked);
  }
  if (spec.want_attention_stats) {
    for (int64_t l = 0; l < num_layers; ++l) {
      RETURN_IF_ERROR(context.Check());
      at::Tensor m = out.attention.at(l)[i].narrow(1, 0, n).narrow(2, 0, n);
      const std::vector<AttentionHeadStats> heads =
          diagnostics::ComputeHeadStats(m, l);
      r->attention_stats.insert(r->attention_stats.end(), heads.begin(),
                                heads.end());
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status EncoderRunner::RunImpl(
    const std::vector<const api::EmbedSpec*>& batch,
    std::vector<api::EmbedResult>* results,
    const batching::RunContext& context) {
  c10::InferenceMode guard;
  PaddedBatch padded = PadBatch(batch, *model_);
  padded.options.skip_padding_min_share = skip_padding_min_share_;
  padded.options.fused_attention = fused_attention_;
  padded.options.should_stop = context.should_stop;
  ASSIGN_OR_RETURN(auto out, model_->Forward(padded.input, padded.options));
  const PooledBatch pooled_batch =
      PoolBatch(batch, *model_, out.tokens, padded.input.mask);
  const at::Tensor& pooled = pooled_batch.pooled;
  const int64_t b = static_cast<int64_t>(batch.size());
  const int64_t pooled_dim = pooled.size(1);
  results->assign(b, api::EmbedResult{});
  for (int64_t i = 0; i < b; ++i) {
    api::EmbedResult& r = (*results)[i];
    const float* row = pooled.data_ptr<float>() + i * pooled_dim;
    r.pooled.assign(row, row + pooled_dim);
    r.num_tokens = static_cast<int64_t>(batch[i]->token_ids.size());
    r.dim = model_->config().d_model;
    r.pooled_dim = pooled_dim;
    if (batch[i]->want_scores) {
      const auto it = std::lower_bound(pooled_batch.score_rows.begin(),
                                       pooled_batch.score_rows.end(), i);
      const int64_t k = it - pooled_batch.score_rows.begin();
      const int64_t labels = pooled_batch.scores.size(1);
      const float* s = pooled_batch.scores.data_ptr<float>() + k * labels;
      r.scores.assign(s, s + labels);
    }
    if (batch[i]->want_sparse) {
      RETURN_IF_ERROR(context.Check());
      KeepSparse(model_->SparseWeights(out.tokens[i].narrow(0, 0, r.num_tokens),
                                       batch[i]->token_ids),
                 *batch[i], &r);
    }
    if (!batch[i]->pool_spans.empty()) {
      r.span_pooled = PoolSpans(*batch[i], i, *model_, out.tokens);
    }
    RETURN_IF_ERROR(SliceSequence(*batch[i], i, out, *model_, context, &r));
  }
  return absl::OkStatus();
}

absl::Status EncoderRunner::WarmUp() {
  api::EmbedSpec spec;
  spec.token_ids = {1, 5, 6, 7, 2};
  spec.want_tokens = true;
  std::vector<api::EmbedResult> results;
  return RunEmbed({&spec}, &results);
}

}  // namespace encoder::runner
