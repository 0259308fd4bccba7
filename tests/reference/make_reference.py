#!/usr/bin/env python3
"""Expected outputs from docs/positional-encodings.md, independent of the C++.

Usage: .venv/bin/python tests/reference/make_reference.py OUT_DIR

For every case of all_cases() this writes
  OUT_DIR/<case>/config.json          the model config (ParseModelConfig schema)
  OUT_DIR/<case>/weights.safetensors  float32 state_dict (#tensor-names)
  OUT_DIR/<case>/expected.safetensors float64 expected outputs:
      ids_<k> [S] int64, tokens_<k> [S, D], pooled_mean_<k> [D],
      pooled_first_<k> [D], attention_<k> [L, H, S, S]   (k = 0, 1, ...)
      stats_<k> [L, H, 6]: entropy, mean distance, self/prev/next/first mass
      batch_ids [B, Smax] int64 (padding holds random valid ids),
      batch_lengths [B] int64, batch_tokens_<b> [len_b, D],
      batch_attention_<b> [L, H, len_b, len_b], batch_pooled_mean [B, D],
      batch_pooled_first [B, D]  (each sequence as if it ran alone)
      shift_ids [S] int64, shift_offset [] int64 (c), shift_tokens [S, D]
      (positions c .. c+S-1)
and OUT_DIR/manifest.json listing the cases.

The base model is PyTorch's nn.Embedding + nn.TransformerEncoder with dropout
0. Expected values come from a float64 forward pass written here with explicit
positional hooks; wherever PyTorch's own layers can express the scheme (no
rotation of q and k), that forward pass is checked against them. The float32
model is checked to agree with the float64 one within the contract tolerance,
so the contract is achievable. The output is a pure function of this file.
A "#name" below is a section of docs/positional-encodings.md.
"""

import copy
import json
import math
import os
import struct
import sys
import zlib

import numpy
import torch
import torch.nn.functional as F
from torch import nn

# The contract: float32 outputs within this relative error of float64 ones,
# relative error = max |ours - ref| / max |ref|.
CONTRACT_TOLERANCE = 1e-5

# Agreement required between two float64 computations of the same quantity.
FLOAT64_TOLERANCE = 1e-10

VOCAB_SIZE = 100
NUM_LAYERS = 2
MAX_INPUT_TOKENS = 128
INPUT_LENGTHS = [1, 5, 17]
BATCH_LENGTHS = [5, 17, 1, 12]
SHIFT_LENGTH = 9
SHIFT_OFFSET = 13


# --------------------------------------------------------------------------
# Cases
# --------------------------------------------------------------------------

def make_case(name, scheme, d_model, num_heads, d_ff, norm_first, **extra):
    """A case description; `extra` overrides config fields or adds
    `positional` parameters (keys as in the config JSON) and `lengths`."""
    case = {
        "name": name,
        "scheme": scheme,
        "d_model": d_model,
        "num_heads": num_heads,
        "d_ff": d_ff,
        "norm_first": norm_first,
        "activation": "gelu" if norm_first else "relu",
        "layer_norm_eps": 1e-5,
        "max_positions": 128,
        "embedding_scale": False,
        "positional": {"type": scheme},
        "lengths": list(INPUT_LENGTHS),
    }
    positional_defaults = {
        "sinusoidal": {"base": 10000.0, "layout": "interleaved",
                       "denominator": "d_model", "offset": 0},
        "rope": {"base": 10000.0, "layout": "interleaved"},
        "relative": {"num_buckets": 32, "max_distance": 128},
    }
    case["positional"].update(positional_defaults.get(scheme, {}))
    case["positional"].update(extra.pop("positional", {}))
    case.update(extra)
    return case


