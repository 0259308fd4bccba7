#include "server/model/encoder.h"

#include <ATen/CPUGeneratorImpl.h>
#include <c10/core/InferenceMode.h>

#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/model/torch_status.h"

namespace encoder::model {
namespace {

std::string ShapeString(at::IntArrayRef shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

std::string LayerName(int64_t i, const char* leaf) {
  return absl::StrCat("encoder.layers.", i, ".", leaf);
}

}  // namespace

std::map<std::string, std::vector<int64_t>> Encoder::ExpectedShapes(
    const ModelConfig& c) {
  const int64_t d = c.d_model, f = c.d_ff;
  std::map<std::string, std::vector<int64_t>> shapes = {
      {"embedding.weight", {c.vocab_size, d}}};
  for (int64_t i = 0; i < c.num_layers; ++i) {
    shapes[LayerName(i, "self_attn.in_proj_weight")] = {3 * d, d};
    shapes[LayerName(i, "self_attn.in_proj_bias")] = {3 * d};
    shapes[LayerName(i, "self_attn.out_proj.weight")] = {d, d};
    shapes[LayerName(i, "self_attn.out_proj.bias")] = {d};
    shapes[LayerName(i, "linear1.weight")] = {f, d};
    shapes[LayerName(i, "linear1.bias")] = {f};
    shapes[LayerName(i, "linear2.weight")] = {d, f};
    shapes[LayerName(i, "linear2.bias")] = {d};
    for (const char* n :
         {"norm1.weight", "norm1.bias", "norm2.weight", "norm2.bias"}) {
      shapes[LayerName(i, n)] = {d};
    }
  }
  if (c.norm_first) {
    shapes["encoder.norm.weight"] = {d};
    shapes["encoder.norm.bias"] = {d};
  }
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

absl::StatusOr<std::unique_ptr<Encoder>> Encoder::Create(
    const ModelConfig& config,
    const std::map<std::string, at::Tensor>& state_dict, at::Device device,
    at::ScalarType dtype) {
  if (absl::Status s = ValidateConfig(config); !s.ok()) return s;
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
    auto get = [&](const std::string& name) {
      return state_dict.at(name).to(device, dtype).contiguous();
    };
    enc->embedding_ = get("embedding.weight");
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
      enc->layers_.push_back(std::move(w));
    }
    if (config.norm_first) {
      enc->final_norm_weight_ = get("encoder.norm.weight");
      enc->final_norm_bias_ = get("encoder.norm.bias");
    }
    auto scheme = MakePositionalScheme(config, state_dict, device, dtype);
    if (!scheme.ok()) return scheme.status();
    enc->scheme_ = std::move(*scheme);
    return enc;
  } catch (const c10::Error& e) {
    return StatusFromTorchError(e, "building the encoder");
  }
}

int64_t Encoder::parameter_count() const {
  int64_t n = embedding_.numel();
  for (const LayerWeights& w : layers_) {
    for (const at::Tensor* t :
         {&w.in_proj_weight, &w.in_proj_bias, &w.out_proj_weight,
          &w.out_proj_bias, &w.linear1_weight, &w.linear1_bias,
          &w.linear2_weight, &w.linear2_bias, &w.norm1_weight, &w.norm1_bias,
          &w.norm2_weight, &w.norm2_bias}) {
      n += t->numel();
    }
  }
  if (final_norm_weight_.defined()) n += 2 * final_norm_weight_.numel();
  for (const auto& [name, t] : scheme_->Parameters()) n += t.numel();
  return n;
}

at::Tensor Encoder::Attention(const LayerWeights& w, const at::Tensor& x,
                              const at::Tensor& positions,
                              const at::Tensor& bias,
                              at::Tensor* attention) const {
  const int64_t b = x.size(0), s = x.size(1);
  const int64_t h = config_.num_heads, d = config_.head_dim();
  // [B, S, 3D] -> three [B, H, S, d].
  std::vector<at::Tensor> qkv =
      at::linear(x, w.in_proj_weight, w.in_proj_bias).chunk(3, -1);
  auto heads = [&](const at::Tensor& t) {
    return t.view({b, s, h, d}).transpose(1, 2);
  };
  at::Tensor q = heads(qkv[0]);
  at::Tensor k = heads(qkv[1]);
  at::Tensor v = heads(qkv[2]);
  scheme_->RotateQk(q, k, positions);
  // scores [B, H, S, S] = q k^T / sqrt(d) + positional bias + padding mask.
  at::Tensor scores =
      at::matmul(q, k.transpose(-2, -1)) / std::sqrt(static_cast<double>(d));
  scores = scores + bias;
  at::Tensor probs = at::softmax(scores, -1);
  if (attention != nullptr) *attention = probs;
  at::Tensor out = at::matmul(probs, v).transpose(1, 2).reshape({b, s, h * d});
  return at::linear(out, w.out_proj_weight, w.out_proj_bias);
}

at::Tensor Encoder::Layer(const LayerWeights& w, const at::Tensor& x,
                          const at::Tensor& positions, const at::Tensor& bias,
                          at::Tensor* attention) const {
  const int64_t dim = config_.d_model;
  const double eps = config_.layer_norm_eps;
  auto ffn = [&](const at::Tensor& t) {
    at::Tensor hidden = at::linear(t, w.linear1_weight, w.linear1_bias);
    hidden = config_.activation == Activation::kGelu ? at::gelu(hidden)
                                                     : at::relu(hidden);
    return at::linear(hidden, w.linear2_weight, w.linear2_bias);
  };
  auto norm = [&](const at::Tensor& t, const at::Tensor& g,
                  const at::Tensor& b) {
    return at::layer_norm(t, {dim}, g, b, eps);
  };
  if (config_.norm_first) {
    at::Tensor x1 = x + Attention(w, norm(x, w.norm1_weight, w.norm1_bias),
                                  positions, bias, attention);
    return x1 + ffn(norm(x1, w.norm2_weight, w.norm2_bias));
  }
  at::Tensor x1 = norm(x + Attention(w, x, positions, bias, attention),
                       w.norm1_weight, w.norm1_bias);
  return norm(x1 + ffn(x1), w.norm2_weight, w.norm2_bias);
}

absl::StatusOr<EncoderOutput> Encoder::Forward(
    const EncoderInput& input, const ForwardOptions& options) const {
  const at::Tensor& ids = input.ids;
  if (!ids.defined() || ids.dim() != 2 || ids.scalar_type() != at::kLong) {
    return absl::InvalidArgumentError("ids must be an int64 [batch, seq]");
  }
  const int64_t b = ids.size(0), s = ids.size(1);
  if (b == 0 || s == 0) {
    return absl::InvalidArgumentError("empty batch or empty sequence");
  }
  if (!input.mask.defined() || input.mask.sizes() != ids.sizes() ||
      input.mask.scalar_type() != at::kBool) {
    return absl::InvalidArgumentError("mask must be a bool tensor like ids");
  }
  if (input.positions.defined() && input.positions.sizes() != ids.sizes()) {
    return absl::InvalidArgumentError("positions must have the shape of ids");
  }
  for (int64_t layer : options.attention_layers) {
    if (layer < 0 || layer >= config_.num_layers) {
      return absl::InvalidArgumentError(absl::StrCat("attention layer ", layer,
                                                     " is out of range [0, ",
                                                     config_.num_layers, ")"));
    }
  }
  try {
    c10::InferenceMode guard;
    const int64_t lo = ids.min().item<int64_t>();
    const int64_t hi = ids.max().item<int64_t>();
    if (lo < 0 || hi >= config_.vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat(
          "token id ", lo < 0 ? lo : hi, " is outside the vocabulary [0, ",
          config_.vocab_size, ")"));
    }
    at::Tensor tokens = ids.to(device_);
    at::Tensor mask = input.mask.to(device_);
    at::Tensor positions =
        input.positions.defined()
            ? input.positions.to(device_, at::kLong)
            : at::arange(s, tokens.options()).unsqueeze(0).expand({b, s});
    if (config_.rejects_beyond_max_positions()) {
      const int64_t pmin = positions.min().item<int64_t>();
      const int64_t pmax = positions.max().item<int64_t>();
      if (pmin < 0 || pmax >= config_.max_positions) {
        return absl::InvalidArgumentError(absl::StrCat(
            "position ", pmin < 0 ? pmin : pmax,
            " is outside the learned position table of ", config_.max_positions,
            " positions (max length ", config_.max_positions, ")"));
      }
    }
    at::Tensor x = at::embedding(embedding_, tokens);
    if (config_.embedding_scale) {
      x = x * std::sqrt(static_cast<double>(config_.d_model));
    }
    x = scheme_->AddToInput(x, positions);
    // One additive bias for every layer: scheme bias + key padding mask.
    at::Tensor bias =
        at::zeros({b, 1, 1, s}, x.options())
            .masked_fill(mask.logical_not().view({b, 1, 1, s}),
                         -std::numeric_limits<double>::infinity());
    at::Tensor scheme_bias =
        scheme_->AttentionBias(positions, positions, dtype_);
    if (scheme_bias.defined()) bias = bias + scheme_bias;
    EncoderOutput out;
    for (int64_t i = 0; i < config_.num_layers; ++i) {
      const bool want = std::find(options.attention_layers.begin(),
                                  options.attention_layers.end(),
                                  i) != options.attention_layers.end();
      at::Tensor probs;
      x = Layer(layers_[i], x, positions, bias, want ? &probs : nullptr);
      if (want) out.attention[i] = probs;
    }
    if (config_.norm_first) {
      x = at::layer_norm(x, {config_.d_model}, final_norm_weight_,
                         final_norm_bias_, config_.layer_norm_eps);
    }
    out.tokens = x;
    return out;
  } catch (const c10::Error& e) {
    return StatusFromTorchError(e, "encoder forward");
  }
}

at::Tensor Pool(const at::Tensor& tokens, const at::Tensor& mask,
                Pooling pooling, bool normalize) {
  at::Tensor pooled;
  if (pooling == Pooling::kFirst) {
    pooled = tokens.select(1, 0);
  } else {
    at::Tensor m = mask.to(tokens.scalar_type()).unsqueeze(-1);  // [B, S, 1]
    pooled = (tokens * m).sum(1) / m.sum(1).clamp_min(1);
  }
  if (normalize) {
    pooled = pooled / pooled.norm(2, {-1}, /*keepdim=*/true).clamp_min(1e-12);
  }
  return pooled;
}

}  // namespace encoder::model
