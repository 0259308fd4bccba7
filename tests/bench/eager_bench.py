#!/usr/bin/env python3
"""Our forward against PyTorch eager on the same weights, in one run.

Builds the default-size model (vocab 10000, width 512, 8 heads, feed-forward
2048, sinusoidal positions) as nn.Embedding + nn.TransformerEncoder, saves
its state_dict as safetensors with a model repository, then measures
tokens/s of
  - PyTorch eager (inference mode; nn.TransformerEncoder's own fast path),
  - encoder-bench-forward on the same repository (our pad/forward/slice),
at each batch size, on the given device and dtype. Prints a table with the
ratio ours / eager. Meant for a GPU (--device cuda, float32 and bfloat16);
runs on CPU too.

Usage (the project's .venv: torch):
  .venv/bin/python tests/bench/eager_bench.py BUILD_DIR [--device cuda]
         [--dtype bfloat16] [--batch-sizes 1,2,4,...,256] [--length 128]
         [--layers 4]
"""
import argparse
import importlib.util
import json
import math
import os
import pathlib
import subprocess
import sys
import tempfile
import time

import torch
from torch import nn

HERE = pathlib.Path(__file__).resolve().parent


def load_writer():
    """write_safetensors from the reference generator (one format writer)."""
    path = HERE.parent / "reference" / "make_reference.py"
    spec = importlib.util.spec_from_file_location("make_reference", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.write_safetensors


def sinusoidal(length, width):
    """PE(p, 2i) = sin(p w_i), PE(p, 2i+1) = cos(p w_i), w_i = 1e4^(-2i/D)."""
    p = torch.arange(length, dtype=torch.float64)[:, None]
    w = torch.pow(10000.0, -torch.arange(0, width, 2, dtype=torch.float64) /
                  width)
    pe = torch.zeros(length, width, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(p * w)
    pe[:, 1::2] = torch.cos(p * w)
    return pe


class EagerModel(nn.Module):
    def __init__(self, layers, width=512, heads=8, ff=2048, vocab=10000):
        super().__init__()
        self.embedding = nn.Embedding(vocab, width)
        layer = nn.TransformerEncoderLayer(width, heads, ff, dropout=0.0,
                                           batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers,
                                             enable_nested_tensor=False)

    def forward(self, ids, pe):
        return self.encoder(self.embedding(ids) + pe)


def time_eager(model, batch, length, device, dtype, seconds):
    ids = torch.randint(0, 10000, (batch, length), device=device)
    pe = sinusoidal(length, 512).to(device, dtype)
    sync = torch.cuda.synchronize if device.startswith("cuda") else (
        lambda: None)
    with torch.inference_mode():
        for _ in range(2):
            model(ids, pe)
        sync()
        runs, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds or runs < 3:
            model(ids, pe).float().cpu()  # results to the host, as ours
            runs += 1
        sync()
        elapsed = time.perf_counter() - start
    return batch * length * runs / elapsed


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("build")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--dtype", default="float32",
                        choices=["float32", "float16", "bfloat16"])
    parser.add_argument("--batch-sizes", default="1,2,4,8,16,32,64,128,256")
    parser.add_argument("--length", type=int, default=128)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--json")
    a = parser.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dtype = getattr(torch, a.dtype)
    sizes = [int(s) for s in a.batch_sizes.split(",")]

    torch.manual_seed(0)
    model = EagerModel(a.layers).eval()
    with tempfile.TemporaryDirectory() as tmp:
        load_writer()(os.path.join(tmp, "weights.safetensors"),
                      {k: v.contiguous() for k, v in model.state_dict().items()})
        with open(os.path.join(tmp, "repository.json"), "w") as f:
            json.dump({"models": [{"name": "eager", "weights":
                                   "weights.safetensors",
                                   "config": {"num_layers": a.layers,
                                              "max_input_tokens":
                                                  max(a.length, 2048)}}]}, f)
        out = subprocess.run(
            [os.path.join(a.build, "encoder-bench-forward"), "--models",
             os.path.join(tmp, "repository.json"), "--model", "eager",
             "--device", a.device, "--dtype", a.dtype, "--batch-sizes",
             a.batch_sizes, "--length", str(a.length), "--seconds",
             str(a.seconds)],
            check=True, capture_output=True, text=True)
        ours = {r["batch_size"]: r for r in json.loads(out.stdout)["results"]}
    model = model.to(a.device, dtype)
    rows = []
    print("device %s, dtype %s, %d layers, %d tokens" %
          (a.device, a.dtype, a.layers, a.length))
    print("%6s %14s %14s %8s" % ("batch", "ours tok/s", "eager tok/s",
                                 "ratio"))
    for b in sizes:
        eager = time_eager(model, b, a.length, a.device, dtype, a.seconds)
        mine = ours[b]["sequences_per_s"] * a.length
        rows.append({"batch_size": b, "ours_tokens_per_s": mine,
                     "eager_tokens_per_s": eager, "ratio": mine / eager})
        print("%6d %14.0f %14.0f %8.3f" % (b, mine, eager, mine / eager))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"device": a.device, "dtype": a.dtype, "rows": rows},
                      f, indent=2)
    bad = [r for r in rows if not math.isfinite(r["ratio"]) or r["ratio"] <= 0]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
