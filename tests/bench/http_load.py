#!/usr/bin/python3
"""Closed-loop load on the HTTP front's POST /v1/embeddings, reported as
`encoder-client bench --json` reports gRPC load (requests,
failed_requests, throughput.requests_per_s, latency_ms.p50 / p99), so
request_path_bench.py measures both fronts alike.

--concurrency callers, each on its own keep-alive connection (reopened
when the server closes it), send one input of --length token ids per
request and wait for the answer before the next; --warmup-requests are
sent first, one caller after another, and not counted.

Usage: http_load.py --port PORT --model NAME [--concurrency 32]
                    [--length 1] [--duration-s 5] [--warmup-requests 64]
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from http_front_bench import load, percentile, post, sequential  # noqa: E402


def request(model, i, length):
    """POST /v1/embeddings of one input of `length` ids (the i-th)."""
    ids = [4 + (i * 31 + j * 7) % 250 for j in range(length)]
    return post("/v1/embeddings",
                json.dumps({"model": model, "input": [ids]}).encode())


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--concurrency", type=int, default=32)
    p.add_argument("--length", type=int, default=1)
    p.add_argument("--duration-s", type=float, default=5)
    p.add_argument("--warmup-requests", type=int, default=64)
    a = p.parse_args()
    requests = [request(a.model, i, a.length) for i in range(64)]
    if a.warmup_requests:
        sequential(a.port, requests[0], a.warmup_requests)
    latencies, errors, wall = load(a.port, requests, a.concurrency,
                                   a.duration_s)
    if not latencies:
        sys.exit("no request was answered")
    print(json.dumps({
        "requests": len(latencies),
        "failed_requests": len(errors),
        "errors": sorted(set(errors)),
        "throughput": {"requests_per_s": len(latencies) / wall},
        "latency_ms": {"p50": 1e3 * percentile(latencies, 0.5),
                       "p99": 1e3 * percentile(latencies, 0.99)}}))


if __name__ == "__main__":
    main()
