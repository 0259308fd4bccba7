#!/usr/bin/env python3
"""A BERT-base-sized Hugging Face checkpoint served by encoder-server, next to
the same model in PyTorch eager, measured in one run.

Writes a random bert-base-uncased-shaped checkpoint (12 layers, width 768,
12 heads, feed-forward 3072, vocabulary 30522, 512 positions, pooler: about
110M parameters, fp32, sharded in two files with the index file), starts
the server on it and measures:
  - load time: process start to the ready file;
  - peak RSS while loading (VmHWM right after ready) and after serving;
    against the weights' size and the RSS of the same binary serving a tiny
    checkpoint (what LibTorch and gRPC themselves take);
  - tokens/s at batch 1 (one caller, one 128-token input per call) and
    batch 32 (32 concurrent callers, the server batches them), seq 128;
  - PyTorch eager float32 (torch.nn.TransformerEncoderLayer stack with the
    checkpoint's weights: BERT's post-norm layer is exactly that layer) at
    batch 1 and 32, with 1 thread and with the server's thread count.
Prints `lscpu` model name and flags first. Not part of ctest (minutes).

Usage (the project's .venv: torch, numpy, grpcio):
  .venv/bin/python tests/bench/hf_bench.py --binary build/encoder-server
       [--threads N] [--batch1-calls N] [--batch32-rounds N] [--keep DIR]
"""
import argparse
import concurrent.futures
import importlib.util
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "hf"))
sys.path.insert(0, str(ROOT / "tests" / "integration"))
import fixture_configs  # noqa: E402
import fixture_weights  # noqa: E402
import make_fixtures  # noqa: E402
import safetensors_io  # noqa: E402
from server_process import ServerProcess  # noqa: E402

SEQ = 128


def lscpu():
    out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    keep = [l for l in out.splitlines()
            if l.startswith(("Model name", "Flags", "CPU(s):"))]
    return "\n".join(keep)


def bert_base_config():
    config = fixture_configs.bert_base_uncased()
    config.update(hidden_size=768, intermediate_size=3072,
                  num_attention_heads=12, num_hidden_layers=12,
                  max_position_embeddings=512, vocab_size=30522)
    return config


def write_checkpoint(directory):
    """Returns (config, weight bytes, parameter count)."""
    os.makedirs(directory, exist_ok=True)
    config = bert_base_config()
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    tensors = fixture_weights.bert_like(config, fixture_weights.Rand(7), "")
    safetensors_io.write_sharded(directory, tensors, 2)
    params = sum(t.numel() for t in tensors.values())
    return config, params * 4, params


def vm_hwm_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM"):
                return int(line.split()[1])
    raise RuntimeError("no VmHWM")


def start(binary, directory, threads):
    t0 = time.monotonic()
    server = ServerProcess(binary, extra_args=[
        f"--model-dir={directory}", f"--intra-op-threads={threads}",
        "--max-queue-delay=2ms"])
    server.wait_ready(600)
    return server, time.monotonic() - t0