def all_cases():
    post, pre = False, True
    return [
        # Every scheme x {post-norm relu, pre-norm gelu}.
        make_case("none_post_relu", "none", 32, 2, 64, post),
        make_case("none_pre_gelu", "none", 64, 4, 256, pre),
        make_case("sinusoidal_post_relu", "sinusoidal", 64, 4, 128, post),
        make_case("sinusoidal_pre_gelu", "sinusoidal", 32, 4, 96, pre),
        make_case("learned_post_relu", "learned", 32, 4, 128, post,
                  max_positions=24, lengths=INPUT_LENGTHS + [24]),
        make_case("learned_pre_gelu", "learned", 64, 4, 192, pre,
                  max_positions=24, layer_norm_eps=1e-6,
                  lengths=INPUT_LENGTHS + [24]),
        make_case("rope_post_relu", "rope", 64, 4, 128, post),
        make_case("rope_pre_gelu", "rope", 32, 2, 64, pre),
        make_case("alibi_post_relu", "alibi", 32, 4, 128, post),
        make_case("alibi_pre_gelu", "alibi", 48, 6, 144, pre),
        make_case("relative_post_relu", "relative", 64, 4, 256, post,
                  lengths=INPUT_LENGTHS + [100]),
        make_case("relative_pre_gelu", "relative", 32, 4, 96, pre,
                  lengths=INPUT_LENGTHS + [100]),
        # Variants.
        make_case("sinusoidal_concat_half_minus_one_post_relu", "sinusoidal",
                  64, 4, 128, post,
                  positional={"layout": "concat",
                              "denominator": "half_minus_one"}),
        make_case("sinusoidal_offset2_pre_gelu", "sinusoidal", 32, 4, 64, pre,
                  positional={"offset": 2}),
        make_case("sinusoidal_scaled_post_relu", "sinusoidal", 32, 4, 96, post,
                  embedding_scale=True),
        make_case("rope_half_post_relu", "rope", 64, 4, 192, post,
                  positional={"layout": "half"}),
        make_case("rope_half_pre_gelu", "rope", 32, 4, 128, pre,
                  positional={"layout": "half"}),
        make_case("rope_base500_post_relu", "rope", 32, 2, 96, post,
                  positional={"base": 500.0}),
        make_case("alibi_h12_post_relu", "alibi", 48, 12, 96, post),
        make_case("relative_buckets16_pre_gelu", "relative", 32, 4, 128, pre,
                  positional={"num_buckets": 16, "max_distance": 64},
                  lengths=INPUT_LENGTHS + [70]),
        # Sliding windows (#the-base-encoder): a local layer beside a
        # global one, on a rotary and on a bias scheme.
        make_case("rope_window3_pre_gelu", "rope", 32, 4, 96, pre,
                  layer_window=[3, 0]),
        make_case("alibi_window4_post_relu", "alibi", 32, 4, 64, post,
                  layer_window=[0, 4]),
    ]


def config_json(case):
    """The C++ config (keys exactly as ParseModelConfig documents them)."""
    return {
        "vocab_size": VOCAB_SIZE,
        "d_model": case["d_model"],
        "num_heads": case["num_heads"],
        "num_layers": NUM_LAYERS,
        "d_ff": case["d_ff"],
        "activation": case["activation"],
        "norm_first": case["norm_first"],
        "layer_norm_eps": case["layer_norm_eps"],
        "max_positions": case["max_positions"],
        "max_input_tokens": MAX_INPUT_TOKENS,
        "pooling": "mean",
        "normalize": False,
        "embedding_scale": case["embedding_scale"],
        "positional": dict(case["positional"]),
        **({"layer_window": case["layer_window"]}
           if "layer_window" in case else {}),
    }


# --------------------------------------------------------------------------
# Positional math (each function is one formula of docs/positional-encodings.md)
# --------------------------------------------------------------------------

