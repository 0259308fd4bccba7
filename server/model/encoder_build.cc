// Encoder construction: the expected state_dict for a config, deterministic
// random weights, and checked loading of a state_dict onto a device.
#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <array>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/common/status_macros.h"
#include "server/model/encoder.h"
#include "server/model/kernels/bf16_attention.h"
#include "server/model/torch_status.h"

namespace encoder::model {
namespace {

std::string ShapeString(at::IntArrayRef shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

std::string LayerName(int64_t i, const char* leaf) {
  return absl::StrCat("encoder.layers.", i, ".", leaf);
}

bool NormHasBias(const ModelConfig& c) {
  return c.arch.norm == NormKind::kLayerNorm && c.arch.norm_bias;
}

void AddNorm(const ModelConfig& c, const std::string& prefix,
             std::map<std::string, std::vector<int64_t>>* shapes) {
  (*shapes)[prefix + ".weight"] = {c.d_model};
  if (NormHasBias(c)) (*shapes)[prefix + ".bias"] = {c.d_model};
}

}  // namespace

std::map<std::string, std::vector<int64_t>> Encoder::ExpectedShapes(
    const ModelConfig& c) {
  const int64_t d = c.d_model, f = c.d_ff, a = c.attention_dim();
  const int64_t kv = c.kv_dim();
  const int64_t f_in = c.arch.gated_ffn ? 2 * f : f;
  std::map<std::string, std::vector<int64_t>> shapes = {
      {"embedding.weight", {c.vocab_size, d}}};
  if (c.arch.token_type_embedding) {
    shapes["token_type_embedding.weight"] = {c.arch.type_vocab_size, d};
  }
  if (c.arch.embedding_norm) AddNorm(c, "embedding_norm", &shapes);
  for (int64_t i = 0; i < c.num_layers; ++i) {
    shapes[LayerName(i, "self_attn.in_proj_weight")] = {a + 2 * kv, d};
    shapes[LayerName(i, "self_attn.out_proj.weight")] = {d, a};
    if (c.arch.attention_bias) {
      shapes[LayerName(i, "self_attn.in_proj_bias")] = {a + 2 * kv};
      if (c.arch.attention_out_bias) {
        shapes[LayerName(i, "self_attn.out_proj.bias")] = {d};
      }
    }
    if (c.arch.qk_norm) {
      shapes[LayerName(i, "self_attn.q_norm.weight")] = {c.head_dim()};
      shapes[LayerName(i, "self_attn.k_norm.weight")] = {c.head_dim()};
    }
    shapes[LayerName(i, "linear1.weight")] = {f_in, d};
    shapes[LayerName(i, "linear2.weight")] = {d, f};
    if (c.arch.ffn_in_bias) shapes[LayerName(i, "linear1.bias")] = {f_in};
    if (c.arch.ffn_out_bias) shapes[LayerName(i, "linear2.bias")] = {d};
    if (i > 0 || c.arch.first_layer_attention_norm) {
      AddNorm(c, LayerName(i, "norm1"), &shapes);
    }
    AddNorm(c, LayerName(i, "norm2"), &shapes);
    if (c.arch.sandwich_norm) {
      AddNorm(c, LayerName(i, "norm3"), &shapes);
      AddNorm(c, LayerName(i, "norm4"), &shapes);
    }
  }
  if (c.norm_first) AddNorm(c, "encoder.norm", &shapes);
  for (auto& [name, shape] : SchemeParameterShapes(c)) shapes[name] = shape;
  return shapes;
}

std::map<std::string, at::Tensor> Encoder::RandomStateDict(
    const ModelConfig& config, uint64_t seed) {
  at::Generator gen = at::detail::createCPUGenerator(seed);
  std::map<std::string, at::Tensor> dict;
  // Names are visited in sorted order, so the draw order is fixed.
  for (const auto& [name, shape] : ExpectedShapes(config)) {
    const bool is_norm = name.find("norm") != std::string::npos;
    const bool is_bias = name.size() >= 4 &&
                         name.compare(name.size() - 4, 4, "bias") == 0 &&
                         name != "relative_attention_bias.weight";
    at::Tensor t;
    if (is_norm) {
      t = is_bias ? at::zeros(shape) : at::ones(shape);
    } else if (is_bias) {
      t = at::zeros(shape);
    } else if (shape.size() == 2 && name.find("encoder.") == 0) {
      // Linear weights [out, in]: std 1/sqrt(fan_in) keeps activations O(1).
      const double std = 1.0 / std::sqrt(static_cast<double>(shape[1]));
      t = at::normal(0.0, std, shape, gen);
    } else {
      // Embedding tables and the relative bias table: N(0, 1), as
      // nn.Embedding initializes them.
      t = at::normal(0.0, 1.0, shape, gen);
    }
    dict[name] = t;
  }
  return dict;
}

Encoder::Encoder(ModelConfig config, at::Device device, at::ScalarType dtype)
    : config_(std::move(config)), device_(device), dtype_(dtype) {
  // A bfloat16 CPU model starts at SetBf16Attention("auto").
  bf16_attention_ = device_.is_cpu() && dtype_ == at::kBFloat16 &&
                    Bf16AttentionByDefault(config_.head_dim());
}

absl::StatusOr<std::unique_ptr<Encoder>> Encoder::Create(
    const ModelConfig& config,
    const std::map<std::string, at::Tensor>& state_dict, at::Device device,
    at::ScalarType dtype) {
  RETURN_IF_ERROR(ValidateConfig(config));
  const auto expected = ExpectedShapes(config);
  for (const auto& [name, tensor] : state_dict) {
    if (expected.count(name) == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("unexpected tensor \"", name, "\" for this config"));
    }
  }
  for (const auto& [name, shape] : expected) {
    auto it = state_dict.find(name);
    if (it == state_dict.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "missing tensor \"", name, "\" (shape ", ShapeString(shape), ")"));
    }
    if (it->second.sizes() != at::IntArrayRef(shape)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tensor \"", name, "\" has shape ", ShapeString(it->second.sizes()),
          ", config needs ", ShapeString(shape)));
    }
    if (!at::isFloatingType(it->second.scalar_type())) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor \"", name, "\" has dtype ",
                       c10::toString(it->second.scalar_type()),
                       ", a floating-point dtype is needed"));
    }
  }
  try {
    std::unique_ptr<Encoder> enc(new Encoder(config, device, dtype));
    // Optional tensors (absent from `expected`) stay undefined.
    auto get = [&](const std::string& name) -> at::Tensor {
      auto it = state_dict.find(name);
      if (it == state_dict.end()) return {};
      return it->second.to(device, dtype).contiguous();
    };
    enc->embedding_ = get("embedding.weight");
    enc->token_type_ = get("token_type_embedding.weight");
    enc->embedding_norm_weight_ = get("embedding_norm.weight");
    enc->embedding_norm_bias_ = get("embedding_norm.bias");
    for (int64_t i = 0; i < config.num_layers; ++i) {
      LayerWeights w;
      w.in_proj_weight = get(LayerName(i, "self_attn.in_proj_weight"));
      w.in_proj_bias = get(LayerName(i, "self_attn.in_proj_bias"));
      w.out_proj_weight = get(LayerName(i, "self_attn.out_proj.weight"));
      w.out_proj_bias = get(LayerName(i, "self_attn.out_proj.bias"));
      w.linear1_weight = get(LayerName(i, "linear1.weight"));
      w.linear1_bias = get(LayerName(i, "linear1.bias"));
      w.linear2_weight = get(LayerName(i, "linear2.weight"));
      w.linear2_bias = get(LayerName(i, "linear2.bias"));
      w.norm1_weight = get(LayerName(i, "norm1.weight"));
      w.norm1_bias = get(LayerName(i, "norm1.bias"));
      w.norm2_weight = get(LayerName(i, "norm2.weight"));
      w.norm2_bias = get(LayerName(i, "norm2.bias"));
      w.norm3_weight = get(LayerName(i, "norm3.weight"));
      w.norm4_weight = get(LayerName(i, "norm4.weight"));
      w.q_norm_weight = get(LayerName(i, "self_attn.q_norm.weight"));
      w.k_norm_weight = get(LayerName(i, "self_attn.k_norm.weight"));
      enc->layers_.push_back(std::move(w));
    }
    if (config.norm_first) {
      enc->final_norm_weight_ = get("encoder.norm.weight");
      enc->final_norm_bias_ = get("encoder.norm.bias");
    }
    ASSIGN_OR_RETURN(auto scheme,
                     MakePositionalScheme(config, state_dict, device, dtype));
    enc->scheme_ = std::move(scheme);
    return enc;
  } catch (const c10::Error& e) {
    return StatusFromTorchError(e, "building the encoder");
  }
}

