"""Emulates the server's int8 linear (int8_linear.h) in PyTorch on a
sentence-transformers model and prints its quality against float32 on the
peers harness's quality texts, for three bit splits of the u8 x s8 product:
8-bit weights with 7-bit activations (the server's choice without VNNI
when channels are kept in float32), 7-bit weights with 8-bit activations
(its choice without VNNI when none are), and 8 + 8 (what a VNNI CPU runs;
on AVX2 the kernel's 16-bit pair sums may saturate). Each split runs
with each row centred (the server) and with each row scaled by its max |x|
alone (the server before). With --per-kind it also keeps one kind of
linear at a time in float32. With --outliers K it also keeps, in each
linear, the K input channels of largest |x| in float32 (a separate float
product), the channels found on the first --calibration texts of
--calibration-file, or on seeded random token ids with 'random'.

Each linear: rows mapped onto [-1, 1] by their centre and half range (or
divided by max |x|), one anchor row (+1, -1) appended so the dynamic
kernel's range is [-1, 1], weights per output channel, LibTorch's oneDNN
quantized::linear_dynamic, then h (W q) + c (W 1) (or the factor
multiplied back).

Usage: .venv/bin/python tests/bench/peers/int8_emulation.py \
    build-peers/models/minilm/st build-peers/texts/minilm/quality.json \
    [--per-kind] [--outliers 8 --calibration-file build-peers/texts/minilm/bulk.txt]
"""
import argparse
import json

import torch
from scipy.stats import spearmanr
from sentence_transformers import SentenceTransformer


def int8_forward(linear, weight_levels, reduce_range, centred, keep=None):
    """keep: indices of input channels computed in float32, or None."""
    w = linear.weight.detach().float().clone()
    kept_w = None
    if keep is not None:
        kept_w = w[:, keep].clone()
        w[:, keep] = 0
    scales = (w.abs().amax(1) / weight_levels).clamp_min(1e-12).double()
    qw = torch.quantize_per_channel(
        w, scales, torch.zeros(w.shape[0], dtype=torch.long), 0, torch.qint8)
    sums = qw.dequantize().sum(1)
    packed = torch.ops.quantized.linear_prepack(qw, None)
    anchor = torch.zeros(1, w.shape[1])
    anchor[0, 0], anchor[0, 1] = 1.0, -1.0
    bias = linear.bias

    def forward(x):
        rows = x.reshape(-1, x.shape[-1])
        extra = None
        if keep is not None:
            extra = rows[:, keep] @ kept_w.T
            rows = rows.clone()
            rows[:, keep] = 0
        n = rows.shape[0]
        if centred:
            hi, lo = rows.amax(1, keepdim=True), rows.amin(1, keepdim=True)
            c, h = (hi + lo) / 2, ((hi - lo) / 2).clamp_min(1e-30)
            y = torch.ops.quantized.linear_dynamic(
                torch.cat([(rows - c) / h, anchor]), packed, reduce_range)
            y = y[:n] * h + c * sums
        else:
            s = rows.abs().amax(1, keepdim=True).clamp_min(1e-30)
            y = torch.ops.quantized.linear_dynamic(
                torch.cat([rows / s, anchor]), packed, reduce_range)
            y = y[:n] * s
        if extra is not None:
            y = y + extra
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
    p.add_argument("--outliers", type=int, default=0)
    p.add_argument("--calibration-file", default="random")
    p.add_argument("--calibration", type=int, default=64)
    a = p.parse_args()
    torch.set_num_threads(1)
    torch.backends.quantized.engine = "onednn"
    texts = json.load(open(a.texts))
    m = SentenceTransformer(a.model, device="cpu")

    def encode(t=texts):
        with torch.inference_mode():
            return m.encode(t, batch_size=32, convert_to_tensor=True,
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
        print("%-40s mean cos %.5f  min %.5f  spearman %.5f" % (
            label, cos.mean(), cos.min(),
            spearmanr(sims, ref_sims).correlation), flush=True)

    def use(levels, reduce, centred, keep=None, float_kind=None):
        for n, l in linears:
            l.forward = (original[id(l)] if kind(n) == float_kind else
                         int8_forward(l, levels, reduce, centred,
                                      keep[n] if keep else None))

    for centred in (True, False):
        for levels, reduce, label in ((127, True, "w8 a7"),
                                      (63, False, "w7 a8"),
                                      (127, False, "w8 a8")):
            use(levels, reduce, centred)
            report(label + (", centred" if centred else ", max |x|"))
    if a.per_kind:
        for keep in sorted(set(kind(n) for n, _ in linears)):
            use(63, False, True, float_kind=keep)
            report("w7 a8 centred, float32 " + keep)
    if a.outliers:
        for _, l in linears:
            l.forward = original[id(l)]
        amax = {}

        def hook(name):
            def record(module, inputs, output):
                x = inputs[0].reshape(-1, inputs[0].shape[-1]).abs().amax(0)
                amax[name] = (torch.maximum(amax[name], x) if name in amax
                              else x)
            return record
        hooks = [l.register_forward_hook(hook(n)) for n, l in linears]
        if a.calibration_file == "random":
            g = torch.Generator().manual_seed(0)
            model = m[0].auto_model
            ids = torch.randint(1000, model.config.vocab_size,
                                (a.calibration // 4, 128), generator=g)
            ids[:, 0] = m.tokenizer.cls_token_id
            ids[:, -1] = m.tokenizer.sep_token_id
            with torch.inference_mode():
                model(input_ids=ids, attention_mask=torch.ones_like(ids))
        else:
            lines = [t.strip() for t in open(a.calibration_file) if t.strip()]
            encode(lines[:a.calibration])
        for h in hooks:
            h.remove()
        keep = {n: amax[n].topk(a.outliers).indices for n, _ in linears}
        for levels, reduce, label in ((127, True, "w8 a7 (server, no VNNI)"),
                                      (63, False, "w7 a8"),
                                      (127, False, "w8 a8")):
            use(levels, reduce, True, keep=keep)
            report("%s centred, %d float32 channels" % (label, a.outliers))


if __name__ == "__main__":
    main()
