#include "server/model/encoder.h"

#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "server/model/kernels/bf16_attention.h"
#include "server/model/torch_compat.h"
#include "server/model/torch_status.h"

namespace encoder::model {
namespace {

// The most negative finite value of a dtype: masks a key out of a window
// without making a row of only masked keys NaN.
double LowestFinite(at::ScalarType dtype) {
  switch (dtype) {
    case at::kHalf:
      return -65504.0;
    case at::kBFloat16:
      return -3.38e38;
    case at::kFloat:
      return std::numeric_limits<float>::lowest();
    default:
      return std::numeric_limits<double>::lowest();
  }
}

// The grid rows the token-wise work runs on: every real token, then padded
// positions up to a multiple of kPackedRowAlignment (or the whole grid).
at::Tensor PackedRows(const at::Tensor& flat_mask, int64_t real) {
  at::Tensor rows = flat_mask.nonzero().squeeze(1);
  const int64_t padded = flat_mask.numel() - real;
  const int64_t extra =
      std::min(padded, (kPackedRowAlignment - real % kPackedRowAlignment) %
                           kPackedRowAlignment);
  if (extra == 0) return rows;
  return at::cat(
      {rows, flat_mask.logical_not().nonzero().squeeze(1).narrow(0, 0, extra)});
}

// RMSNorm over the last dimension, as T5 and Qwen compute it: the mean of
// squares in float32, no centering, no bias.
at::Tensor RmsNorm(const at::Tensor& x, const at::Tensor& weight, double eps) {
  at::Tensor xf = x.to(at::kFloat);
  at::Tensor scaled =
      xf * at::rsqrt(xf.pow(2).mean(-1, /*keepdim=*/true) + eps);
  return weight * scaled.to(x.scalar_type());
}

}  // namespace

at::Tensor Encoder::Norm(const at::Tensor& x, const at::Tensor& weight,
                         const at::Tensor& bias) const {
  if (!weight.defined()) return x;
  if (config_.arch.norm == NormKind::kRmsNorm) {
    return RmsNorm(x, weight, config_.layer_norm_eps);
  }
  return at::layer_norm(x, {config_.d_model}, weight, bias,
                        config_.layer_norm_eps);
}

at::Tensor Encoder::Pass::Pack(const at::Tensor& grid) const {
  if (!packed()) return grid;
  return grid.reshape({batch * seq, grid.size(-1)}).index_select(0, rows);
}

at::Tensor Encoder::Pass::Unpack(const at::Tensor& packed_rows) const {
  if (!packed()) return packed_rows;
  // Padded positions read an appended zero row, not uninitialized memory:
  // padded keys and values take part in the attention products (their
  // scores are masked to -inf, and a NaN there would survive the mask). A
  // gather, which copies whole rows, runs several times faster here than
  // a scatter into zeros (index_copy_).
  const int64_t c = packed_rows.size(-1);
  return at::cat({packed_rows, at::zeros({1, c}, packed_rows.options())})
      .index_select(0, grid_rows)
      .view({batch, seq, c});
}

at::Tensor Encoder::Attention(int64_t index, const at::Tensor& x,
                              const at::Tensor& positions,
                              const at::Tensor& bias, const Pass& pass,
                              at::Tensor* attention) const {
  const LayerWeights& w = layers_[index];
  const int64_t b = pass.batch, s = pass.seq;
  const int64_t h = config_.num_heads, d = config_.head_dim();
  const int64_t kvh = config_.kv_heads();
  // Projected on the real tokens' rows, then onto the padded grid:
  // [B, S, A + 2K] -> [B, H, S, d] queries, [B, KV, S, d] keys and values.
  std::vector<at::Tensor> qkv =
      pass.Unpack(Project(x, w.in_proj_weight, w.in_proj_bias, w.in_proj_q,
                          w.in_proj_p, pass))
          .split_with_sizes({h * d, kvh * d, kvh * d}, -1);
  auto heads = [&](const at::Tensor& t, int64_t n, const at::Tensor& gain) {
    at::Tensor split = t.view({b, s, n, d});
    if (gain.defined()) split = RmsNorm(split, gain, config_.layer_norm_eps);
    return split.transpose(1, 2);
  };
  at::Tensor q = heads(qkv[0], h, w.q_norm_weight);
  at::Tensor k = heads(qkv[1], kvh, w.k_norm_weight);
  at::Tensor v = heads(qkv[2], kvh, at::Tensor());
  scheme_->RotateQk(q, k, positions, pass.extents, index);
  if (kvh != h) {
    // Each key/value head serves h / kvh consecutive query heads.
    k = k.repeat_interleave(h / kvh, 1);
    v = v.repeat_interleave(h / kvh, 1);
  }
  // Disentangled attention: the position terms of this layer's queries and
  // keys join the padding (and any other) bias.
  at::Tensor content = scheme_->ContentBias(q, k, positions, index);
  const at::Tensor layer_bias = content.defined() ? bias + content : bias;
  at::Tensor out;
  if (pass.bf16_attention && attention == nullptr) {
    // Cut to each sequence's length, a bias of padding alone is not needed.
    const bool use_bias =
        !pass.bias_only_padding || (pass.lengths.empty() && pass.has_padding);
    out = Bf16Attention(q, k, v, use_bias ? layer_bias : at::Tensor(),
                        ScoreScale(d), pass.lengths)
              .to(q.scalar_type());
  } else if (pass.lengths.empty()) {
    out = Mix(q, k, v, layer_bias,
              /*use_bias=*/!pass.bias_only_padding || pass.has_padding,
              pass.fused, attention);
  } else {
    out = MixEach(q, k, v, layer_bias, pass.lengths, pass, attention);
  }
  return Project(pass.Pack(out), w.out_proj_weight, w.out_proj_bias,
                 w.out_proj_q, w.out_proj_p, pass);
}

at::Tensor Encoder::Mix(const at::Tensor& q, const at::Tensor& k,
                        const at::Tensor& v, const at::Tensor& bias,
                        bool use_bias, bool fused,
                        at::Tensor* attention) const {
  const int64_t b = q.size(0), h = q.size(1), s = q.size(2), d = q.size(3);
  if (fused && attention == nullptr) {
    return FusedAttention(q, k, v, use_bias ? bias : at::Tensor(),
                          ScoreScale(d))
        .transpose(1, 2)
        .reshape({b, s, h * d});
  }
  // scores [B, H, S, S] = q k^T / sqrt(d) + positional bias + padding mask.
  at::Tensor scores = at::matmul(q, k.transpose(-2, -1));
  // A division, as the reference families compute it.
  if (config_.arch.attention_scale) scores = scores / ScoreRoot(d);
  scores = scores + bias;
  // Accumulated in float32 whatever the serving dtype.
  at::Tensor probs = scores.scalar_type() == at::kBFloat16
                         ? at::softmax(scores, -1, at::kFloat).to(dtype_)
                         : at::softmax(scores, -1);
  if (attention != nullptr) *attention = probs;
  return at::matmul(probs, v).transpose(1, 2).reshape({b, s, h * d});
}

double Encoder::ScoreRoot(int64_t head_dim) const {
  if (config_.arch.score_dim > 0) {
    return std::sqrt(static_cast<double>(config_.arch.score_dim));
  }
  return std::sqrt(static_cast<double>(head_dim) *
                   static_cast<double>(config_.score_scale_factor()));
}

double Encoder::ScoreScale(int64_t head_dim) const {
  return config_.arch.attention_scale ? 1.0 / ScoreRoot(head_dim) : 1.0;
}

at::Tensor Encoder::MixEach(const at::Tensor& q, const at::Tensor& k,
                            const at::Tensor& v, const at::Tensor& bias,
                            const std::vector<int64_t>& lengths,
                            const Pass& pass, at::Tensor* attention) const {
  const int64_t b = q.size(0), h = q.size(1), s = q.size(2), d = q.size(3);
  at::Tensor out = at::zeros({b, s, h * d}, q.options());
  if (attention != nullptr) *attention = at::zeros({b, h, s, s}, q.options());
  for (int64_t i = 0; i < b; ++i) {
    const int64_t n = lengths[i];
    auto rows = [&](const at::Tensor& t) {
      return t.narrow(0, i, 1).narrow(2, 0, n);
    };
    at::Tensor bi =
        bias.narrow(0, bias.size(0) == 1 ? 0 : i, 1).narrow(3, 0, n);
    if (bi.size(2) > 1) bi = bi.narrow(2, 0, n);
    at::Tensor probs;
    at::Tensor mixed =
        Mix(rows(q).contiguous(), rows(k).contiguous(), rows(v).contiguous(),
            bi, /*use_bias=*/!pass.bias_only_padding, pass.fused,
            attention != nullptr ? &probs : nullptr);
    out.narrow(0, i, 1).narrow(1, 0, n).copy_(mixed);
    if (attention != nullptr) {
      attention->narrow(0, i, 1).narrow(2, 0, n).narrow(3, 0, n).copy_(probs);
    }
  }
  return out;
}

at::Tensor Encoder::Project(const at::Tensor& x, const at::Tensor& weight,
                            const at::Tensor& bias,
                            const std::optional<Int8Linear>& q,
                            const std::optional<PackedLinear>& packed,
                            const Pass& pass,
                            std::optional<Activation> activation) {
  auto activate = [&](const at::Tensor& y) {
    return activation.has_value() ? ApplyActivation(*activation, y) : y;
  };
  if (pass.input_max != nullptr) {
    // Calibrating: the plain weights, so that packed or not, the pass (and
    // the channels it picks) is the same.
    const at::Tensor m = x.reshape({-1, x.size(-1)}).abs().amax(0);
    auto [it, fresh] = pass.input_max->try_emplace(weight.data_ptr(), m);
    if (!fresh) it->second = at::maximum(it->second, m);
    return activate(at::linear(x, weight, bias));
  }
  if (pass.int8 && q.has_value()) return activate(q->Forward(x));
  if (packed.has_value()) {
    return activation.has_value() ? packed->Forward(x, *activation)
                                  : packed->Forward(x);
  }
  return activate(at::linear(x, weight, bias));
}

at::Tensor Encoder::FeedForward(const LayerWeights& w, const at::Tensor& x,
                                const Pass& pass) const {
  at::Tensor hidden;
  if (config_.arch.gated_ffn) {
    std::vector<at::Tensor> parts = Project(x, w.linear1_weight, w.linear1_bias,
                                            w.linear1_q, w.linear1_p, pass)
                                        .chunk(2, -1);
    hidden = ApplyActivation(config_.activation, parts[0]) * parts[1];
  } else {
    hidden = Project(x, w.linear1_weight, w.linear1_bias, w.linear1_q,
                     w.linear1_p, pass, config_.activation);
  }
  return Project(hidden, w.linear2_weight, w.linear2_bias, w.linear2_q,
                 w.linear2_p, pass);
}

at::Tensor Encoder::Layer(int64_t index, const at::Tensor& x,
                          const at::Tensor& positions, const at::Tensor& bias,
                          const Pass& pass, at::Tensor* attention) const {
  const LayerWeights& w = layers_[index];
  if (config_.norm_first) {
    // norm3 / norm4 are undefined (Norm returns its input) unless the
    // layer normalizes its outputs too.
    at::Tensor x1 =
        x + Norm(Attention(index, Norm(x, w.norm1_weight, w.norm1_bias),
                           positions, bias, pass, attention),
                 w.norm3_weight, at::Tensor());
    return x1 +
           Norm(FeedForward(w, Norm(x1, w.norm2_weight, w.norm2_bias), pass),
                w.norm4_weight, at::Tensor());
  }
  at::Tensor x1 =
      Norm(x + Attention(index, x, positions, bias, pass, attention),
           w.norm1_weight, w.norm1_bias);
  return Norm(x1 + FeedForward(w, x1, pass), w.norm2_weight, w.norm2_bias);
}

at::Tensor Encoder::DefaultPositions(const at::Tensor& tokens,
                                     const at::Tensor& mask) const {
  const int64_t b = tokens.size(0), s = tokens.size(1);
  if (config_.arch.position_ids == PositionIdRule::kAfterPadding) {
    // RoBERTa: padding_idx + running count of non-padding tokens.
    at::Tensor real =
        tokens.ne(config_.arch.padding_idx).logical_and(mask).to(at::kLong);
    return at::cumsum(real, 1) * real + config_.arch.padding_idx;
  }
  return at::arange(s, tokens.options()).unsqueeze(0).expand({b, s});
}

std::vector<int64_t> Encoder::Extents(const at::Tensor& positions,
                                      const at::Tensor& mask) {
  at::Tensor last =
      positions.masked_fill(mask.logical_not(), -1).amax(1).add(1).cpu();
  return std::vector<int64_t>(last.data_ptr<int64_t>(),
                              last.data_ptr<int64_t>() + last.numel());
}

std::vector<int64_t> Encoder::ExactLengths(const at::Tensor& mask, bool int8,
                                           bool packed) const {
  // Rounding to int8 or bfloat16 turns the last-bit differences of
  // differently shaped float products into visible ones, so the reduced
  // paths run attention on each sequence's own length. A batch with enough
  // padding to skip it in the token-wise work skips it in attention too:
  // on the CPU, per-sequence products cost no more than batched ones at 16
  // tokens and save the padded scores at long lengths
  // (docs/benchmarks-history.md, "Attention per sequence too"). On a GPU
  // each sequence's products would be a launch of their own, so bfloat16
  // there batches as float16 does.
  const bool per_sequence =
      int8 || (device_.is_cpu() && (dtype_ == at::kBFloat16 || packed));
  if (!per_sequence) return {};
  const at::Tensor cpu = mask.to(at::kCPU);
  const at::Tensor counts = cpu.sum(1);
  const at::Tensor prefix =
      at::arange(cpu.size(1), counts.options()).unsqueeze(0) <
      counts.unsqueeze(1);
  if (!prefix.equal(cpu)) return {};  // not prefix masks: batched path
  const int64_t* n = counts.data_ptr<int64_t>();
  return std::vector<int64_t>(n, n + counts.numel());
}

std::vector<at::Tensor> Encoder::LayerBiases(
    const at::Tensor& base, const at::Tensor& positions) const {
  std::vector<at::Tensor> biases(config_.num_layers, base);
  std::map<int64_t, at::Tensor> by_window;
  for (size_t i = 0; i < config_.arch.layer_window.size(); ++i) {
    const int64_t window = config_.arch.layer_window[i];
    if (window <= 0) continue;
    at::Tensor& windowed = by_window[window];
    if (!windowed.defined()) {
      at::Tensor outside =
          (positions.unsqueeze(-1) - positions.unsqueeze(-2)).abs().gt(window);
      windowed = base.masked_fill(outside.unsqueeze(1),
                                  LowestFinite(base.scalar_type()));
    }
    biases[i] = windowed;
  }
  return biases;
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
  if (input.keys.defined() && (input.keys.sizes() != ids.sizes() ||
                               input.keys.scalar_type() != at::kBool)) {
    return absl::InvalidArgumentError("keys must be a bool tensor like ids");
  }
  if (input.positions.defined() && input.positions.sizes() != ids.sizes()) {
    return absl::InvalidArgumentError("positions must have the shape of ids");
  }
  if (input.types.defined() && (input.types.sizes() != ids.sizes() ||
                                input.types.scalar_type() != at::kLong)) {
    return absl::InvalidArgumentError("types must be an int64 tensor like ids");
  }
  for (int64_t layer : options.attention_layers) {
    if (layer < 0 || layer >= config_.num_layers) {
      return absl::InvalidArgumentError(absl::StrCat("attention layer ", layer,
                                                     " is out of range [0, ",
                                                     config_.num_layers, ")"));
    }
  }
  for (int64_t layer : options.hidden_layers) {
    if (layer < 0 || layer > config_.num_layers) {
      return absl::InvalidArgumentError(absl::StrCat("hidden state ", layer,
                                                     " is out of range [0, ",
                                                     config_.num_layers, "]"));
    }
  }
  auto keeps_hidden = [&](int64_t index) {
    return std::find(options.hidden_layers.begin(), options.hidden_layers.end(),
                     index) != options.hidden_layers.end();
  };
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
    at::Tensor keys = input.keys.defined() ? input.keys.to(device_) : mask;
    // Keys narrower than the real tokens: no prefix lengths to cut to, and
    // the bias is never all zeros.
    const bool narrow_keys = input.keys.defined() && !keys.equal(mask);
    if (narrow_keys &&
        keys.logical_and(mask.logical_not()).any().item<bool>()) {
      return absl::InvalidArgumentError(
          "keys must be false wherever mask is false");
    }
    at::Tensor positions = input.positions.defined()
                               ? input.positions.to(device_, at::kLong)
                               : DefaultPositions(tokens, mask);
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
    if (token_type_.defined()) {
      if (!input.types.defined()) {
        x = x + token_type_[0];
      } else {
        at::Tensor types = input.types.to(device_);
        const int64_t tmin = types.min().item<int64_t>();
        const int64_t tmax = types.max().item<int64_t>();
        if (tmin < 0 || tmax >= token_type_.size(0)) {
          return absl::InvalidArgumentError(
              absl::StrCat("token type ", tmin < 0 ? tmin : tmax,
                           " is outside the token-type table [0, ",
                           token_type_.size(0), ")"));
        }
        x = x + at::embedding(token_type_, types);
      }
    }
    x = scheme_->AddToInput(x, positions);
    x = Norm(x, embedding_norm_weight_, embedding_norm_bias_);
    // One additive bias for every layer: scheme bias + key padding mask.
    at::Tensor bias =
        at::zeros({b, 1, 1, s}, x.options())
            .masked_fill(keys.logical_not().view({b, 1, 1, s}),
                         -std::numeric_limits<double>::infinity());
    at::Tensor scheme_bias =
        scheme_->AttentionBias(positions, positions, dtype_);
    if (scheme_bias.defined()) bias = bias + scheme_bias;
    if (config_.arch.causal) {
      // Keys after the query, by place in the sequence (not by position
      // id). The lowest finite value, not -inf: a padded query row whose
      // earlier keys are all padding still gets finite probabilities, so
      // no NaN reaches the real rows through it.
      at::Tensor later = at::ones({s, s}, mask.options()).triu(1);
      bias = bias.masked_fill(later.view({1, 1, s, s}),
                              LowestFinite(bias.scalar_type()));
    }
    const std::vector<at::Tensor> biases = LayerBiases(bias, positions);
    Pass pass;
    pass.int8 = quantized_ && !options.full_precision;
    pass.bf16_attention =
        bf16_attention_ && (pass.int8 || dtype_ == at::kBFloat16);
    pass.input_max = calibrating_;
    pass.fused = options.fused_attention;
    pass.batch = b;
    pass.seq = s;
    if (scheme_->depends_on_length()) pass.extents = Extents(positions, mask);
    const int64_t real = mask.sum().item<int64_t>();
    pass.has_padding = real < b * s || narrow_keys;
    pass.bias_only_padding =
        !scheme_bias.defined() && !config_.arch.causal &&
        !scheme_->has_content_bias() &&
        std::all_of(config_.arch.layer_window.begin(),
                    config_.arch.layer_window.end(),
                    [](int64_t window) { return window <= 0; });
    if (real < b * s &&
        static_cast<double>(b * s - real) >=
            options.skip_padding_min_share * static_cast<double>(b * s)) {
      const at::Tensor flat = mask.reshape({b * s});
      pass.rows = PackedRows(flat, real);
      pass.grid_rows =
          at::full({b * s}, pass.rows.numel(), pass.rows.options())
              .index_put_({pass.rows},
                          at::arange(pass.rows.numel(), pass.rows.options()));
      x = pass.Pack(x);
    }
    if (!narrow_keys) {
      pass.lengths = ExactLengths(mask, pass.int8, pass.packed());
    }
    EncoderOutput out;
    if (keeps_hidden(0)) out.hidden[0] = pass.Unpack(x);
    for (int64_t i = 0; i < config_.num_layers; ++i) {
      if (options.should_stop) {
        if (absl::Status stop = options.should_stop(); !stop.ok()) return stop;
      }
      const bool want = std::find(options.attention_layers.begin(),
                                  options.attention_layers.end(),
                                  i) != options.attention_layers.end();
      at::Tensor probs;
      x = Layer(i, x, positions, biases[i], pass, want ? &probs : nullptr);
      if (want) out.attention[i] = probs;
      if (keeps_hidden(i + 1)) out.hidden[i + 1] = pass.Unpack(x);
    }
    if (config_.norm_first) {
      x = Norm(x, final_norm_weight_, final_norm_bias_);
    }
    out.tokens = pass.Unpack(x);
    // As transformers' output_hidden_states: a pre-norm model's last entry
    // is its normed output, the same tensor as last_hidden_state.
    if (keeps_hidden(config_.num_layers)) {
      out.hidden[config_.num_layers] = out.tokens;
    }
    return out;
  } catch (const c10::Error& e) {
    return StatusFromTorchError(e, "encoder forward");
  }
}

