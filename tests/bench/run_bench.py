#!/usr/bin/env python3
"""Serving benchmark: encoder-server under encoder-client bench, against the
in-process forward of the same model, measured in one run.

Measures in rounds (each round: batched server, the same server with
--max-batch-sequences=1, one caller, in-process forward at the batch sizes
the server formed) and prints the medians of the per-round ratios, since a
shared host's speed drifts by 10-20% between minutes.
The three ratios the service is held to:
  1. 16-token inputs, 32 callers: server throughput / best in-process forward
  2. same load: server / the same server with --max-batch-sequences=1
  3. 1 caller: server p50 latency - in-process forward p50 at batch 1
Usage: run_bench.py BUILD_DIR [--duration S] [--rounds N] [--json OUT]
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
    return proc, wait_ready(proc, ready, log.name, "server")


def wait_ready(proc, ready, log_name, what, key="grpc_port"):
    """The port `key` (gRPC's by default) from `ready` once `proc` writes
    it; exits on failure."""
    deadline = time.time() + 120
    while not os.path.exists(ready):
        if proc.poll() is not None or time.time() > deadline:
            proc.kill()
            sys.exit("%s did not start; see %s" % (what, log_name))
        time.sleep(0.2)
    with open(ready) as f:
        return json.load(f)[key]


def stop_server(proc):
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()


def client_bench(build, port, model, concurrency, length, duration,
                 extra=(), prefix=()):
    """encoder-client bench's JSON report; `extra`: more bench flags;
    `prefix`: a command the client runs under (taskset -c 1).
    `length`: tokens per input, or "MIN-MAX" for lengths drawn uniformly."""
    lo, _, hi = str(length).partition("-")
    lengths = (["--min-length", lo, "--max-length", hi] if hi
               else ["--length", lo])
    out = subprocess.run(
        [*prefix, os.path.join(build, "encoder-client"), "bench",
         "--target", "127.0.0.1:%d" % port, "--model", model,
         "--concurrency", str(concurrency), *lengths,
         "--duration-s", str(duration), "--warmup-requests",
         str(2 * concurrency), "--json", *extra],
        check=True, capture_output=True, text=True, timeout=duration + 120)
    return json.loads(out.stdout)


def forward_bench(build, model, sizes, length, seconds):
    out = subprocess.run(
        [os.path.join(build, "encoder-bench-forward"), "--model", model,
         "--batch-sizes", ",".join(str(s) for s in sizes),
         "--length", str(length), "--seconds", str(seconds)],
        check=True, capture_output=True, text=True, timeout=600)
    return {r["batch_size"]: r for r in json.loads(out.stdout)["results"]}


def median(values):
    values = sorted(values)
    mid = len(values) // 2
    return values[mid] if len(values) % 2 else (values[mid - 1] +
                                                 values[mid]) / 2


def one_round(a, batched_port, unbatched_port):
    """One measurement of every side, back to back, so that slow phases of
    a shared host hit all of them alike."""
    r = {}
    r["batched"] = client_bench(a.build, batched_port, a.model, a.concurrency,
                                a.length, a.duration)
    r["unbatched"] = client_bench(a.build, unbatched_port, a.model,
                                  a.concurrency, a.length, a.duration)
    r["single_caller"] = client_bench(a.build, batched_port, a.model, 1,
                                      a.length, a.duration / 2)
    histogram = r["batched"]["batch_size"]["histogram"]
    # The batch sizes the server formed most (by sequences), plus 1 and the
    # largest allowed.
    formed = sorted(histogram, key=lambda k: -histogram[k])[:3]
    sizes = sorted({1, a.concurrency} | {int(k) for k in formed})
    forward = forward_bench(a.build, a.model, sizes, a.length,
                            max(1.5, a.duration / 8))
    r["forward"] = {str(k): v for k, v in forward.items()}
    best = max(forward.values(), key=lambda f: f["sequences_per_s"])
    r["best_forward"] = best
    r["ratios"] = {
        "server_over_best_forward":
            r["batched"]["throughput"]["sequences_per_s"] /
            best["sequences_per_s"],
        "batched_over_unbatched":
            r["batched"]["throughput"]["sequences_per_s"] /
            r["unbatched"]["throughput"]["sequences_per_s"],
        "single_caller_p50_minus_forward_p50_ms":
            r["single_caller"]["latency_ms"]["p50"] - forward[1]["p50_ms"],
    }
    return r


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("build")
    parser.add_argument("--model", default="sinusoidal")
    parser.add_argument("--length", type=int, default=16)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--duration", type=float, default=10,
                        help="seconds per server measurement")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", help="also write the results here")
    a = parser.parse_args()

    batched, batched_port = start_server(a.build, [])
    unbatched, unbatched_port = None, None
    rounds = []
    try:
        unbatched, unbatched_port = start_server(
            a.build, ["--max-batch-sequences=1"])
        for i in range(a.rounds):
            rounds.append(one_round(a, batched_port, unbatched_port))
            print("round %d: %s" % (i + 1, ", ".join(
                "%s %.3f" % kv for kv in rounds[-1]["ratios"].items())),
                flush=True)
    finally:
        stop_server(batched)
        if unbatched is not None:
            stop_server(unbatched)

    print("\nmodel %s, %d-token inputs, %d callers, %d rounds of %.0f s" %
          (a.model, a.length, a.concurrency, a.rounds, a.duration))
    print("%-26s %10s %9s %9s %7s   (median over rounds)" %
          ("run", "seq/s", "p50 ms", "p99 ms", "batch"))
    for name in ("batched", "unbatched", "single_caller"):
        print("%-26s %10.1f %9.2f %9.2f %7.2f" % (
            "server " + name,
            median([r[name]["throughput"]["sequences_per_s"] for r in rounds]),
            median([r[name]["latency_ms"]["p50"] for r in rounds]),
            median([r[name]["latency_ms"]["p99"] for r in rounds]),
            median([r[name]["batch_size"]["mean"] for r in rounds])))
    for size in sorted({int(k) for r in rounds for k in r["forward"]}):
        runs = [r["forward"][str(size)] for r in rounds
                if str(size) in r["forward"]]
        print("%-26s %10.1f %9.2f %9s %7d" % (
            "in-process forward", median([f["sequences_per_s"] for f in runs]),
            median([f["p50_ms"] for f in runs]), "-", size))
    ratios = {k: median([r["ratios"][k] for r in rounds])
              for k in rounds[0]["ratios"]}
    print("ratio server / best forward:            %.3f  (target >= 0.85)" %
          ratios["server_over_best_forward"])
    print("ratio batched / max-batch-1 server:     %.3f  (target >= 2)" %
          ratios["batched_over_unbatched"])
    print("1 caller p50 - forward p50 at batch 1:  %+.2f ms (target <= 1)" %
          ratios["single_caller_p50_minus_forward_p50_ms"])
    errors = sum(sum(r[k]["errors"].values()) for r in rounds
                 for k in ("batched", "unbatched", "single_caller"))
    print("errors: %d" % errors)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"rounds": rounds, "median_ratios": ratios}, f,
                      indent=2)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
