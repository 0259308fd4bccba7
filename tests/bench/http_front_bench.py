#!/usr/bin/python3
"""The HTTP front of two encoder-server builds, side by side: latency,
throughput, and what hostile clients cost.

Starts each binary on its built-in models with --http-listen, alternating
binaries round by round (--rounds), and measures POST /v1/embeddings with
token-id inputs on the `rope` model:
  1. one caller, one keep-alive connection: --calls requests of 1 input x
     --tokens tokens, p50/p99 latency;
  2. --callers callers, a keep-alive connection each, for --seconds:
     requests/s and p50/p99;
  3. GET /metrics from one caller: p50 latency;
  4. a --upload-mib chunked body (no Content-Length) to /v1/embeddings:
     the answer, how much was sent before it, the server's RSS growth
     (against 2x --http-max-body-bytes);
  5. two requests pipelined on one connection: both answered, in order.
Prints lscpu's model and flags first, then a table of medians over rounds
and the ratio of --binary to --baseline.

Usage: http_front_bench.py --binary build/encoder-server
                           [--baseline OLD/encoder-server]
"""
import argparse
import asyncio
import json
import pathlib
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "integration"))
from server_process import ServerProcess, rss_bytes  # noqa: E402


def percentile(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


def body(i, tokens):
    return json.dumps({"model": "rope", "input": [
        [4 + (i * 31 + j * 7) % 9000 for j in range(tokens)]]}).encode()


def post(path, payload):
    return (f"POST {path} HTTP/1.1\r\nHost: bench\r\n"
            f"Content-Type: application/json\r\n"
            f"Content-Length: {len(payload)}\r\n\r\n").encode() + payload


async def read_response(reader):
    """(status, whether the server closes the connection after it)."""
    head = await reader.readuntil(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    length, close = 0, False
    for line in head.split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.lower() == b"content-length":
            length = int(value)
        elif name.lower() == b"connection" and b"close" in value.lower():
            close = True
    await reader.readexactly(length)
    return status, close


async def caller(port, requests, stop_at, latencies, errors):
    """Requests one after another on a keep-alive connection, opening a new
    one whenever the server closes it (as HTTP clients do)."""
    reader = writer = None
    i = 0
    try:
        while time.monotonic() < stop_at:
            t = time.monotonic()
            if writer is None:
                reader, writer = await asyncio.open_connection("127.0.0.1",
                                                               port)
            writer.write(requests[i % len(requests)])
            try:
                status, close = await read_response(reader)
            except (asyncio.IncompleteReadError, ConnectionError):
                writer.close()
                writer = None
                continue
            if status != 200:
                errors.append(status)
            if close:
                writer.close()
                writer = None
            latencies.append(time.monotonic() - t)
            i += 1
    finally:
        if writer is not None:
            writer.close()


def load(port, requests, callers, seconds):
    latencies, errors = [], []

    async def run():
        stop_at = time.monotonic() + seconds
        await asyncio.gather(*(caller(port, requests, stop_at, latencies,
                                      errors) for _ in range(callers)))

    start = time.monotonic()
    asyncio.run(run())
    return latencies, errors, time.monotonic() - start


def sequential(port, request, calls):
    """Latencies of `calls` requests, one after another, reconnecting when
    the server closes the connection (the reconnect counts in the time)."""

    async def run():
        latencies = []
        reader = writer = None
        while len(latencies) < calls:
            t = time.monotonic()
            if writer is None:
                reader, writer = await asyncio.open_connection("127.0.0.1",
                                                               port)
            writer.write(request)
            try:
                _, close = await read_response(reader)
            except (asyncio.IncompleteReadError, ConnectionError):
                writer.close()
                writer = None
                continue
            latencies.append(time.monotonic() - t)
            if close:
                writer.close()
                writer = None
        if writer is not None:
            writer.close()
        return latencies

    return asyncio.run(run())


def upload(port, pid, mib):
    """A chunked body of `mib` MiB: (status, MiB sent, RSS growth MiB)."""
    base = rss_bytes(pid)
    peak = [base]
    stop = threading.Event()

    def sample():
        while not stop.is_set():
            peak[0] = max(peak[0], rss_bytes(pid))
            time.sleep(0.002)

    sampler = threading.Thread(target=sample)
    sampler.start()
    sent, status = 0, None
    with socket.create_connection(("127.0.0.1", port), timeout=120) as sock:
        sock.sendall(b"POST /v1/embeddings HTTP/1.1\r\nHost: bench\r\n"
                     b"Transfer-Encoding: chunked\r\n\r\n")
        chunk = b"10000\r\n" + b"[" * 0x10000 + b"\r\n"
        try:
            while sent < mib << 20:
                sock.sendall(chunk)
                sent += 0x10000
        except OSError:
            pass
        try:
            reply = sock.recv(4096)
            status = int(reply.split(b" ", 2)[1]) if reply else None
        except OSError:
            status = None
    time.sleep(0.2)
    stop.set()
    sampler.join()
    return status, sent / 2**20, (peak[0] - base) / 2**20


def pipelined(port):
    data = post("/v1/embeddings", body(1, 8)) + post("/v1/embeddings",
                                                     body(2, 8))
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(data)
        buf = b""
        deadline = time.monotonic() + 10
        while buf.count(b"HTTP/1.1 200") < 2 and time.monotonic() < deadline:
            try:
                chunk = sock.recv(65536)
            except OSError:
                break
            if not chunk:
                break
            buf += chunk
    return buf.count(b"HTTP/1.1 200")


def measure(binary, args):
    with tempfile.TemporaryDirectory(prefix="http-bench-") as tmp:
        server = ServerProcess(binary, directory=tmp, extra_args=[
            "--http-listen=127.0.0.1:0", *args.extra])
        try:
            server.wait_ready(300)
            with open(server.ready_file) as f:
                port = json.load(f)["http_port"]
            one = post("/v1/embeddings", body(0, args.tokens))
            sequential(port, one, 20)  # warm-up
            single = sequential(port, one, args.calls)
            requests = [post("/v1/embeddings", body(i, args.tokens))
                        for i in range(64)]
            lat, errors, wall = load(port, requests, args.callers,
                                     args.seconds)
            scrape = sequential(
                port, b"GET /metrics HTTP/1.1\r\nHost: bench\r\n\r\n", 50)
            status, sent, growth = upload(port, server.process.pid,
                                          args.upload_mib)
            pipe = pipelined(port)
            return {
                "single_p50_ms": 1000 * percentile(single, .5),
                "single_p99_ms": 1000 * percentile(single, .99),
                "load_rps": len(lat) / wall,
                "load_p50_ms": 1000 * percentile(lat, .5),
                "load_p99_ms": 1000 * percentile(lat, .99),
                "load_errors": len(errors),
                "metrics_p50_ms": 1000 * percentile(scrape, .5),
                "upload_status": status,
                "upload_sent_mib": sent,
                "upload_rss_growth_mib": growth,
                "pipelined_answered": pipe,
            }
        finally:
            server.stop()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--binary", required=True)
    parser.add_argument("--baseline")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--tokens", type=int, default=16)
    parser.add_argument("--callers", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=8)
    parser.add_argument("--upload-mib", type=int, default=64)
    parser.add_argument("--extra", action="append", default=[],
                        help="a further server flag (repeatable)")
    args = parser.parse_args()
    lscpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    for line in lscpu.splitlines():
        if line.startswith(("Model name", "Flags", "CPU(s)")):
            print(line[:200])
    binaries = {"new": args.binary}
    if args.baseline:
        binaries["baseline"] = args.baseline
    results = {name: [] for name in binaries}
    for r in range(args.rounds):
        order = list(binaries) if r % 2 == 0 else list(binaries)[::-1]
        for name in order:
            got = measure(binaries[name], args)
            results[name].append(got)
            print(f"round {r + 1} {name}: " + ", ".join(
                f"{k} {v:.2f}" if isinstance(v, float) else f"{k} {v}"
                for k, v in got.items()), flush=True)
    keys = list(results["new"][0])
    print(f"\nmedians of {args.rounds} rounds (rope, {args.tokens} tokens, "
          f"{args.callers} callers x {args.seconds:.0f} s)")
    header = f"{'':24}" + "".join(f"{n:>12}" for n in binaries)
    if args.baseline:
        header += f"{'new/base':>10}"
    print(header)
    for k in keys:
        values = {}
        for name in binaries:
            vs = [x[k] for x in results[name] if x[k] is not None]
            values[name] = statistics.median(vs) if vs else None
        row = f"{k:24}" + "".join(
            f"{values[n]:>12.2f}" if values[n] is not None else f"{'-':>12}"
            for n in binaries)
        if args.baseline and values["baseline"]:
            row += f"{values['new'] / values['baseline']:>10.2f}"
        print(row)


if __name__ == "__main__":
    main()
