#!/usr/bin/python3
"""gRPC Embed on two encoder-server builds, side by side: the latency of one
caller and the throughput of many, for a change that should cost nothing
(a restructuring of the request path).

Alternates the binaries round by round (--rounds), each started on its
built-in models, and measures with this build's `encoder-client bench`
(token-id inputs of --length tokens on --model):
  1. one caller: p50/p99 latency;
  2. --concurrency callers: sequences/s and p50/p99.
Prints lscpu's model name first, then medians over rounds and the ratio of
--binary to --baseline.

Usage: grpc_front_bench.py --binary build/encoder-server
                           --baseline OLD/encoder-server
"""
import argparse
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run_bench  # noqa: E402  (start_server, client_bench, median)


def measure(binary, client_dir, a, flags=()):
    """One server start of `binary` (with `flags`): one caller's and
    a.concurrency callers' latency and throughput on a.model."""
    proc, port = run_bench.start_server(os.path.dirname(binary), list(flags))
    try:
        one = run_bench.client_bench(client_dir, port, a.model, 1, a.length,
                                     a.duration)
        many = run_bench.client_bench(client_dir, port, a.model,
                                      a.concurrency, a.length, a.duration)
    finally:
        run_bench.stop_server(proc)
    return {
        "1 caller p50 ms": one["latency_ms"]["p50"],
        "1 caller p99 ms": one["latency_ms"]["p99"],
        "%d callers seq/s" % a.concurrency:
            many["throughput"]["sequences_per_s"],
        "%d callers p50 ms" % a.concurrency: many["latency_ms"]["p50"],
        "%d callers p99 ms" % a.concurrency: many["latency_ms"]["p99"],
    }


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary", required=True)
    parser.add_argument("--baseline", required=True)
    parser.add_argument("--model", default="rope")
    parser.add_argument("--length", type=int, default=16)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--duration", type=float, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    a = parser.parse_args()
    lscpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    for line in lscpu.splitlines():
        if line.startswith("Model name") or line.startswith("CPU(s)"):
            print(line)
    client_dir = os.path.dirname(os.path.abspath(a.binary))
    rounds = {"binary": [], "baseline": []}
    for r in range(a.rounds):
        # Alternate which goes first, so a drifting host hits both alike.
        order = ["binary", "baseline"] if r % 2 == 0 else ["baseline",
                                                           "binary"]
        for side in order:
            binary = os.path.abspath(getattr(a, side))
            rounds[side].append(measure(binary, client_dir, a))
            print("round %d %s: %s" % (r + 1, side, rounds[side][-1]),
                  flush=True)
    print("\n%-22s %12s %12s %8s" % ("median over %d rounds" % a.rounds,
                                     "baseline", "binary", "ratio"))
    for key in rounds["binary"][0]:
        new = run_bench.median([x[key] for x in rounds["binary"]])
        old = run_bench.median([x[key] for x in rounds["baseline"]])
        print("%-22s %12.2f %12.2f %8.3f" % (key, old, new, new / old))


if __name__ == "__main__":
    main()