namespace {

void MoveDense(at::Device device, at::ScalarType dtype,
               std::vector<DenseLayer>* layers) {
  for (DenseLayer& layer : *layers) {
    if (layer.weight.defined()) {
      layer.weight = layer.weight.to(device, dtype).contiguous();
    }
    for (at::Tensor* t : {&layer.bias, &layer.norm_weight, &layer.norm_bias}) {
      if (t->defined()) *t = t->to(device, dtype);
    }
  }
}

at::Tensor RunDense(const std::vector<DenseLayer>& layers, at::Tensor x) {
  for (const DenseLayer& layer : layers) {
    if (layer.weight.defined()) x = at::linear(x, layer.weight, layer.bias);
    switch (layer.act) {
      case DenseLayer::Act::kIdentity:
        break;
      case DenseLayer::Act::kTanh:
        x = at::tanh(x);
        break;
      case DenseLayer::Act::kRelu:
        x = at::relu(x);
        break;
      case DenseLayer::Act::kGelu:
        x = at::gelu(x);
        break;
      case DenseLayer::Act::kSigmoid:
        x = at::sigmoid(x);
        break;
    }
    if (layer.norm_weight.defined()) {
      x = at::layer_norm(x, {x.size(-1)}, layer.norm_weight, layer.norm_bias,
                         layer.norm_eps);
    }
  }
  return x;
}

}  // namespace

