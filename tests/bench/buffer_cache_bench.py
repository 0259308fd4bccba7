#!/usr/bin/python3
"""The CPU buffer cache's effect: encoder-server with --cpu-buffer-cache-bytes
0 (LibTorch's allocator alone) and with the default cache, alternately in one
run, at 32 callers on 16- and 128-token inputs. Prints, per row, tokens/s,
p50, p99, the server's minor page faults and CPU milliseconds (user +
system) per sequence and its system CPU seconds
(read from /proc around each load), the ratio of the cached server to the
uncached one, the CPU and the load average.

With --setting NAME=FLAGS (repeatable; FLAGS space-separated) other server
configurations are compared instead, the first one being the baseline;
e.g. --setting default= --setting "small=--cpu-buffer-cache-bytes=67108864"
--lengths takes MIN-MAX entries too: lengths drawn uniformly per input, and
tokens/s counts the real (unpadded) tokens.

Usage: buffer_cache_bench.py BUILD_DIR [--model sinusoidal] [--duration S]
       [--rounds N] [--concurrency 32] [--lengths 16,128,8-128]
       [--setting NAME=FLAGS ...]
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from precision_bench import (cpu_description, load,  # noqa: E402
                             proc_counters, user_seconds)
from run_bench import client_bench, start_server, stop_server  # noqa: E402

SETTINGS = (("off", ["--cpu-buffer-cache-bytes=0"]), ("cache", []))


def parse_setting(text):
    name, _, flags = text.partition("=")
    return name, flags.split()


def measure(build, flags, model, length, concurrency, duration):
    proc, port = start_server(build, flags)
    try:
        # One untimed load first, so that both settings start warm.
        client_bench(build, port, model, concurrency, length, 1)
        before = load()
        faults0, sys0 = proc_counters(proc.pid)
        user0 = user_seconds(proc.pid)
        r = client_bench(build, port, model, concurrency, length, duration)
        faults1, sys1 = proc_counters(proc.pid)
        user1 = user_seconds(proc.pid)
    finally:
        stop_server(proc)
    sent = r["throughput"]["sequences_per_s"] * r["elapsed_s"] + 2 * concurrency
    return {"tokens_per_s": r["throughput"]["tokens_per_s"],
            "p50_ms": r["latency_ms"]["p50"],
            "p99_ms": r["latency_ms"]["p99"],
            "faults_per_seq": (faults1 - faults0) / sent,
            "cpu_ms_per_seq":
                1000 * ((user1 - user0) + (sys1 - sys0)) / sent,
            "sys_s": sys1 - sys0, "load": (before + load()) / 2}



def main():
    p = argparse.ArgumentParser()
    p.add_argument("build")
    p.add_argument("--model", default="sinusoidal")
    p.add_argument("--duration", type=float, default=8)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--concurrency", type=int, default=32)
    p.add_argument("--lengths", default="16,128",
                   help="tokens per input, or MIN-MAX for mixed lengths")
    p.add_argument("--setting", action="append", type=parse_setting,
                   help="NAME=FLAGS, a configuration to compare")
    a = p.parse_args()
    settings = a.setting or SETTINGS
    print("CPU:", cpu_description())
    print("| round | tokens | setting | tokens/s | p50 ms | p99 ms | "
          "faults/seq | CPU ms/seq | sys s | vs %s | load |" % settings[0][0])
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for round_ in range(1, a.rounds + 1):
        for length in a.lengths.split(","):
            base = None
            for name, flags in settings:
                r = measure(a.build, flags, a.model, length, a.concurrency,
                            a.duration)
                base = base or r["tokens_per_s"]
                print("| %d | %s | %s | %.0f | %.1f | %.1f | %.0f | %.1f "
                      "| %.2f | %.2fx | %.1f |" % (
                          round_, length, name, r["tokens_per_s"],
                          r["p50_ms"], r["p99_ms"], r["faults_per_seq"],
                          r["cpu_ms_per_seq"], r["sys_s"],
                          r["tokens_per_s"] / base, r["load"]), flush=True)


if __name__ == "__main__":
    main()
