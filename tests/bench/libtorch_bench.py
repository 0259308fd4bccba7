#!/usr/bin/python3
"""Two builds of the server side by side: the in-process forward
(encoder-bench-forward) of build A and build B (e.g. Debian's LibTorch 1.13
and a PyTorch wheel's 2.x), interleaved round by round on the same scenarios,
plus, in each build that has it, the fused attention kernel against the
explicit products (--compare-explicit, alternating forward by forward) and,
with --linear-bound, the share of the linear layers' own rate the forward
reaches. Prints lscpu's model and flags, a table and the ratios B/A.

Each build runs with its own LibTorch intra-op thread count: Debian's
LibTorch multiplies its products on OpenBLAS's own pthreads pool (both
cores) whatever that count, so 1 is its best; a wheel's LibTorch runs them on
MKL with the intra-op threads, so it wants the core count.

Usage: libtorch_bench.py BUILD_A BUILD_B [--threads-a 1] [--threads-b 2]
       [--rounds 3] [--seconds 2] [--scenarios NAME,...] [--json OUT]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from precision_bench import cpu_description  # noqa: E402

# name: (model, dtype, quantize, batch, length)
SCENARIOS = {
    "f32-b1-16": ("sinusoidal", "float32", "none", 1, 16),
    "f32-b32-16": ("sinusoidal", "float32", "none", 32, 16),
    "f32-b8-128": ("sinusoidal", "float32", "none", 8, 128),
    "f32-b8-128-alibi": ("alibi", "float32", "none", 8, 128),
    "f32-b2-512": ("sinusoidal", "float32", "none", 2, 512),
    "f32-b2-512-rope": ("rope", "float32", "none", 2, 512),
    "f32-b2-512-relative": ("relative", "float32", "none", 2, 512),
    "int8-b32-16": ("sinusoidal", "float32", "int8", 32, 16),
    "bf16-b8-128": ("sinusoidal", "bfloat16", "none", 8, 128),
}


def has_native_bf16():
    with open("/proc/cpuinfo") as f:
        flags = f.read()
    return "avx512_bf16" in flags or "amx_bf16" in flags


def forward(build, scenario, seconds, threads, extra):
    model, dtype, quantize, batch, length = SCENARIOS[scenario]
    cmd = [os.path.join(build, "encoder-bench-forward"),
           "--model", model, "--dtype", dtype, "--quantize", quantize,
           "--batch-sizes", str(batch), "--length", str(length),
           "--seconds", str(seconds), "--intra-op-threads", str(threads),
           *extra]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(" ".join(cmd) + "\n" + out.stderr)
    return json.loads(out.stdout)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("build_a")
    p.add_argument("build_b")
    p.add_argument("--threads-a", type=int, default=1)
    p.add_argument("--threads-b", type=int, default=os.cpu_count())
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--seconds", type=float, default=2)
    p.add_argument("--scenarios", default=",".join(SCENARIOS))
    p.add_argument("--json")
    args = p.parse_args()
    scenarios = args.scenarios.split(",")
    if not has_native_bf16():
        # Emulated bfloat16 measures the emulation, not the kernels.
        scenarios = [s for s in scenarios if not s.startswith("bf16")]
    print("lscpu:", cpu_description(), flush=True)
    print("threads: A %d, B %d" % (args.threads_a, args.threads_b))
    rows = []
    for scenario in scenarios:
        rates = {"a": [], "b": []}
        fused = {"a": [], "b": []}
        linear = {"a": [], "b": []}
        torch_version = {}
        for _ in range(args.rounds):
            for side, build, threads in (
                    ("a", args.build_a, args.threads_a),
                    ("b", args.build_b, args.threads_b)):
                # The build's default setting first (fused where it has the
                # kernel), alternating with the explicit products.
                r = forward(build, scenario, args.seconds, threads,
                            ["--compare-explicit", "--linear-bound"])
                torch_version[side] = r.get("torch_version", "?")
                rates[side].append(r["results"][0]["sequences_per_s"])
                if "fused_attention_ratio" in r:
                    fused[side].append(
                        r["fused_attention_ratio"][0]["fused_over_explicit"])
                linear[side].append(
                    r["linear_bound"][0]["share_of_linear_bound"])
        row = {"scenario": scenario,
               "torch_a": torch_version["a"], "torch_b": torch_version["b"]}
        for side in ("a", "b"):
            row[f"seq_per_s_{side}"] = statistics.median(rates[side])
            row[f"share_of_linear_{side}"] = statistics.median(linear[side])
            if fused[side]:
                row[f"fused_over_explicit_{side}"] = statistics.median(
                    fused[side])
        row["b_over_a"] = statistics.median(
            b / a for a, b in zip(rates["a"], rates["b"]))
        rows.append(row)
        print(json.dumps(row), flush=True)
    print()
    print("| scenario | A seq/s | B seq/s | B/A | B fused/explicit "
          "| A share of linear | B share of linear |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print("| %s | %.1f | %.1f | %.2f | %s | %.2f | %.2f |" % (
            r["scenario"], r["seq_per_s_a"], r["seq_per_s_b"], r["b_over_a"],
            "%.2f" % r["fused_over_explicit_b"]
            if "fused_over_explicit_b" in r else "-",
            r["share_of_linear_a"], r["share_of_linear_b"]))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"lscpu": cpu_description(), "rows": rows,
                       "threads_a": args.threads_a,
                       "threads_b": args.threads_b}, f, indent=2)


if __name__ == "__main__":
    main()
