#!/usr/bin/env python3
"""Serving cost of a Qwen3-Embedding-0.6B-sized causal embedder beside a
BERT-base-sized encoder, both in bfloat16, measured in one run.

Builds both with transformers (random weights, seeded) and saves them in
bfloat16 with save_pretrained:
  - Qwen3Model shaped as Qwen3-Embedding-0.6B: 28 layers, width 1024, 16
    query heads of 128 over 8 key/value heads, feed-forward 3072,
    vocabulary 151669, tied embeddings (about 596M parameters);
  - BertModel shaped as bert-base-uncased: 12 layers, width 768, 12 heads,
    feed-forward 3072, vocabulary 30522 (about 109M parameters).
Each is served alone (`--model-dir`, `--dtype bfloat16`, 2 intra-op
threads) and measured:
  - load time (process start to ready), RSS and peak RSS (VmHWM) after
    load against the weights' bytes, and the same binary's RSS on a tiny
    checkpoint (what LibTorch and gRPC take alone);
  - 1 caller: sequential calls of one 128-token input (p50 latency and
    sequences/s); 32 callers: one such call each, at once (sequences/s,
    the mean batch the server formed);
  - peak RSS after serving;
  - transformers' own model on the same weights, bfloat16, sdpa, 2
    threads, in the same process: sequences/s at batch 1 and batch 32 (the
    baseline of each ratio).
Prints `lscpu` first. Not part of ctest (minutes); run in the project
venv (transformers, grpcio):

  .venv/bin/python tests/bench/causal_bench.py --binary build/encoder-server
"""
import argparse
import concurrent.futures
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "integration"))
sys.path.insert(0, str(ROOT / "client" / "python"))
from server_process import ServerProcess, rss_bytes  # noqa: E402

SEQ = 128
MIB = 1024 * 1024


def lscpu():
    out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    return "\n".join(l for l in out.splitlines()
                     if l.startswith(("Model name", "Flags", "CPU(s):")))


def status_kib(pid, field):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"no {field}")


def build(kind, directory):
    """Saves a seeded random model in bfloat16; returns (parameters,
    bytes of the safetensors files, vocabulary size)."""
    import transformers
    torch.manual_seed(7)
    if kind == "qwen3":
        config = transformers.Qwen3Config(
            vocab_size=151669, hidden_size=1024, intermediate_size=3072,
            num_hidden_layers=28, num_attention_heads=16,
            num_key_value_heads=8, head_dim=128,
            max_position_embeddings=32768, rms_norm_eps=1e-6,
            rope_parameters={"rope_type": "default", "rope_theta": 1e6},
            tie_word_embeddings=True)
        model = transformers.Qwen3Model(config)
    elif kind == "bert":
        config = transformers.BertConfig(
            vocab_size=30522, hidden_size=768, num_hidden_layers=12,
            num_attention_heads=12, intermediate_size=3072,
            max_position_embeddings=512)
        model = transformers.BertModel(config, add_pooling_layer=False)
    else:  # tiny: the baseline process
        config = transformers.BertConfig(
            vocab_size=100, hidden_size=16, num_hidden_layers=1,
            num_attention_heads=2, intermediate_size=32,
            max_position_embeddings=64)
        model = transformers.BertModel(config, add_pooling_layer=False)
    model = model.to(torch.bfloat16).eval()
    model.save_pretrained(directory, safe_serialization=True)
    params = sum(p.numel() for p in model.parameters())
    stored = sum(p.stat().st_size
                 for p in pathlib.Path(directory).glob("*.safetensors"))
    del model
    return params, stored, config.vocab_size


def serve(binary, directory, work, extra=()):
    os.makedirs(work, exist_ok=True)
    t0 = time.monotonic()
    server = ServerProcess(binary, work, [
        f"--model-dir={directory}", "--dtype=bfloat16",
        "--intra-op-threads=2", "--max-queue-delay=2ms", *extra])
    server.wait_ready(900)
    return server, time.monotonic() - t0


def calls(client, model, inputs, callers):
    """`inputs` split over `callers` threads, one Embed call per input;
    returns (sequences/s, latencies in ms, batch sizes)."""
    def one(ids):
        t = time.monotonic()
        r = client.embed_response([ids], model=model)
        return (time.monotonic() - t) * 1e3, r.results[0].batch.batch_size

    t0 = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(callers) as pool:
        out = list(pool.map(one, inputs))
    elapsed = time.monotonic() - t0
    return len(inputs) / elapsed, [o[0] for o in out], [o[1] for o in out]


