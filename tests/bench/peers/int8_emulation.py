"""Emulates the server's int8 linear (int8_linear.h) in PyTorch on a
sentence-transformers model and prints its quality against float32 on the
peers harness's quality texts, for three bit splits of the u8 x s8 product:
8-bit weights with 7-bit activations, 7-bit weights with 8-bit
activations (the server's choice without VNNI), and 8 + 8 (what a VNNI CPU
runs; on AVX2 the kernel's 16-bit pair sums may saturate). With --per-kind
it also keeps one kind of linear at a time in float32.

Each linear: rows divided by their own max |x|, one anchor row (+1, -1)
appended so the dynamic kernel's range is [-1, 1], weights per output
channel, LibTorch's oneDNN quantized::linear_dynamic, the row factor
multiplied back.

Usage: .venv/bin/python tests/bench/peers/int8_emulation.py \
    build-peers/models/minilm/st build-peers/texts/minilm/quality.json
"""
import argparse
import json

import torch
from scipy.stats import spearmanr
from sentence_transformers import SentenceTransformer


def int8_forward(linear, weight_levels, reduce_range):
    w = linear.weight.detach().float().contiguous()
    scales = (w.abs().amax(1) / weight_levels).clamp_min(1e-12).double()
    qw = torch.quantize_per_channel(
        w, scales, torch.zeros(w.shape[0], dtype=torch.long), 0, torch.qint8)
    packed = torch.ops.quantized.linear_prepack(qw, None)
    anchor = torch.zeros(1, w.shape[1])
    anchor[0, 0], anchor[0, 1] = 1.0, -1.0
    bias = linear.bias

    def forward(x):
        rows = x.reshape(-1, x.shape[-1])
        s = rows.abs().amax(1, keepdim=True).clamp_min(1e-30)
        y = torch.ops.quantized.linear_dynamic(
            torch.cat([rows / s, anchor]), packed, reduce_range)
        y = y[:rows.shape[0]] * s
        if bias is not None:
            y = y + bias
        return y.reshape(*x.shape[:-1], w.shape[0])
    return forward


def kind(name):
    for k in ("attention.output.dense", "intermediate.dense", "output.dense"):
        if name.endswith(k):
            return k
    return name.split(".")[-1]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("model")
    p.add_argument("texts")
    p.add_argument("--per-kind", action="store_true")
    a = p.parse_args()
    torch.set_num_threads(1)
    torch.backends.quantized.engine = "onednn"
    texts = json.load(open(a.texts))
    m = SentenceTransformer(a.model, device="cpu")

    def encode():
        with torch.inference_mode():
            return m.encode(texts, batch_size=32, convert_to_tensor=True,
                            normalize_embeddings=True)
    ref = encode()
    iu = torch.triu_indices(len(texts), len(texts), 1)
    ref_sims = (ref @ ref.T)[iu[0], iu[1]].numpy()
    linears = [(n, l) for n, l in m.named_modules()
               if isinstance(l, torch.nn.Linear)]
    original = {id(l): l.forward for _, l in linears}

    def report(label):
        e = encode()
        cos = (e * ref).sum(1)
        sims = (e @ e.T)[iu[0], iu[1]].numpy()
        print("%-28s mean cos %.5f  min %.5f  spearman %.5f" % (
            label, cos.mean(), cos.min(),
            spearmanr(sims, ref_sims).correlation), flush=True)

    for levels, reduce, label in ((127, True, "w8 a7"),
                                  (63, False, "w7 a8 (server, no VNNI)"),
                                  (127, False, "w8 a8")):
        for _, l in linears:
            l.forward = int8_forward(l, levels, reduce)
        report(label)
    if a.per_kind:
        for keep in sorted(set(kind(n) for n, _ in linears)):
            for n, l in linears:
                l.forward = (original[id(l)] if kind(n) == keep
                             else int8_forward(l, 63, False))
            report("w7 a8, float32 " + keep)


if __name__ == "__main__":
    main()