at::Tensor Pool(const at::Tensor& tokens_in, const at::Tensor& mask,
                Pooling pooling, bool normalize) {
  // bfloat16 sums lose digits: pool in float32, return the input's dtype.
  if (tokens_in.scalar_type() == at::kBFloat16) {
    return Pool(tokens_in.to(at::kFloat), mask, pooling, normalize)
        .to(at::kBFloat16);
  }
  const at::Tensor& tokens = tokens_in;
  at::Tensor pooled;
  at::Tensor m = mask.to(tokens.scalar_type()).unsqueeze(-1);  // [B, S, 1]
  switch (pooling) {
    case Pooling::kFirst:
      pooled = tokens.select(1, 0);
      break;
    case Pooling::kMean:
      pooled = (tokens * m).sum(1) / m.sum(1).clamp_min(1);
      break;
    case Pooling::kMeanSqrtLen:
      pooled = (tokens * m).sum(1) / m.sum(1).clamp_min(1).sqrt();
      break;
    case Pooling::kMax:
      // Padding is excluded with a large negative value, as
      // sentence-transformers does.
      pooled =
          tokens.masked_fill(mask.logical_not().unsqueeze(-1), -1e9).amax(1);
      break;
    case Pooling::kLastToken: {
      at::Tensor last = mask.to(at::kLong).sum(1).sub(1).clamp_min(0);
      pooled = tokens
                   .gather(1, last.view({-1, 1, 1})
                                  .expand({tokens.size(0), 1, tokens.size(2)}))
                   .squeeze(1);
      break;
    }
    case Pooling::kWeightedMean: {
      at::Tensor w =
          at::arange(1, tokens.size(1) + 1, tokens.options()).view({1, -1, 1}) *
          m;
      pooled = (tokens * w).sum(1) / w.sum(1).clamp_min(1e-9);
      break;
    }
  }
  if (normalize) {
    pooled = pooled / pooled.norm(2, {-1}, /*keepdim=*/true).clamp_min(1e-12);
  }
  return pooled;
}

}  // namespace encoder::model
