#!/usr/bin/env python3
"""Serving benchmark: encoder-server under encoder-client bench, against the
in-process forward of the same model, measured in one run.

Prints a table and the three ratios the service is held to:
  1. 16-token inputs, 32 callers: server throughput / best in-process forward
  2. same load: server / the same server with --max-batch-sequences=1
  3. 1 caller: server p50 latency - in-process forward p50 at batch 1
Usage: run_bench.py BUILD_DIR [--duration S] [--json OUT]
"""
import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time


def start_server(build, extra):
    tmp = tempfile.mkdtemp(prefix="bench-")
    ready = os.path.join(tmp, "ready.json")
    log = open(os.path.join(tmp, "server.log"), "w")
    proc = subprocess.Popen(
        [os.path.join(build, "encoder-server"), "--listen=127.0.0.1:0",
         "--ready-file=" + ready, "--log-level=warn"] + extra,
        stdout=log, stderr=subprocess.STDOUT)
    deadline = time.time() + 120
    while not os.path.exists(ready):
        if proc.poll() is not None or time.time() > deadline:
            proc.kill()
            sys.exit("server did not start; see " + log.name)
        time.sleep(0.2)
    with open(ready) as f:
        return proc, json.load(f)["grpc_port"]


def stop_server(proc):
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()


def client_bench(build, port, model, concurrency, length, duration):
    out = subprocess.run(
        [os.path.join(build, "encoder-client"), "bench",
         "--target", "127.0.0.1:%d" % port, "--model", model,
         "--concurrency", str(concurrency), "--length", str(length),
         "--duration-s", str(duration), "--warmup-requests",
         str(2 * concurrency), "--json"],
        check=True, capture_output=True, text=True, timeout=duration + 120)
    return json.loads(out.stdout)


def forward_bench(build, model, sizes, length, seconds):
    out = subprocess.run(
        [os.path.join(build, "encoder-bench-forward"), "--model", model,
         "--batch-sizes", ",".join(str(s) for s in sizes),
         "--length", str(length), "--seconds", str(seconds)],
        check=True, capture_output=True, text=True, timeout=600)
    return {r["batch_size"]: r for r in json.loads(out.stdout)["results"]}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("build")
    parser.add_argument("--model", default="sinusoidal")
    parser.add_argument("--length", type=int, default=16)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--duration", type=float, default=20)
    parser.add_argument("--json", help="also write the results here")
    a = parser.parse_args()

    results = {}
    proc, port = start_server(a.build, [])
    try:
        results["batched"] = client_bench(a.build, port, a.model,
                                          a.concurrency, a.length, a.duration)
        results["single_caller"] = client_bench(a.build, port, a.model, 1,
                                                a.length, a.duration / 2)
    finally:
        stop_server(proc)
    proc, port = start_server(a.build, ["--max-batch-sequences=1"])
    try:
        results["unbatched"] = client_bench(a.build, port, a.model,
                                            a.concurrency, a.length,
                                            a.duration)
    finally:
        stop_server(proc)
    formed = sorted(int(k) for k in results["batched"]["batch_size"]["histogram"])
    sizes = sorted({1, a.concurrency} | set(formed))
    forward = forward_bench(a.build, a.model, sizes, a.length,
                            max(2.0, a.duration / 8))
    results["forward"] = {str(k): v for k, v in forward.items()}

    best = max(forward.values(), key=lambda r: r["sequences_per_s"])
    batched = results["batched"]
    unbatched = results["unbatched"]
    single = results["single_caller"]
    r1 = batched["throughput"]["sequences_per_s"] / best["sequences_per_s"]
    r2 = (batched["throughput"]["sequences_per_s"] /
          unbatched["throughput"]["sequences_per_s"])
    d3 = single["latency_ms"]["p50"] - forward[1]["p50_ms"]
    results["ratios"] = {"server_over_best_forward": r1,
                         "batched_over_unbatched": r2,
                         "single_caller_p50_minus_forward_p50_ms": d3}

    print("model %s, %d-token inputs, %d callers" %
          (a.model, a.length, a.concurrency))
    print("%-34s %10s %9s %9s %9s" % ("run", "seq/s", "p50 ms", "p99 ms",
                                      "batch"))
    for name in ("batched", "unbatched", "single_caller"):
        r = results[name]
        print("%-34s %10.1f %9.2f %9.2f %9.2f" % (
            "server " + name, r["throughput"]["sequences_per_s"],
            r["latency_ms"]["p50"], r["latency_ms"]["p99"],
            r["batch_size"]["mean"]))
    for size in sizes:
        r = forward[size]
        print("%-34s %10.1f %9.2f %9s %9d" % (
            "in-process forward", r["sequences_per_s"], r["p50_ms"], "-",
            size))
    print("batches formed: %s" % batched["batch_size"]["histogram"])
    print("ratio server / best forward (batch %d): %.3f  (target >= 0.85)" %
          (best["batch_size"], r1))
    print("ratio batched / max-batch-1 server:      %.3f  (target >= 2)" % r2)
    print("1 caller p50 - forward p50 at batch 1:   %+.2f ms (target <= 1)" %
          d3)
    errors = sum(sum(results[k]["errors"].values())
                 for k in ("batched", "unbatched", "single_caller"))
    print("errors: %d" % errors)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=2)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