void Encoder::set_output_dense(std::vector<DenseLayer> dense) {
  MoveDense(device_, dtype_, &dense);
  dense_ = std::move(dense);
}

at::Tensor Encoder::ProjectPooled(const at::Tensor& pooled) const {
  return RunDense(dense_, pooled);
}

void Encoder::set_token_dense(std::vector<DenseLayer> dense, bool normalize,
                              bool skip_first) {
  MoveDense(device_, dtype_, &dense);
  token_dense_ = std::move(dense);
  normalize_tokens_ = normalize;
  skip_first_token_ = skip_first;
}

at::Tensor Encoder::ProjectTokens(const at::Tensor& tokens) const {
  const int64_t skip = skip_first_token_ && tokens.size(0) > 0 ? 1 : 0;
  at::Tensor x =
      RunDense(token_dense_, tokens.narrow(0, skip, tokens.size(0) - skip));
  if (normalize_tokens_) {
    x = x / x.norm(2, {-1}, /*keepdim=*/true).clamp_min(1e-12);
  }
  return x;
}

void Encoder::set_score_head(ScoreHead head) {
  MoveDense(device_, dtype_, &head.layers);
  score_head_ = std::move(head);
}

at::Tensor Encoder::Score(const at::Tensor& pooled) const {
  return RunDense(score_head_->layers, pooled);
}

absl::Status Encoder::set_sparse_head(SparseHead head) {
  if (head.layers.empty()) {
    return absl::InvalidArgumentError("the sparse head has no layers");
  }
  if (head.kind == SparseHead::Kind::kTokenWeight) {
    const DenseLayer& layer = head.layers[0];
    if (head.layers.size() != 1 || !layer.weight.defined() ||
        layer.weight.sizes() != at::IntArrayRef({1, config_.d_model}) ||
        head.token_vocab <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "a token-weight sparse head is one projection [1, ", config_.d_model,
          "] onto a vocabulary of at least one entry"));
    }
    for (int64_t id : head.dropped_ids) {
      if (id < 0 || id >= head.token_vocab) {
        return absl::InvalidArgumentError(
            absl::StrCat("the sparse head drops id ", id,
                         ", outside its vocabulary of ", head.token_vocab));
      }
    }
    MoveDense(device_, dtype_, &head.layers);
    sparse_head_ = std::move(head);
    return absl::OkStatus();
  }
  DenseLayer& decoder = head.layers.back();
  const bool tied = !decoder.weight.defined();
  if (tied) decoder.weight = at::zeros({0}, embedding_.options());
  MoveDense(device_, dtype_, &head.layers);
  if (tied) {
    const int64_t width =
        head.layers.size() > 1
            ? head.layers[head.layers.size() - 2].weight.size(0)
            : config_.d_model;
    if (embedding_.size(1) != width) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the sparse head's decoder is tied to the token embeddings [",
          embedding_.size(0), ", ", embedding_.size(1),
          "], which do not take its input width ", width));
    }
    decoder.weight = embedding_;  // shared, not copied
  }
  if (decoder.bias.defined() &&
      decoder.bias.size(0) != decoder.weight.size(0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the sparse head's decoder bias has ", decoder.bias.size(0),
        " values for a vocabulary of ", decoder.weight.size(0)));
  }
  sparse_head_ = std::move(head);
  return absl::OkStatus();
}

