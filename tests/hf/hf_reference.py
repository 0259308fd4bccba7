#!/usr/bin/env python3
"""Independent float64 PyTorch forward of each Hugging Face encoder family.

Written from the math of the families' modeling code in transformers
(modeling_bert, modeling_roberta, modeling_roformer, modeling_modernbert,
modeling_t5, modeling_marian) and Jina's JinaBERT implementation. It reads a
checkpoint directory (config.json, safetensors, sentence-transformers
files) and returns, per input sequence of token ids (no padding, token type
0), what the families return: last_hidden_state [S, D], the attention
probabilities of every layer [L, H, S, S] (output_attentions=True) and the
pooled sentence embedding.

Usage: hf_reference.py --self-test   (checks the exact properties below)
       hf_reference.py DIR IDS       (prints shapes and norms; IDS: 1,2,3)
"""
import json
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_io  # noqa: E402

F = torch.nn.functional
DT = torch.float64


def activation(name):
    """ACT2FN of transformers for the names these configs use."""
    if name == "gelu":  # exact, erf form
        return lambda x: 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))
    if name in ("gelu_new", "gelu_pytorch_tanh"):
        c = math.sqrt(2.0 / math.pi)
        return lambda x: 0.5 * x * (1.0 + torch.tanh(c * (x + 0.044715 * x ** 3)))
    if name == "relu":
        return torch.relu
    if name in ("silu", "swish"):
        return lambda x: x * torch.sigmoid(x)
    raise ValueError(f"activation {name} not in the reference")


def layer_norm(x, weight, bias, eps):
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)
    y = (x - mean) / torch.sqrt(var + eps) * weight
    return y if bias is None else y + bias


def rms_norm(x, weight, eps):
    """T5LayerNorm: no mean subtraction, no bias."""
    return x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps) * weight


def roberta_position_ids(ids, padding_idx):
    """create_position_ids_from_input_ids: real tokens count up from
    padding_idx + 1, padding tokens keep padding_idx."""
    mask = (ids != padding_idx).long()
    return torch.cumsum(mask, 0) * mask + padding_idx


