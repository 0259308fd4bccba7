#include "server/runner/encoder_runner.h"

#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "server/common/status_macros.h"
#include "server/diagnostics/diagnostics.h"
#include "server/model/torch_status.h"

#ifdef ENCODER_WITH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace encoder::runner {
namespace {

using batching::SequenceResult;
using batching::SequenceSpec;

std::vector<float> ToFloats(const at::Tensor& t) {
  at::Tensor c = t.to(at::kCPU, at::kFloat).contiguous();
  return std::vector<float>(c.data_ptr<float>(),
                            c.data_ptr<float>() + c.numel());
}

model::Pooling ToModelPooling(batching::PoolingMode mode) {
  switch (mode) {
    case batching::PoolingMode::kMean:
      return model::Pooling::kMean;
    case batching::PoolingMode::kFirst:
      return model::Pooling::kFirst;
    case batching::PoolingMode::kMax:
      return model::Pooling::kMax;
    case batching::PoolingMode::kLastToken:
      return model::Pooling::kLastToken;
    case batching::PoolingMode::kWeightedMean:
      return model::Pooling::kWeightedMean;
  }
  return model::Pooling::kMean;
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

absl::Status EncoderRunner::Run(const std::vector<const SequenceSpec*>& batch,
                                std::vector<SequenceResult>* results) {
  absl::Status status;
  try {
#ifdef ENCODER_WITH_CUDA
    std::optional<c10::cuda::CUDAStreamGuard> guard;
    if (device_state_->stream) guard.emplace(*device_state_->stream);
#endif
    status = RunImpl(batch, results);
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

absl::Status EncoderRunner::RunImpl(
    const std::vector<const SequenceSpec*>& batch,
    std::vector<SequenceResult>* results) {
  c10::InferenceMode guard;
  const int64_t b = static_cast<int64_t>(batch.size());
  int64_t longest = 0;
  for (const SequenceSpec* spec : batch) {
    longest = std::max<int64_t>(longest, spec->token_ids.size());
  }
  // Host tensors (pinned when the model is on a GPU, for async copies).
  const bool cuda = model_->device().is_cuda();
  auto host = at::TensorOptions().pinned_memory(cuda);
  model::EncoderInput input;
  input.ids = at::zeros({b, longest}, host.dtype(at::kLong));
  input.mask = at::zeros({b, longest}, host.dtype(at::kBool));
  int64_t* ids = input.ids.data_ptr<int64_t>();
  bool* mask = input.mask.data_ptr<bool>();
  std::set<int64_t> layers;
  std::set<int64_t> hidden_layers;
  bool any_stats = false;
  for (int64_t i = 0; i < b; ++i) {
    const std::vector<int64_t>& t = batch[i]->token_ids;
    std::copy(t.begin(), t.end(), ids + i * longest);
    std::fill(mask + i * longest, mask + i * longest + t.size(), true);
    layers.insert(batch[i]->attention_layers.begin(),
                  batch[i]->attention_layers.end());
    any_stats |= batch[i]->want_attention_stats;
    hidden_layers.insert(batch[i]->hidden_layers.begin(),
                         batch[i]->hidden_layers.end());
  }
  if (cuda) {
    input.ids = input.ids.to(model_->device(), /*non_blocking=*/true);
    input.mask = input.mask.to(model_->device(), /*non_blocking=*/true);
  }
  const int64_t num_layers = model_->config().num_layers;
  if (any_stats) {
    for (int64_t l = 0; l < num_layers; ++l) layers.insert(l);
  }
  model::ForwardOptions options;
  options.attention_layers.assign(layers.begin(), layers.end());
  options.hidden_layers.assign(hidden_layers.begin(), hidden_layers.end());
  ASSIGN_OR_RETURN(auto out, model_->Forward(input, options));

  // Pooling for the whole batch at once (each mode present, then each
  // row's choice), the dense layers, normalization, one copy to the host.
  const at::Tensor mask_dev = input.mask.to(model_->device());
  std::map<batching::PoolingMode, std::vector<int64_t>> by_mode;
  std::vector<int64_t> normalize_rows;
  for (int64_t i = 0; i < b; ++i) {
    by_mode[batch[i]->pooling].push_back(i);
    if (batch[i]->normalize) normalize_rows.push_back(i);
  }
  auto rows = [&](const std::vector<int64_t>& v) {
    return at::tensor(v, at::kLong).to(model_->device());
  };
  at::Tensor pooled;
  for (const auto& [mode, members] : by_mode) {
    at::Tensor all = model::Pool(out.tokens, mask_dev, ToModelPooling(mode),
                                 /*normalize=*/false);
    if (!pooled.defined()) {
      pooled = all.clone();  // kFirst pools to a view of the tokens
    } else {
      at::Tensor index = rows(members);
      pooled.index_copy_(0, index, all.index_select(0, index));
    }
  }
  pooled = model_->ProjectPooled(pooled);
  if (!normalize_rows.empty()) {
    at::Tensor index = rows(normalize_rows);
    at::Tensor picked = pooled.index_select(0, index);
    pooled.index_copy_(
        0, index,
        picked / picked.norm(2, {-1}, /*keepdim=*/true).clamp_min(1e-12));
  }
  const at::Tensor pooled_host = pooled.to(at::kCPU, at::kFloat).contiguous();
  const int64_t dim = model_->config().d_model;
  const int64_t pooled_dim = pooled_host.size(1);
  results->assign(b, SequenceResult{});
  for (int64_t i = 0; i < b; ++i) {
    const SequenceSpec& spec = *batch[i];
    SequenceResult& r = (*results)[i];
    const int64_t n = static_cast<int64_t>(spec.token_ids.size());
    const float* row = pooled_host.data_ptr<float>() + i * pooled_dim;
    r.pooled.assign(row, row + pooled_dim);
    r.num_tokens = n;
    r.dim = dim;
    r.pooled_dim = pooled_dim;
    if (spec.want_tokens) r.tokens = ToFloats(out.tokens[i].narrow(0, 0, n));
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
      r.attention_shape.assign(stacked.sizes().begin(), stacked.sizes().end());
      r.attention = ToFloats(stacked);
    }
    if (!spec.hidden_layers.empty()) {
      std::vector<at::Tensor> states;
      for (int64_t l : spec.hidden_layers) {
        at::Tensor h = out.hidden.at(l)[i].narrow(0, 0, n);  // [n, D]
        if (spec.pool_hidden) {
          h = model::Pool(h.unsqueeze(0),
                          at::ones({1, n}, h.options().dtype(at::kBool)),
                          ToModelPooling(spec.pooling), /*normalize=*/false)[0];
        }
        states.push_back(h);
      }
      at::Tensor stacked = at::stack(states);
      r.hidden_shape.assign(stacked.sizes().begin(), stacked.sizes().end());
      r.hidden = ToFloats(stacked);
    }
    if (spec.want_attention_stats) {
      for (int64_t l = 0; l < num_layers; ++l) {
        at::Tensor m = out.attention.at(l)[i].narrow(1, 0, n).narrow(2, 0, n);
        const std::vector<AttentionHeadStats> heads =
            diagnostics::ComputeHeadStats(m, l);
        r.attention_stats.insert(r.attention_stats.end(), heads.begin(),
                                 heads.end());
      }
    }
  }
  return absl::OkStatus();
}

batching::SequenceCost EncoderRunner::Price(const SequenceSpec& spec) const {
  const model::ModelConfig& c = model_->config();
  const int64_t e = static_cast<int64_t>(c10::elementSize(model_->dtype()));
  const int64_t f32 = sizeof(float);
  const int64_t heads = c.num_heads;
  batching::SequenceCost cost;
  // Residual stream, q/k/v and their head views, attention output, two
  // feed-forward buffers, norms: about 10 widths and 2 feed-forward widths.
  cost.per_token = (10 * c.d_model + 2 * c.d_ff) * e;
  if (spec.want_tokens) cost.per_token += 2 * c.d_model * f32;
  // Kept hidden states (at the model's dtype) and, unpooled, their stacked
  // float32 copy and its host copy.
  const int64_t states = static_cast<int64_t>(spec.hidden_layers.size());
  cost.per_token += states * c.d_model * e;
  if (!spec.pool_hidden) cost.per_token += 2 * states * c.d_model * f32;
  // One layer's scores, bias, mask sum and softmax output.
  int64_t pair = 5 * heads * e;
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

absl::Status EncoderRunner::WarmUp() {
  SequenceSpec spec;
  spec.token_ids = {1, 5, 6, 7, 2};
  spec.want_tokens = true;
  std::vector<SequenceResult> results;
  return Run({&spec}, &results);
}

}  // namespace encoder::runner