at::Tensor Encoder::SparseWeights(const at::Tensor& tokens,
                                  const std::vector<int64_t>& ids) const {
  if (sparse_head_->kind == SparseHead::Kind::kTokenWeight) {
    // relu(w . h + b) per token, each into its id's place, the largest
    // where an id repeats (scatter_reduce's amax over zeros keeps the
    // weights above 0, which are all FlagEmbedding keeps).
    at::Tensor w = RunDense(sparse_head_->layers, tokens)
                       .to(at::kFloat)
                       .relu()
                       .reshape({-1});
    const auto device = tokens.device();
    at::Tensor index = at::tensor(ids, at::kLong).to(device);
    at::Tensor out =
        at::zeros({sparse_head_->token_vocab},
                  at::TensorOptions().dtype(at::kFloat).device(device));
    out.scatter_reduce_(0, index, w, "amax", /*include_self=*/true);
    if (!sparse_head_->dropped_ids.empty()) {
      out.index_fill_(0, at::tensor(sparse_head_->dropped_ids).to(device), 0);
    }
    return out;
  }
  at::Tensor logits = RunDense(sparse_head_->layers, tokens);
  logits.relu_();
  at::Tensor w = logits.to(at::kFloat);  // the same tensor in float32
  w.log1p_();
  if (sparse_head_->double_log) w.log1p_();
  return sparse_head_->pooling == SparseHead::Pool::kMax ? std::get<0>(w.max(0))
                                                         : w.sum(0);
}

int64_t Encoder::output_dim() const {
  return dense_.empty() ? config_.d_model : dense_.back().out_features();
}

int64_t Encoder::parameter_count() const {
  int64_t n = 0;
  auto add = [&n](const at::Tensor& t) {
    if (t.defined()) n += t.numel();
  };
  for (const at::Tensor* t :
       {&embedding_, &token_type_, &embedding_norm_weight_,
        &embedding_norm_bias_, &final_norm_weight_, &final_norm_bias_}) {
    add(*t);
  }
  for (const LayerWeights& w : layers_) {
    for (const at::Tensor* t :
         {&w.in_proj_weight, &w.in_proj_bias, &w.out_proj_weight,
          &w.out_proj_bias, &w.linear1_weight, &w.linear1_bias,
          &w.linear2_weight, &w.linear2_bias, &w.norm1_weight, &w.norm1_bias,
          &w.norm2_weight, &w.norm2_bias, &w.norm3_weight, &w.norm4_weight,
          &w.q_norm_weight, &w.k_norm_weight}) {
      add(*t);
    }
  }
  for (const auto& [name, t] : scheme_->Parameters()) add(t);
  auto add_dense = [&add](const std::vector<DenseLayer>& layers) {
    for (const DenseLayer& layer : layers) {
      for (const at::Tensor* t :
           {&layer.weight, &layer.bias, &layer.norm_weight, &layer.norm_bias}) {
        add(*t);
      }
    }
  };
  add_dense(dense_);
  add_dense(token_dense_);
  if (score_head_.has_value()) add_dense(score_head_->layers);
  if (sparse_head_.has_value()) {
    // A tied decoder is the embedding table, already counted.
    std::vector<DenseLayer> own = sparse_head_->layers;
    if (own.back().weight.is_same(embedding_)) own.back().weight = at::Tensor();
    add_dense(own);
  }
  return n;
}

}  // namespace encoder::model
