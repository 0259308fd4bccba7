#!/usr/bin/env python3
"""Two server builds side by side, served with their defaults: encoder-server
of build A and of build B (e.g. two LibTorch versions: "One LibTorch: 1.13
against 2.15, served" in docs/benchmarks-history.md compares Debian's 1.13
with the pinned 2.15 wheel) on the same real model
directory, each in float32 and with --quantize int8, driven by the same
encoder-client bench (build B's) at 1 caller x 16 tokens and 32 callers x
128 tokens, in interleaved rounds so that a shared host's drift hits both
alike. Prints lscpu's model and flags, a Markdown table of the medians
(sequences/s, p50 and p99 latency) and the ratios B/A.

Before timing, both servers must agree with each other on a few pooled
embeddings (cosine >= 0.9999 float32, >= 0.99 int8): a faster wrong server
is not a result.

Usage: libtorch_served_bench.py BUILD_A BUILD_B --model-dir DIR
         [--rounds 3] [--duration 8] [--cells 1x16,32x128]
         [--quantize none,int8] [--json OUT]
"""
import argparse
import json
import math
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from precision_bench import cpu_description  # noqa: E402
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "client", "python", "examples"))
import minimal_client as encoder_client  # noqa: E402
from run_bench import (client_bench, median, start_server,  # noqa: E402
                       stop_server)

MODEL = "bench"


def start(build, model_dir, quantize):
    return start_server(build, ["--model-dir", f"{MODEL}={model_dir}",
                                "--quantize", quantize])


def embed(stubs, port, texts):
    import grpc
    pb2, pb2_grpc = stubs
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        request = pb2.EmbedRequest(model=MODEL)
        for t in texts:
            request.inputs.add().text = t
        response = pb2_grpc.EncoderServiceStub(channel).Embed(request,
                                                             timeout=60)
    return [list(encoder_client.decode_tensor(pb2, r.pooled))
            for r in response.results]


def cosine(a, b):
    dot = sum(x * y for x, y in zip(a, b))
    return dot / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("build_a")
    p.add_argument("build_b")
    p.add_argument("--model-dir", required=True)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--duration", type=float, default=8)
    p.add_argument("--cells", default="1x16,32x128")
    p.add_argument("--quantize", default="none,int8")
    p.add_argument("--json")
    a = p.parse_args()
    cells = [tuple(int(v) for v in c.split("x")) for c in a.cells.split(",")]
    modes = a.quantize.split(",")
    print(cpu_description(), flush=True)

    texts = ["a short one", "The quick brown fox jumps over the lazy dog.",
             "Positional encodings tell a Transformer where each token is; "
             "without them attention sees a bag of tokens."]
    results = {}  # (mode, cell, side) -> [round reports]
    stubs = encoder_client.load_stubs(tempfile.mkdtemp(prefix="stubs-"))
    for mode in modes:
        servers = {side: start(build, a.model_dir, mode)
                   for side, build in (("A", a.build_a), ("B", a.build_b))}
        try:
            got = {side: embed(stubs, port, texts)
                   for side, (_, port) in servers.items()}
            worst = min(cosine(x, y) for x, y in zip(got["A"], got["B"]))
            floor = 0.9999 if mode == "none" else 0.99
            print(f"{mode}: A and B agree to cosine {worst:.7f} "
                  f"(need {floor})", flush=True)
            if worst < floor:
                sys.exit("the builds disagree: no comparison")
            for r in range(a.rounds):
                for callers, length in cells:
                    # Alternate which side goes first, round by round.
                    order = ("A", "B") if r % 2 == 0 else ("B", "A")
                    for side in order:
                        rep = client_bench(a.build_b, servers[side][1], MODEL,
                                           callers, length, a.duration)
                        results.setdefault((mode, callers, length, side),
                                           []).append(rep)
                        print(f"round {r + 1} {mode} {callers}x{length} "
                              f"{side}: "
                              f"{rep['throughput']['sequences_per_s']:.1f}"
                              " seq/s", flush=True)
        finally:
            for proc, _ in servers.values():
                stop_server(proc)

    rows = []
    print("\n| precision | callers x tokens | A seq/s | B seq/s | B/A "
          "| A p50 / p99 ms | B p50 / p99 ms |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for mode in modes:
        for callers, length in cells:
            side = {}
            for s in ("A", "B"):
                reps = results[(mode, callers, length, s)]
                side[s] = {
                    "sequences_per_s": median(
                        [x["throughput"]["sequences_per_s"] for x in reps]),
                    "p50_ms": median([x["latency_ms"]["p50"] for x in reps]),
                    "p99_ms": median([x["latency_ms"]["p99"] for x in reps]),
                }
            ratio = side["B"]["sequences_per_s"] / side["A"]["sequences_per_s"]
            name = "float32" if mode == "none" else mode
            print(f"| {name} | {callers} x {length} "
                  f"| {side['A']['sequences_per_s']:.1f} "
                  f"| {side['B']['sequences_per_s']:.1f} | {ratio:.2f} "
                  f"| {side['A']['p50_ms']:.2f} / {side['A']['p99_ms']:.2f} "
                  f"| {side['B']['p50_ms']:.2f} / {side['B']['p99_ms']:.2f} |")
            rows.append({"precision": name, "callers": callers,
                         "length": length, "A": side["A"], "B": side["B"],
                         "b_over_a": ratio})
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"cpu": cpu_description(), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