def load_stubs(tmp):
    path = ROOT / "client" / "python" / "examples" / "minimal_client.py"
    spec = importlib.util.spec_from_file_location("encoder_client", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.load_stubs(tmp)


def serve_tokens_per_s(pb2, stub, model, vocab, callers, calls):
    """callers threads, each making `calls` one-input Embed calls of SEQ
    tokens; returns (tokens/s, mean batch size the server reported)."""
    rng = np.random.default_rng(callers)
    inputs = [[int(t) for t in rng.integers(1000, vocab, SEQ)]
              for _ in range(callers)]

    def caller(ids):
        sizes = []
        for _ in range(calls):
            r = stub.Embed(pb2.EmbedRequest(
                model=model,
                inputs=[pb2.Input(token_ids=pb2.TokenIds(ids=ids))]),
                timeout=600)
            sizes.append(r.results[0].batch.batch_size)
        return sizes

    caller(inputs[0][:8])  # warm-up
    t0 = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(callers) as pool:
        sizes = [s for f in [pool.submit(caller, ids) for ids in inputs]
                 for s in f.result()]
    elapsed = time.monotonic() - t0
    return callers * calls * SEQ / elapsed, float(np.mean(sizes))


def eager_model(directory, config):
    """Embeddings + 12 nn.TransformerEncoderLayer (post-norm, gelu) in
    float32 with the checkpoint's weights."""
    w = safetensors_io.read_checkpoint(directory)
    d, eps = config["hidden_size"], config["layer_norm_eps"]
    layers = []
    for i in range(config["num_hidden_layers"]):
        g = lambda n: w[f"encoder.layer.{i}.{n}"]  # noqa: E731
        layer = torch.nn.TransformerEncoderLayer(
            d, config["num_attention_heads"], config["intermediate_size"],
            dropout=0.0, activation="gelu", layer_norm_eps=eps,
            batch_first=True).eval()
        cat = lambda s: torch.cat([g(f"attention.self.{m}.{s}")  # noqa
                                   for m in ("query", "key", "value")])
        layer.load_state_dict({
            "self_attn.in_proj_weight": cat("weight"),
            "self_attn.in_proj_bias": cat("bias"),
            "self_attn.out_proj.weight": g("attention.output.dense.weight"),
            "self_attn.out_proj.bias": g("attention.output.dense.bias"),
            "linear1.weight": g("intermediate.dense.weight"),
            "linear1.bias": g("intermediate.dense.bias"),
            "linear2.weight": g("output.dense.weight"),
            "linear2.bias": g("output.dense.bias"),
            "norm1.weight": g("attention.output.LayerNorm.weight"),
            "norm1.bias": g("attention.output.LayerNorm.bias"),
            "norm2.weight": g("output.LayerNorm.weight"),
            "norm2.bias": g("output.LayerNorm.bias")})
        layers.append(layer)
    e = "embeddings"

    def forward(ids):
        x = w[f"{e}.word_embeddings.weight"][ids] + \
            w[f"{e}.token_type_embeddings.weight"][0] + \
            w[f"{e}.position_embeddings.weight"][:ids.shape[1]]
        x = torch.nn.functional.layer_norm(
            x, (d,), w[f"{e}.LayerNorm.weight"], w[f"{e}.LayerNorm.bias"], eps)
        for layer in layers:
            x = layer(x)
        return x.mean(1)
    return forward


def eager_tokens_per_s(forward, vocab, batch, threads, reps):
    torch.set_num_threads(threads)
    ids = torch.randint(1000, vocab, (batch, SEQ),
                        generator=torch.Generator().manual_seed(batch))
    with torch.inference_mode():
        forward(ids[:, :8])
        t0 = time.monotonic()
        for _ in range(reps):
            forward(ids)
        return batch * SEQ * reps / (time.monotonic() - t0)


def baseline_rss_kib(binary, tmp):
    """VmHWM of the server on a tiny checkpoint (bge fixture)."""
    fixture = next(f for f in make_fixtures.FIXTURES if f.name == "bge")
    directory = make_fixtures.write_fixture(os.path.join(tmp, "tiny"), fixture)
    server, _ = start(binary, directory, 1)
    try:
        return vm_hwm_kib(server.process.pid)
    finally:
        server.stop()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--binary", required=True)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--batch1-calls", type=int, default=8)
    parser.add_argument("--batch32-rounds", type=int, default=1)
    parser.add_argument("--keep", help="write the checkpoint here")
    args = parser.parse_args()
    print(lscpu())
    print(f"load average (1 min) at the start: {os.getloadavg()[0]:.1f}")
    import grpc
    with tempfile.TemporaryDirectory(prefix="hf-bench-") as tmp:
        directory = args.keep or os.path.join(tmp, "bert-base")
        config, weight_bytes, params = write_checkpoint(directory)
        vocab = config["vocab_size"]
        mib = 1024 * 1024
        print(f"checkpoint: {params / 1e6:.1f}M parameters, "
              f"{weight_bytes / mib:.0f} MiB fp32 in 2 shards")
        base_kib = baseline_rss_kib(args.binary, tmp)
        pb2, pb2_grpc = load_stubs(tmp)
        server, load_s = start(args.binary, directory, args.threads)
        rows = []
        try:
            load_kib = vm_hwm_kib(server.process.pid)
            with grpc.insecure_channel(f"127.0.0.1:{server.port}") as ch:
                stub = pb2_grpc.EncoderServiceStub(ch)
                name = os.path.basename(directory)
                b1 = serve_tokens_per_s(pb2, stub, name, vocab, 1,
                                        args.batch1_calls)
                b32 = serve_tokens_per_s(pb2, stub, name, vocab, 32,
                                         args.batch32_rounds)
            serve_kib = vm_hwm_kib(server.process.pid)
        finally:
            server.stop()
        rows.append((f"server ({args.threads} threads), batch 1", *b1))
        rows.append((f"server ({args.threads} threads), 32 callers", *b32))
        forward = eager_model(directory, config)
        for threads in sorted({1, args.threads}):
            for batch, reps in ((1, args.batch1_calls),
                                (32, args.batch32_rounds)):
                tps = eager_tokens_per_s(forward, vocab, batch, threads, reps)
                rows.append((f"PyTorch eager ({threads} threads), batch "
                             f"{batch}", tps, float(batch)))
    print(f"\nload average (1 min) at the end: {os.getloadavg()[0]:.1f} on "
          f"{os.cpu_count()} CPUs")
    print(f"load time: {load_s:.2f} s")
    print(f"weights: {weight_bytes / mib:.0f} MiB; server RSS on a tiny "
          f"checkpoint: {base_kib / 1024:.0f} MiB")
    for label, kib in (("peak RSS after load", load_kib),
                       ("peak RSS after serving", serve_kib)):
        print(f"{label}: {kib / 1024:.0f} MiB (minus the tiny-checkpoint "
              f"baseline: {(kib - base_kib) * 1024 / weight_bytes:.2f}x the "
              f"weights)")
    print("\n| run | tokens/s | mean batch |\n|---|---:|---:|")
    for label, tps, batch in rows:
        print(f"| {label} | {tps:.0f} | {batch:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