def measure(binary, kind, directory, work, single_calls, rounds, extra):
    from encoder_client import EncoderClient
    params, stored, vocab = build(kind, directory)
    server, load_s = serve(binary, directory, work, extra)
    pid = server.process.pid
    row = {"model": kind, "parameters": params, "weights_bytes": stored,
           "load_s": load_s, "rss_load": rss_bytes(pid),
           "hwm_load": status_kib(pid, "VmHWM") * 1024}
    try:
        client = EncoderClient(f"127.0.0.1:{server.port}", timeout=900)
        name = os.path.basename(directory)
        rng = np.random.default_rng(1)
        draw = lambda: [int(t) for t in rng.integers(1000, vocab, SEQ)]
        info = {m.name: m for m in client.models().models}[name]
        row["precision"] = info.precision
        row["causal"] = info.causal
        calls(client, name, [draw()], 1)  # warm-up
        sps, lat, _ = calls(client, name, [draw() for _ in range(single_calls)],
                            1)
        row["one_sps"], row["one_p50_ms"] = sps, statistics.median(lat)
        best = None
        for _ in range(rounds):
            sps, lat, sizes = calls(client, name,
                                    [draw() for _ in range(32)], 32)
            if best is None or sps > best[0]:
                best = (sps, statistics.median(lat), float(np.mean(sizes)))
        row["many_sps"], row["many_p50_ms"], row["many_batch"] = best
        row["hwm_serve"] = status_kib(pid, "VmHWM") * 1024
        client.close()
    finally:
        server.stop()
    row["eager_one_sps"], row["eager_many_sps"] = eager(
        directory, vocab, single_calls)
    return row


@torch.inference_mode()
def eager(directory, vocab, single_calls):
    """transformers' own model on the same weights in bfloat16 (sdpa
    attention, 2 threads): sequences/s at batch 1 and at batch 32."""
    import transformers
    torch.set_num_threads(2)
    model = transformers.AutoModel.from_pretrained(
        directory, dtype=torch.bfloat16, attn_implementation="sdpa").eval()
    rng = np.random.default_rng(2)
    ids = lambda b: torch.tensor(rng.integers(1000, vocab, (b, SEQ)))
    model(input_ids=ids(1))  # warm-up
    t0 = time.monotonic()
    for _ in range(single_calls):
        model(input_ids=ids(1))
    one = single_calls / (time.monotonic() - t0)
    batch = ids(32)
    t0 = time.monotonic()
    model(input_ids=batch, attention_mask=torch.ones_like(batch))
    many = 32 / (time.monotonic() - t0)
    del model
    return one, many


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--binary", required=True)
    parser.add_argument("--single-calls", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=2,
                        help="32-caller rounds; the best is reported")
    parser.add_argument("--json", help="write the rows here")
    parser.add_argument("--server-arg", action="append", default=[],
                        help="an extra server flag (repeatable), e.g. "
                             "--server-arg=--max-batch-time=0")
    args = parser.parse_args()
    print(lscpu())
    print(f"load average (1 min) at the start: {os.getloadavg()[0]:.1f}",
          flush=True)
    print("server flags: --dtype=bfloat16 --intra-op-threads=2 "
          "--max-queue-delay=2ms", *args.server_arg)
    rows = []
    with tempfile.TemporaryDirectory(prefix="causal-bench-") as tmp:
        tiny = os.path.join(tmp, "tiny")
        build("tiny", tiny)
        server, _ = serve(args.binary, tiny, os.path.join(tmp, "w0"))
        base = rss_bytes(server.process.pid)
        server.stop()
        for i, kind in enumerate(("bert", "qwen3")):
            directory = os.path.join(tmp, f"{kind}-bf16")
            rows.append(measure(args.binary, kind, directory,
                                os.path.join(tmp, f"w{i + 1}"),
                                args.single_calls, args.rounds,
                                args.server_arg))
            print(json.dumps(rows[-1]), flush=True)
    print(f"load average (1 min) at the end: {os.getloadavg()[0]:.1f}")
    print(f"\nRSS of the same binary on a tiny checkpoint: {base / MIB:.0f} "
          "MiB")
    print("\n| model | server: 1 caller seq/s | transformers batch 1 | "
          "ratio | server: 32 callers seq/s | transformers batch 32 | ratio |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['model']} | {r['one_sps']:.2f} | "
              f"{r['eager_one_sps']:.2f} | "
              f"{r['one_sps'] / r['eager_one_sps']:.2f} | "
              f"{r['many_sps']:.2f} | {r['eager_many_sps']:.2f} | "
              f"{r['many_sps'] / r['eager_many_sps']:.2f} |")
    print("\n| model | params | weights (bf16) | load | RSS after load | "
          "(RSS - tiny) / weights | peak RSS load / serving | 1 caller: "
          "p50, seq/s | 32 callers: seq/s, p50, mean batch |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['model']} ({r['precision']}"
              f"{', causal' if r['causal'] else ''}) | "
              f"{r['parameters'] / 1e6:.0f}M | "
              f"{r['weights_bytes'] / MIB:.0f} MiB | {r['load_s']:.1f} s | "
              f"{r['rss_load'] / MIB:.0f} MiB "
              f"({r['rss_load'] / r['weights_bytes']:.2f}x) | "
              f"{(r['rss_load'] - base) / r['weights_bytes']:.2f}x | "
              f"{r['hwm_load'] / MIB:.0f} / {r['hwm_serve'] / MIB:.0f} MiB | "
              f"{r['one_p50_ms']:.0f} ms, {r['one_sps']:.2f} | "
              f"{r['many_sps']:.2f}, {r['many_p50_ms']:.0f} ms, "
              f"{r['many_batch']:.1f} |")
    if len(rows) == 2:
        print(f"\nqwen3 / bert: 1 caller {rows[1]['one_sps'] / rows[0]['one_sps']:.3f}x, "
              f"32 callers {rows[1]['many_sps'] / rows[0]['many_sps']:.3f}x "
              f"(parameters {rows[1]['parameters'] / rows[0]['parameters']:.2f}x)")
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