def rotary_angles(positions, dim, base):
    """[S, dim/2] angles p * base^(-2i/dim)."""
    i = torch.arange(dim // 2, dtype=DT)
    return positions.to(DT)[:, None] * torch.pow(base, -2.0 * i / dim)[None, :]


def rotate_interleaved(x, angles):
    """RoFormer: pairs (x_2i, x_2i+1) rotated by angles[:, i]."""
    cos, sin = torch.cos(angles), torch.sin(angles)
    even, odd = x[..., 0::2], x[..., 1::2]
    out = torch.empty_like(x)
    out[..., 0::2] = even * cos - odd * sin
    out[..., 1::2] = even * sin + odd * cos
    return out


def rotate_half(x, angles):
    """ModernBERT / LLaMA: pairs (x_i, x_i+d/2) rotated by angles[:, i]."""
    cos = torch.cat([torch.cos(angles)] * 2, -1)
    sin = torch.cat([torch.sin(angles)] * 2, -1)
    half = x.shape[-1] // 2
    turned = torch.cat([-x[..., half:], x[..., :half]], -1)
    return x * cos + turned * sin


def alibi_slopes(n):
    """ALiBi head slopes: powers of two geometric; otherwise the closest
    power of two's slopes, then every other slope of twice as many heads."""
    def power_of_2(k):
        start = 2 ** (-(2 ** -(math.log2(k) - 3)))
        return [start * start ** i for i in range(k)]
    if math.log2(n).is_integer():
        return power_of_2(n)
    closest = 2 ** math.floor(math.log2(n))
    return power_of_2(closest) + alibi_slopes(2 * closest)[0::2][:n - closest]


def t5_bucket(relative_position, num_buckets, max_distance):
    """T5Attention._relative_position_bucket, bidirectional; the log branch
    in float32 as transformers computes it."""
    num_buckets //= 2
    buckets = (relative_position > 0).long() * num_buckets
    n = relative_position.abs()
    max_exact = num_buckets // 2
    large = max_exact + (
        torch.log(n.float() / max_exact) / math.log(max_distance / max_exact)
        * (num_buckets - max_exact)).long()
    large = torch.clamp(large, max=num_buckets - 1)
    return buckets + torch.where(n < max_exact, n, large)


def sinusoid(positions, dim):
    """Marian / RoFormer table: [sin(p w_0..) | cos(p w_0..)], w_i =
    10000^(-2i/dim)."""
    angles = rotary_angles(positions, dim, 10000.0)
    return torch.cat([torch.sin(angles), torch.cos(angles)], -1)


def attention(q, k, v, scale, bias=None):
    """q, k, v [H, S, d] -> (context [S, H*d], probs [H, S, S])."""
    scores = torch.matmul(q, k.transpose(-1, -2)) * scale
    if bias is not None:
        scores = scores + bias
    probs = torch.softmax(scores, -1)
    ctx = torch.matmul(probs, v)
    return ctx.transpose(0, 1).reshape(q.shape[1], -1), probs


def heads(x, n):
    """[S, n*d] -> [n, S, d]."""
    return x.reshape(x.shape[0], n, -1).transpose(0, 1)


def linear(x, w, name, bias=True):
    out = x @ w[f"{name}.weight"].T
    return out + w[f"{name}.bias"] if bias else out


def _new_name(name):
    """transformers' renaming on load of old LayerNorm parameter names."""
    if name.endswith(".gamma"):
        return name[:-len(".gamma")] + ".weight"
    if name.endswith(".beta"):
        return name[:-len(".beta")] + ".bias"
    return name


class Checkpoint:
    """config.json, float64 tensors and sentence-transformers modules of a
    checkpoint directory."""

    def __init__(self, directory):
        self.directory = directory
        with open(os.path.join(directory, "config.json")) as f:
            self.config = json.load(f)
        self.w = {_new_name(k): v.to(DT) if v.is_floating_point() else v
                  for k, v in safetensors_io.read_checkpoint(directory).items()}
        self.pooling, self.dense, self.normalize = "mean", None, False
        modules_path = os.path.join(directory, "modules.json")
        if os.path.exists(modules_path):
            self._read_modules(modules_path)

    def _read_modules(self, path):
        with open(path) as f:
            modules = json.load(f)
        for module in modules:
            kind = module["type"].rsplit(".", 1)[-1]
            sub = os.path.join(self.directory, module["path"])
            if kind == "Pooling":
                with open(os.path.join(sub, "config.json")) as f:
                    cfg = json.load(f)
                modes = [k[len("pooling_mode_"):] for k, v in cfg.items()
                         if k.startswith("pooling_mode_") and v]
                assert len(modes) == 1, modes
                self.pooling = {"cls_token": "cls", "mean_tokens": "mean",
                                "max_tokens": "max", "lasttoken": "lasttoken",
                                "weightedmean_tokens": "weightedmean"}[modes[0]]
            elif kind == "Dense":
                with open(os.path.join(sub, "config.json")) as f:
                    cfg = json.load(f)
                tensors = safetensors_io.read_file(
                    os.path.join(sub, "model.safetensors"))
                self.dense = ({k: v.to(DT) for k, v in tensors.items()},
                              cfg["activation_function"].rsplit(".", 1)[-1])
            elif kind == "Normalize":
                self.normalize = True

    def pool(self, hidden):
        """Sentence embedding of one unpadded sequence's hidden [S, D]."""
        out = self.pool_tokens(hidden)
        if self.dense is not None:
            tensors, act = self.dense
            out = out @ tensors["linear.weight"].T
            if "linear.bias" in tensors:
                out = out + tensors["linear.bias"]
            out = {"Tanh": torch.tanh, "Identity": lambda x: x}[act](out)
        if self.normalize:
            out = out / torch.clamp(out.norm(), min=1e-12)
        return out

    def pool_tokens(self, hidden):
        """The pooling module alone on hidden [S, D] -> [D]."""
        if self.pooling == "cls":
            out = hidden[0]
        elif self.pooling == "mean":
            out = hidden.mean(0)
        elif self.pooling == "max":
            out = hidden.max(0).values
        elif self.pooling == "lasttoken":
            out = hidden[-1]
        else:  # weightedmean: weights 1..S
            weights = torch.arange(1, hidden.shape[0] + 1, dtype=DT)[:, None]
            out = (hidden * weights).sum(0) / weights.sum()
        return out


def family(config):
    if config["model_type"] == "bert" and \
            config.get("position_embedding_type") == "alibi":
        return "jinabert"
    return config["model_type"]


def forward(ckpt, ids):
    """{hidden [S, D], attentions [L, H, S, S], pooled [D'], states
    [L + 1, S, D]} for one sequence of token ids."""
    import hf_reference_families as fam  # noqa: E402 (the family forwards)
    ids = torch.tensor(ids, dtype=torch.long)
    run = {"bert": fam.bert_like, "roberta": fam.bert_like,
           "xlm-roberta": fam.bert_like, "roformer": fam.bert_like,
           "jinabert": fam.bert_like, "modernbert": fam.modernbert,
           "t5": fam.t5_encoder, "marian": fam.marian_encoder,
           "mpnet": fam.mpnet}
    hidden, probs, states = run[family(ckpt.config)](ckpt, ids)
    return {"hidden": hidden, "attentions": torch.stack(probs),
            "pooled": ckpt.pool(hidden), "states": torch.stack(states)}


def main(argv):
    if argv[1:] == ["--self-test"]:
        import hf_reference_checks
        return hf_reference_checks.main()
    ckpt = Checkpoint(argv[1])
    out = forward(ckpt, [int(t) for t in argv[2].split(",")])
    for key, value in out.items():
        print(key, list(value.shape), float(value.norm()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