def sinusoidal_frequencies(d_model, base, denominator):
    """#sinusoidal: w_i = base^(-2i/D), i = 0..D/2-1 ("d_model");
    the tensor2tensor variant uses w_i = base^(-i/(D/2-1)) ("half_minus_one").
    """
    i = torch.arange(d_model // 2, dtype=torch.float64)
    if denominator == "d_model":
        exponent = 2.0 * i / d_model
    elif denominator == "half_minus_one":
        exponent = i / (d_model // 2 - 1)
    else:
        raise ValueError(f"unknown denominator {denominator}")
    return torch.pow(torch.tensor(base, dtype=torch.float64), -exponent)


def sinusoidal_code(positions, d_model, positional):
    """#sinusoidal: PE(p, 2i) = sin(p w_i), PE(p, 2i+1) = cos(p w_i)
    (interleaved) or [sin(p w) | cos(p w)] (concat), at p + offset.
    positions: int64 [...] -> float64 [..., D]."""
    w = sinusoidal_frequencies(d_model, positional["base"],
                               positional["denominator"])
    p = (positions + positional["offset"]).to(torch.float64)
    angles = p.unsqueeze(-1) * w
    if positional["layout"] == "interleaved":
        return torch.stack([angles.sin(), angles.cos()], dim=-1).flatten(-2)
    if positional["layout"] == "concat":
        return torch.cat([angles.sin(), angles.cos()], dim=-1)
    raise ValueError(f"unknown sinusoidal layout {positional['layout']}")


def rope_rotate(x, positions, base, layout):
    """#rope: theta_i = base^(-2i/d); each pair is rotated by
    p theta_i: (x_a, x_b) -> (x_a cos - x_b sin, x_a sin + x_b cos), pairs
    (x_2i, x_2i+1) for "interleaved" and (x_i, x_i+d/2) for "half".
    x: [B, H, S, d]; positions: int64 [B, S]. Angles are float64."""
    d = x.shape[-1]
    i = torch.arange(d // 2, dtype=torch.float64)
    theta = torch.pow(torch.tensor(base, dtype=torch.float64), -2.0 * i / d)
    angles = positions.to(torch.float64)[:, None, :, None] * theta
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
    if layout == "interleaved":
        a, b = x[..., 0::2], x[..., 1::2]
        return torch.stack([a * cos - b * sin, a * sin + b * cos],
                           dim=-1).flatten(-2)
    if layout == "half":
        a, b = x[..., : d // 2], x[..., d // 2:]
        return torch.cat([a * cos - b * sin, a * sin + b * cos], dim=-1)
    raise ValueError(f"unknown rope layout {layout}")


def alibi_slopes(num_heads):
    """#alibi: m_h = 2^(-8h/n), h = 1..n, for n a power of two;
    otherwise the slopes for p = the largest power of two below n, then those
    for 2p heads at even indices, the first n - p of them."""
    def power_of_two_slopes(n):
        return [2.0 ** (-8.0 * h / n) for h in range(1, n + 1)]

    if num_heads & (num_heads - 1) == 0:
        return power_of_two_slopes(num_heads)
    p = 1 << (num_heads.bit_length() - 1)
    return (power_of_two_slopes(p) +
            power_of_two_slopes(2 * p)[0::2][: num_heads - p])


def alibi_bias(positions, num_heads):
    """#alibi: bias_h(i, j) = -m_h |p_i - p_j|.
    positions: int64 [B, S] -> float64 [B, H, S, S]."""
    slopes = torch.tensor(alibi_slopes(num_heads), dtype=torch.float64)
    distance = (positions[:, :, None] - positions[:, None, :]).abs()
    return -slopes[None, :, None, None] * distance[:, None].to(torch.float64)


def relative_bucket(relative, num_buckets, max_distance):
    """#relative-bias-t5-buckets (bidirectional), logarithm in
    float32: half = B/2; out = half if r > 0 else 0; a = |r|; exact = half/2;
    bucket = out + a if a < exact, else out + min(half - 1, exact +
    floor(ln(a/exact) / ln(max_distance/exact) * (half - exact))).
    relative: int64 tensor -> int64 tensor of the same shape."""
    half = num_buckets // 2
    exact = half // 2
    out = torch.where(relative > 0, half, 0)
    a = relative.abs()
    ratio = a.clamp(min=1).to(torch.float32) / exact
    scaled = (torch.log(ratio) / math.log(max_distance / exact) *
              (half - exact))
    large = (exact + scaled.to(torch.int64)).clamp(max=half - 1)
    return out + torch.where(a < exact, a, large)


def relative_bias(positions, table, num_buckets, max_distance):
    """#relative-bias-t5-buckets: bias_h(i, j) = table[bucket(p_j - p_i), h].
    positions: int64 [B, S]; table: [num_buckets, H] -> [B, H, S, S]."""
    relative = positions[:, None, :] - positions[:, :, None]
    buckets = relative_bucket(relative, num_buckets, max_distance)
    return table[buckets].permute(0, 3, 1, 2)


def check_positional_math():
    """Asserts the formulas above against the published values (#test-vectors),
    so the reference cannot drift from them."""
    spec = {"base": 10000.0, "layout": "interleaved",
            "denominator": "d_model", "offset": 0}
    code = sinusoidal_code(torch.tensor([1, 3]), 8, spec)
    expected = torch.tensor(
        [[0.841471, 0.540302, 0.099833, 0.995004, 0.010000, 0.999950,
          0.001000, 1.000000],
         [0.141120, -0.989992, 0.295520, 0.955336, 0.029996, 0.999550,
          0.003000, 0.999996]], dtype=torch.float64)
    assert (code - expected).abs().max() < 1e-6, code

    code = sinusoidal_code(torch.arange(51), 64, spec)
    dots = [float(code[0] @ code[k]) for k in (0, 1, 2, 5, 10, 50)]
    for got, want in zip(dots, [32, 30.917, 28.304, 23.504, 21.052, 15.674]):
        assert abs(got - want) < 1e-3, dots

    # The variants: concat puts every cosine after every sine, and
    # half_minus_one makes the last frequency exactly 1/base.
    concat = sinusoidal_code(torch.tensor([3]), 8, dict(spec, layout="concat"))
    interleaved = sinusoidal_code(torch.tensor([3]), 8, spec)
    assert torch.equal(concat[0, :4], interleaved[0, 0::2])
    assert torch.equal(concat[0, 4:], interleaved[0, 1::2])
    w = sinusoidal_frequencies(8, 10000.0, "half_minus_one")
    assert abs(float(w[-1]) - 1e-4) < 1e-18 and float(w[0]) == 1.0
    shifted = sinusoidal_code(torch.tensor([1]), 8, dict(spec, offset=2))
    assert torch.equal(shifted, interleaved)

    q = torch.tensor([1.0, 2.0, 3.0, 4.0], dtype=torch.float64)
    q = q.view(1, 1, 1, 4)
    one = torch.tensor([[1]])
    got = rope_rotate(q, one, 10000.0, "interleaved").flatten()
    want = torch.tensor([-1.142640, 1.922076, 2.959851, 4.029800],
                        dtype=torch.float64)
    assert (got - want).abs().max() < 1e-6, got
    got = rope_rotate(q, one, 10000.0, "half").flatten()
    want = torch.tensor([-1.984111, 1.959901, 2.462378, 4.019800],
                        dtype=torch.float64)
    assert (got - want).abs().max() < 1e-6, got

    def powers(exponents):
        return [2.0 ** -e for e in exponents]
    assert alibi_slopes(8) == powers(range(1, 9))
    assert alibi_slopes(12) == powers(list(range(1, 9)) +
                                      [0.5, 1.5, 2.5, 3.5])
    assert alibi_slopes(6) == powers([2, 4, 6, 8, 1, 3])
    assert alibi_slopes(4) == powers([2, 4, 6, 8])

    def expected_bucket(r):
        if r > 0:
            return expected_bucket(-r) + 16
        a = -r
        for limit, bucket in [(7, None), (11, 8), (15, 9), (22, 10),
                              (31, 11), (45, 12), (63, 13), (90, 14)]:
            if a <= limit:
                return a if bucket is None else bucket
        return 15

    r = torch.arange(-300, 301)
    got = relative_bucket(r, 32, 128).tolist()
    assert got == [expected_bucket(int(x)) for x in r], got
    spot = {0: 0, 1: 17, 8: 24, 64: 30, 91: 31, 1000: 31, -91: 15, -16: 10}
    for distance, bucket in spot.items():
        assert relative_bucket(torch.tensor(distance), 32, 128) == bucket


# --------------------------------------------------------------------------
# The model and its forward pass
# --------------------------------------------------------------------------

class ReferenceModel(nn.Module):
    """Holds the weights under their state_dict names (#tensor-names)."""

    def __init__(self, case):
        super().__init__()
        d_model = case["d_model"]
        eps = case["layer_norm_eps"]
        self.embedding = nn.Embedding(VOCAB_SIZE, d_model)
        if case["scheme"] == "learned":
            self.pos_embedding = nn.Embedding(case["max_positions"], d_model)
        layer = nn.TransformerEncoderLayer(
            d_model, case["num_heads"], case["d_ff"], dropout=0.0,
            activation=case["activation"], layer_norm_eps=eps,
            batch_first=True, norm_first=case["norm_first"])
        final_norm = nn.LayerNorm(d_model, eps=eps) if case["norm_first"] \
            else None
        self.encoder = nn.TransformerEncoder(layer, NUM_LAYERS,
                                             norm=final_norm,
                                             enable_nested_tensor=False)
        if case["scheme"] == "relative":
            self.relative_attention_bias = nn.Embedding(
                case["positional"]["num_buckets"], case["num_heads"])


def randomize(model, case, generator):
    """Non-trivial float32 weights: matrices N(0, (1.2/sqrt(D))^2) so that
    attention is far from uniform, biases N(0, 0.1^2), LayerNorm gains
    1 + N(0, 0.2^2) and shifts N(0, 0.1^2), embeddings N(0, 1) (0.5 when the
    embedding is scaled by sqrt(D)), bias tables N(0, 1)."""
    matrix_std = 1.2 / math.sqrt(case["d_model"])
    embedding_std = 0.5 if case["embedding_scale"] else 1.0
    with torch.no_grad():
        for name, param in model.named_parameters():
            noise = torch.randn(param.shape, generator=generator,
                                dtype=torch.float32)
            if name in ("embedding.weight", "pos_embedding.weight"):
                param.copy_(embedding_std * noise)
            elif name == "relative_attention_bias.weight":
                param.copy_(noise)
            elif "norm" in name and name.endswith("weight"):
                param.copy_(1.0 + 0.2 * noise)
            elif name.endswith("bias"):
                param.copy_(0.1 * noise)
            else:
                param.copy_(matrix_std * noise)


class Hooks:
    """The three places where position enters (#where-position-enters), for
    one case and one dtype."""

    def __init__(self, model, case):
        self.model = model
        self.case = case

    def dtype(self):
        return self.model.embedding.weight.dtype

    def add_to_input(self, x, positions):
        scheme = self.case["scheme"]
        if scheme == "sinusoidal":
            code = sinusoidal_code(positions, self.case["d_model"],
                                   self.case["positional"])
            return x + code.to(x.dtype)
        if scheme == "learned":
            return x + self.model.pos_embedding(positions)
        return x

    def rotate_qk(self, q, k, positions):
        if self.case["scheme"] != "rope":
            return q, k
        base = self.case["positional"]["base"]
        layout = self.case["positional"]["layout"]
        return (rope_rotate(q, positions, base, layout),
                rope_rotate(k, positions, base, layout))

    def attention_bias(self, positions):
        """[B, H, S, S] in the model dtype, or None."""
        scheme = self.case["scheme"]
        if scheme == "alibi":
            return alibi_bias(positions, self.case["num_heads"]).to(
                self.dtype())
        if scheme == "relative":
            positional = self.case["positional"]
            return relative_bias(positions,
                                 self.model.relative_attention_bias.weight,
                                 positional["num_buckets"],
                                 positional["max_distance"])
        return None


def layer_windows(case):
    """Each layer's window w: it attends to keys with |i - j| <= w (0:
    every key)."""
    return case.get("layer_window", [0] * NUM_LAYERS)


def window_far(seq, window):
    """[S, S] bool: true for keys past the window (|i - j| > window); None
    for window 0 (every key). Scores there take the lowest finite value of
    their dtype, so a padded query whose window holds padding only stays
    finite (as with a causal mask)."""
    if window == 0:
        return None
    i = torch.arange(seq)
    return (i[:, None] - i[None, :]).abs() > window


def self_attention(layer, x, hooks, positions, bias, key_mask, window=0):
    """#the-base-encoder, attention with the layer's weights:
    [q; k; v] = x W_in^T + b_in (rows [W_q; W_k; W_v]), per head q and k
    rotated, scores = q k^T / sqrt(d) + bias, keys past the layer's window
    and padded keys excluded, softmax
    over keys, times v, heads concatenated, then the output projection.
    Returns (output [B, S, D], probabilities [B, H, S, S])."""
    attn = layer.self_attn
    batch, seq, d_model = x.shape
    heads = attn.num_heads
    head_dim = d_model // heads
    qkv = F.linear(x, attn.in_proj_weight, attn.in_proj_bias)
    q, k, v = (t.reshape(batch, seq, heads, head_dim).transpose(1, 2)
               for t in qkv.chunk(3, dim=-1))
    q, k = hooks.rotate_qk(q, k, positions)
    scores = q @ k.transpose(-1, -2) / math.sqrt(head_dim)
    if bias is not None:
        scores = scores + bias
    far = window_far(seq, window)
    if far is not None:
        scores = scores.masked_fill(far, torch.finfo(scores.dtype).min)
    if key_mask is not None:
        scores = scores.masked_fill(~key_mask[:, None, None, :], -math.inf)
    probs = scores.softmax(dim=-1)
    out = (probs @ v).transpose(1, 2).reshape(batch, seq, d_model)
    return attn.out_proj(out), probs


def feed_forward(layer, x, activation):
    """W2 act(W1 x + b1) + b2, act relu or exact-erf gelu."""
    act = F.relu if activation == "relu" else F.gelu
    return layer.linear2(act(layer.linear1(x)))


def encoder_forward(model, case, ids, positions, key_mask=None):
    """The full encoder (#the-base-encoder, post- or pre-norm) with
    explicit positional hooks. ids, positions: int64 [B, S]; key_mask: bool
    [B, S] (true for real tokens) or None. Returns (tokens [B, S, D],
    [probabilities [B, H, S, S] per layer])."""
    hooks = Hooks(model, case)
    x = model.embedding(ids)
    if case["embedding_scale"]:
        x = x * math.sqrt(case["d_model"])
    x = hooks.add_to_input(x, positions)
    bias = hooks.attention_bias(positions)
    maps = []
    for layer, window in zip(model.encoder.layers, layer_windows(case)):
        if case["norm_first"]:
            attended, probs = self_attention(layer, layer.norm1(x), hooks,
                                             positions, bias, key_mask, window)
            x = x + attended
            x = x + feed_forward(layer, layer.norm2(x), case["activation"])
        else:
            attended, probs = self_attention(layer, x, hooks, positions, bias,
                                             key_mask, window)
            x = layer.norm1(x + attended)
            x = layer.norm2(x + feed_forward(layer, x, case["activation"]))
        maps.append(probs)
    if model.encoder.norm is not None:
        x = model.encoder.norm(x)
    return x, maps


def torch_layers_forward(model, case, ids, positions):
    """The same forward pass through PyTorch's own nn.TransformerEncoder
    layers and nn.MultiheadAttention, the bias and each layer's window
    passed as a float mask ([B*H, S, S] or [S, S]). Only for schemes that do not rotate q and k; unpadded.
    Returns (tokens, [probabilities per layer])."""
    assert case["scheme"] != "rope"
    hooks = Hooks(model, case)
    x = model.embedding(ids)
    if case["embedding_scale"]:
        x = x * math.sqrt(case["d_model"])
    x = hooks.add_to_input(x, positions)
    bias = hooks.attention_bias(positions)
    maps = []
    for layer, window in zip(model.encoder.layers, layer_windows(case)):
        mask = None if bias is None else bias.flatten(0, 1)
        far = window_far(x.shape[1], window)
        if far is not None:
            local = torch.zeros(far.shape, dtype=x.dtype).masked_fill(
                far, torch.finfo(x.dtype).min)
            mask = local if mask is None else mask + local
        attn_in = layer.norm1(x) if case["norm_first"] else x
        _, probs = layer.self_attn(attn_in, attn_in, attn_in, attn_mask=mask,
                                   need_weights=True,
                                   average_attn_weights=False)
        maps.append(probs)
        x = layer(x, src_mask=mask)
    if model.encoder.norm is not None:
        x = model.encoder.norm(x)
    return x, maps


def relative_error(ours, reference):
    """max |ours - reference| / max |reference|."""
    ours, reference = ours.to(torch.float64), reference.to(torch.float64)
    scale = reference.abs().max().clamp(min=1e-300)
    return float((ours - reference).abs().max() / scale)


# --------------------------------------------------------------------------
# safetensors
# --------------------------------------------------------------------------

SAFETENSORS_DTYPES = {torch.float32: "F32", torch.float64: "F64",
                      torch.int64: "I64"}


def safetensors_bytes(tensors):
    """#the-safetensors-format: u64 little-endian header length N, N bytes of
    JSON (space padded to a multiple of 8), then the tensors' little-endian
    row-major bytes, contiguous in name order, no holes."""
    header = {}
    chunks = []
    offset = 0
    for name in sorted(tensors):
        tensor = tensors[name].detach().cpu().contiguous()
        array = tensor.numpy()
        data = array.astype(array.dtype.newbyteorder("<"), copy=False)
        data = data.tobytes()
        header[name] = {"dtype": SAFETENSORS_DTYPES[tensor.dtype],
                        "shape": list(tensor.shape),
                        "data_offsets": [offset, offset + len(data)]}
        chunks.append(data)
        offset += len(data)
    text = json.dumps(header, sort_keys=True, separators=(",", ":"))
    text = text.encode("utf-8")
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(chunks)


def parse_safetensors(blob):
    """Inverse of safetensors_bytes (for the round-trip check)."""
    numpy_dtypes = {"F32": "<f4", "F64": "<f8", "I64": "<i8"}
    torch_dtypes = {v: k for k, v in SAFETENSORS_DTYPES.items()}
    (length,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + length].decode("utf-8"))
    data = blob[8 + length:]
    tensors = {}
    for name, entry in header.items():
        begin, end = entry["data_offsets"]
        array = numpy.frombuffer(data[begin:end],
                                 dtype=numpy_dtypes[entry["dtype"]])
        tensors[name] = torch.from_numpy(array.copy()).to(
            torch_dtypes[entry["dtype"]]).reshape(entry["shape"])
    assert max((e["data_offsets"][1] for e in header.values()),
               default=0) == len(data)
    return tensors


def write_safetensors(path, tensors):
    blob = safetensors_bytes(tensors)
    back = parse_safetensors(blob)
    assert back.keys() == tensors.keys()
    for name, tensor in tensors.items():
        assert back[name].dtype == tensor.dtype, name
        assert torch.equal(back[name], tensor.detach().cpu()), name
    with open(path, "wb") as f:
        f.write(blob)


# --------------------------------------------------------------------------
# One case
# --------------------------------------------------------------------------

def random_ids(generator, *shape):
    return torch.randint(0, VOCAB_SIZE, shape, generator=generator,
                         dtype=torch.int64)


def check_against_torch_layers(model, case, ids, positions, tokens, maps):
    """Our float64 forward pass equals PyTorch's own layers (where they can
    express the scheme)."""
    if case["scheme"] == "rope":
        return
    torch_tokens, torch_maps = torch_layers_forward(model, case, ids,
                                                    positions)
    assert relative_error(tokens, torch_tokens) < FLOAT64_TOLERANCE
    for ours, theirs in zip(maps, torch_maps):
        assert relative_error(ours, theirs) < FLOAT64_TOLERANCE


class Float32Check:
    """Tracks the float32 model's worst relative error against float64."""

    def __init__(self, model32, case):
        self.model32 = model32
        self.case = case
        self.worst = 0.0

    def compare(self, ids, positions, tokens64, maps64):
        tokens32, maps32 = encoder_forward(self.model32, self.case, ids,
                                           positions)
        errors = [relative_error(tokens32, tokens64),
                  relative_error(tokens32.mean(dim=1), tokens64.mean(dim=1)),
                  relative_error(tokens32[:, 0], tokens64[:, 0])]
        errors += [relative_error(a, b) for a, b in zip(maps32, maps64)]
        if self.case["scheme"] != "rope":
            torch32, _ = torch_layers_forward(self.model32, self.case, ids,
                                              positions)
            errors.append(relative_error(torch32, tokens64))
        self.worst = max(self.worst, *errors)
        assert self.worst < CONTRACT_TOLERANCE, (self.case["name"], errors)


# The reduced precisions reference_test also runs in, by the names of
# ENCODER_REFERENCE_DTYPE.
REDUCED_DTYPES = {"float16": torch.float16, "bfloat16": torch.bfloat16}


def reduced_precision_error(model32, case, expected, dtype):
    """PyTorch's own error at a reduced precision, which bounds ours there:
    the float32 weights cast to `dtype`, the same forward pass
    (encoder_forward) run in it on the CPU, and the worst relative error
    against the float64 results in `expected` over the tensors
    reference_test compares (each input alone, the padded batch, the
    shifted positions)."""
    model = copy.deepcopy(model32).to(dtype)
    errors = []
    for k in range(len(case["lengths"])):
        tokens, attention = run_alone(model, case, expected[f"ids_{k}"])
        reference = expected[f"tokens_{k}"]
        errors += [relative_error(tokens, reference),
                   relative_error(tokens.mean(dim=0), reference.mean(dim=0)),
                   relative_error(tokens[0], reference[0]),
                   relative_error(attention, expected[f"attention_{k}"])]
    batch_ids, lengths = expected["batch_ids"], expected["batch_lengths"]
    key_mask = torch.arange(batch_ids.shape[1])[None, :] < lengths[:, None]
    positions = torch.arange(batch_ids.shape[1]).expand_as(batch_ids)
    tokens, maps = encoder_forward(model, case, batch_ids, positions, key_mask)
    for b, length in enumerate(lengths.tolist()):
        errors.append(relative_error(tokens[b, :length],
                                     expected[f"batch_tokens_{b}"]))
        attention = torch.stack([m[b, :, :length, :length] for m in maps])
        errors.append(relative_error(attention,
                                     expected[f"batch_attention_{b}"]))
    shift_positions = torch.arange(SHIFT_LENGTH) + SHIFT_OFFSET
    tokens, _ = run_alone(model, case, expected["shift_ids"], shift_positions)
    errors.append(relative_error(tokens, expected["shift_tokens"]))
    return max(errors)


def run_alone(model, case, ids, positions=None):
    """One sequence [S] -> (tokens [S, D], attention [L, H, S, S])."""
    ids = ids[None, :]
    if positions is None:
        positions = torch.arange(ids.shape[1])
    positions = positions[None, :]
    tokens, maps = encoder_forward(model, case, ids, positions)
    return tokens[0], torch.stack([m[0] for m in maps])


def attention_statistics(attention):
    """Per layer and head statistics of maps [L, H, S, S]
    (#attention-statistics) -> [L, H, 6]: entropy in nats, mean distance
    sum_j a_ij |i - j|, and the mass on self, previous, next and first
    token, each averaged over the S query rows (rows without a previous or
    next token count 0 for it)."""
    a = attention.double()
    size = a.shape[-1]
    index = torch.arange(size, dtype=torch.float64)
    distance = (index[:, None] - index[None, :]).abs()
    logs = torch.where(a > 0, a.log(), torch.zeros_like(a))
    entropy = -(a * logs).sum(-1).mean(-1)
    mean_distance = (a * distance).sum(-1).mean(-1)
    diagonal = a.diagonal(dim1=-2, dim2=-1)
    self_mass = diagonal.mean(-1)
    prev_mass = a.diagonal(offset=-1, dim1=-2, dim2=-1).sum(-1) / size
    next_mass = a.diagonal(offset=1, dim1=-2, dim2=-1).sum(-1) / size
    first_mass = a[..., :, 0].mean(-1)
    return torch.stack([entropy, mean_distance, self_mass, prev_mass,
                        next_mass, first_mass], dim=-1)


def build_case(case, out_dir):
    """Writes one case's directory; returns its manifest entry."""
    seed = zlib.crc32(case["name"].encode("utf-8"))
    generator = torch.Generator().manual_seed(seed)
    model32 = ReferenceModel(case).eval()
    randomize(model32, case, generator)
    model = copy.deepcopy(model32).double()
    check32 = Float32Check(model32, case)
    expected = {}

    for k, length in enumerate(case["lengths"]):
        ids = random_ids(generator, length)
        tokens, attention = run_alone(model, case, ids)
        check_against_torch_layers(model, case, ids[None],
                                   torch.arange(length)[None], tokens[None],
                                   list(attention[:, None]))
        check32.compare(ids[None], torch.arange(length)[None], tokens[None],
                        list(attention[:, None]))
        expected[f"ids_{k}"] = ids
        expected[f"tokens_{k}"] = tokens
        expected[f"pooled_mean_{k}"] = tokens.mean(dim=0)
        expected[f"pooled_first_{k}"] = tokens[0]
        expected[f"attention_{k}"] = attention
        expected[f"stats_{k}"] = attention_statistics(attention)

    # Padded batch: each sequence's expected output is its output alone.
    lengths = torch.tensor(BATCH_LENGTHS, dtype=torch.int64)
    batch_ids = random_ids(generator, len(BATCH_LENGTHS), int(lengths.max()))
    key_mask = torch.arange(batch_ids.shape[1])[None, :] < lengths[:, None]
    positions = torch.arange(batch_ids.shape[1]).expand_as(batch_ids)
    batch_tokens, batch_maps = encoder_forward(model, case, batch_ids,
                                               positions, key_mask)
    expected["batch_ids"] = batch_ids
    expected["batch_lengths"] = lengths
    pooled_mean, pooled_first = [], []
    for b, length in enumerate(BATCH_LENGTHS):
        tokens, attention = run_alone(model, case, batch_ids[b, :length])
        assert relative_error(batch_tokens[b, :length],
                              tokens) < FLOAT64_TOLERANCE
        for layer, probs in enumerate(batch_maps):
            assert relative_error(probs[b, :, :length, :length],
                                  attention[layer]) < FLOAT64_TOLERANCE
            padded_keys = probs[b, :, :length, length:]
            assert padded_keys.numel() == 0 or float(padded_keys.max()) == 0
        expected[f"batch_tokens_{b}"] = tokens
        expected[f"batch_attention_{b}"] = attention
        pooled_mean.append(tokens.mean(dim=0))
        pooled_first.append(tokens[0])
    expected["batch_pooled_mean"] = torch.stack(pooled_mean)
    expected["batch_pooled_first"] = torch.stack(pooled_first)

    # Shifted positions c .. c+S-1 (#shift).
    shift_ids = random_ids(generator, SHIFT_LENGTH)
    shift_positions = torch.arange(SHIFT_LENGTH) + SHIFT_OFFSET
    shift_tokens, shift_attention = run_alone(model, case, shift_ids,
                                              shift_positions)
    check_against_torch_layers(model, case, shift_ids[None],
                               shift_positions[None], shift_tokens[None],
                               list(shift_attention[:, None]))
    check32.compare(shift_ids[None], shift_positions[None], shift_tokens[None],
                    list(shift_attention[:, None]))
    unshifted, _ = run_alone(model, case, shift_ids)
    shift_change = relative_error(shift_tokens, unshifted)
    if case["scheme"] in ("none", "rope", "alibi", "relative"):
        assert shift_change < FLOAT64_TOLERANCE, (case["name"], shift_change)
    else:
        assert shift_change > 1e-2, (case["name"], shift_change)
    expected["shift_ids"] = shift_ids
    expected["shift_offset"] = torch.tensor(SHIFT_OFFSET, dtype=torch.int64)
    expected["shift_tokens"] = shift_tokens

    # Without a positional scheme the encoder is permutation-equivariant.
    ids = expected["ids_2"]
    permutation = torch.randperm(len(ids), generator=generator)
    permuted, _ = run_alone(model, case, ids[permutation])
    permutation_change = relative_error(permuted,
                                        expected["tokens_2"][permutation])
    if case["scheme"] == "none":
        assert permutation_change < FLOAT64_TOLERANCE
    else:
        assert permutation_change > 1e-2, (case["name"], permutation_change)

    directory = os.path.join(out_dir, case["name"])
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump(config_json(case), f, indent=2, sort_keys=True)
        f.write("\n")
    weights = {name: t.detach() for name, t in model32.state_dict().items()}
    write_safetensors(os.path.join(directory, "weights.safetensors"), weights)
    write_safetensors(os.path.join(directory, "expected.safetensors"),
                      {name: t.detach() for name, t in expected.items()})
    return {"name": case["name"], "scheme": case["scheme"],
            "lengths": case["lengths"], "batch_lengths": BATCH_LENGTHS,
            "shift_offset": SHIFT_OFFSET,
            "float32_relative_error": check32.worst,
            "torch_relative_error": {
                name: reduced_precision_error(model32, case, expected, dtype)
                for name, dtype in REDUCED_DTYPES.items()}}


def main(argv):
    if len(argv) != 2:
        sys.stderr.write("usage: make_reference.py OUT_DIR\n")
        return 2
    out_dir = argv[1]
    torch.set_num_threads(1)
    torch.manual_seed(0)
    # PyTorch 2.x's inference fast path of nn.TransformerEncoderLayer and
    # nn.MultiheadAttention does not apply a per-head float mask [B*H, S, S]
    # as the documented general path does (float32 ALiBi came out 0.9 off
    # the float64 result): the comparison runs the general path.
    mha = getattr(torch.backends, "mha", None)
    if mha is not None and hasattr(mha, "set_fastpath_enabled"):
        mha.set_fastpath_enabled(False)
    check_positional_math()
    # The manifest is written last: a run that fails leaves none behind.
    manifest_path = os.path.join(out_dir, "manifest.json")
    if os.path.exists(manifest_path):
        os.remove(manifest_path)
    os.makedirs(out_dir, exist_ok=True)
    entries = []
    with torch.no_grad():
        for case in all_cases():
            entries.append(build_case(case, out_dir))
            reduced = entries[-1]["torch_relative_error"]
            print(f"{case['name']}: float32 relative error "
                  f"{entries[-1]['float32_relative_error']:.2e}; PyTorch's "
                  f"own at float16 {reduced['float16']:.2e}, at bfloat16 "
                  f"{reduced['bfloat16']:.2e}")
    manifest = {"contract_tolerance": CONTRACT_TOLERANCE, "cases": entries}
    with open(manifest_path, "w") as f:
        json.dump(manifest, f, indent=2)
        f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
