#!/usr/bin/python3
"""One heavy caller against small ones on the same model: latency, deadline,
cancellation and the heavy call's own throughput.

Starts encoder-server on its built-in models (default flags unless --extra)
and, on the `alibi` model:
  1. heavy alone: one Embed of --heavy-inputs x --heavy-tokens tokens with
     attention statistics; its seconds are the throughput baseline;
  2. heavy beside small calls: the same Embed while another client sends a
     1-token Embed every --gap-ms; prints the small calls' p50/p99/max and
     the heavy call's seconds, and the heavy call's throughput lost to them;
  3. deadline: the heavy Embed with a --deadline-s deadline; prints how long
     after its deadline the answer came and, sent at once after that answer,
     a 1-token call's latency;
  4. cancel: the heavy Embed cancelled by its client after --cancel-after-s;
     a 1-token call sent at the moment of the cancel: its latency.
  5. HTTP client gone: the same inputs (token ids, no statistics) as POST
     /v1/embeddings, whose client closes its connection after
     --cancel-after-s: when the model runs no batch any more, and a 1-token
     call sent at the close;
  6. HTTP request timeout: the same request under --http-request-timeout
     (set to --deadline-s): when the 504 came, and the model's batches
     1 s after it.
In 3 to 6, the model's running batches 1 s after the deadline or cancel
(encoder_running_batches on /metrics): 0 when none of its work runs on.
The goals it prints against (a serving system's): small p99 <= 1 s and max
<= 1.5 s beside the heavy call; the model answers a 1-token call within 1 s
of a deadline or cancel; the heavy call loses at most 20% of its throughput.
lscpu's model and flags come first.

Usage: heavy_caller_bench.py --binary build/encoder-server
"""
import argparse
import json
import pathlib
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

import grpc

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "integration"))
sys.path.insert(0, str(HERE.parents[1] / "client" / "python" /
                        "examples"))
from server_process import ServerProcess  # noqa: E402
import minimal_client as encoder_client  # noqa: E402
from fairness_bench import percentile, request  # noqa: E402


def embed_request(pb2, n_inputs, n_tokens, stats=False):
    return request(pb2, "alibi", n_inputs, n_tokens, stats)


def timed(call, *args, **kwargs):
    t = time.monotonic()
    call(*args, **kwargs)
    return time.monotonic() - t


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--binary", required=True)
    parser.add_argument("--heavy-inputs", type=int, default=64)
    parser.add_argument("--heavy-tokens", type=int, default=2048)
    parser.add_argument("--gap-ms", type=float, default=100)
    parser.add_argument("--deadline-s", type=float, default=5)
    parser.add_argument("--cancel-after-s", type=float, default=5)
    parser.add_argument("--extra", action="append", default=[],
                        help="a further server flag (repeatable)")
    args = parser.parse_args()
    lscpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    for line in lscpu.splitlines():
        if line.startswith(("Model name", "Flags", "CPU(s)")):
            print(line[:200])
    with tempfile.TemporaryDirectory() as tmp:
        pb2, pb2_grpc = encoder_client.load_stubs(tmp)
        server = ServerProcess(
            args.binary, directory=tmp,
            extra_args=["--http-listen=127.0.0.1:0",
                        f"--http-request-timeout={args.deadline_s}",
                        *args.extra])
        try:
            server.wait_ready(300)
            run(args, server, pb2, pb2_grpc)
        finally:
            server.stop()
            print("server log (batching lines):")
            with open(server.log_path) as f:
                for line in f:
                    if "batch" in line.lower() and "profile" in line.lower():
                        print("  " + line.rstrip()[:300])


def running_batches(http_port):
    """encoder_running_batches of the alibi model, from /metrics."""
    with urllib.request.urlopen(
            f"http://127.0.0.1:{http_port}/metrics", timeout=10) as r:
        for line in r.read().decode().splitlines():
            if (line.startswith("encoder_running_batches{")
                    and 'model="alibi"' in line):
                return int(float(line.split()[-1]))
    return None


def run(args, server, pb2, pb2_grpc):
    with open(server.ready_file) as f:
        http_port = json.load(f)["http_port"]
    channel = grpc.insecure_channel(f"127.0.0.1:{server.port}")
    stub = pb2_grpc.EncoderServiceStub(channel)
    heavy = embed_request(pb2, args.heavy_inputs, args.heavy_tokens, True)
    small = embed_request(pb2, 1, 1)
    print(f"heavy: {args.heavy_inputs} x {args.heavy_tokens} tokens with "
          f"attention statistics on alibi; small: 1 x 1 token every "
          f"{args.gap_ms:.0f} ms; flags: {' '.join(args.extra) or 'defaults'}")
    for _ in range(3):
        stub.Embed(small, timeout=60)

    alone = timed(stub.Embed, heavy, timeout=3600)
    print(f"1. heavy alone: {alone:.2f} s "
          f"({args.heavy_inputs / alone:.2f} sequences/s)", flush=True)

    latencies = []
    stop = threading.Event()

    def pinger():
        while not stop.is_set():
            latencies.append(timed(stub.Embed, small, timeout=600))
            time.sleep(args.gap_ms / 1000)

    thread = threading.Thread(target=pinger)
    thread.start()
    beside = timed(stub.Embed, heavy, timeout=3600)
    stop.set()
    thread.join()
    loss = 1 - alone / beside
    print(f"2. beside small calls: heavy {beside:.2f} s (throughput lost: "
          f"{100 * loss:.1f}%, goal <= 20%); {len(latencies)} small calls "
          f"p50 {1000 * percentile(latencies, .5):.0f} ms, p99 "
          f"{1000 * percentile(latencies, .99):.0f} ms (goal <= 1000), max "
          f"{1000 * max(latencies):.0f} ms (goal <= 1500)", flush=True)

    start = time.monotonic()
    code = "OK"
    try:
        stub.Embed(heavy, timeout=args.deadline_s)
    except grpc.RpcError as e:
        code = e.code().name
    late = time.monotonic() - start - args.deadline_s
    after = timed(stub.Embed, small, timeout=600)
    time.sleep(max(0.0, start + args.deadline_s + 1 - time.monotonic()))
    running = running_batches(http_port)
    print(f"3. deadline {args.deadline_s:.0f} s: {code} {late:.2f} s after "
          f"the deadline; next 1-token call {1000 * after:.0f} ms "
          f"(goal < 1000); batches running 1 s after the deadline: "
          f"{running} (goal 0)", flush=True)

    future = stub.Embed.future(heavy, timeout=3600)
    time.sleep(args.cancel_after_s)
    future.cancel()
    cancelled = time.monotonic()
    after = timed(stub.Embed, small, timeout=600)
    time.sleep(max(0.0, cancelled + 1 - time.monotonic()))
    running = running_batches(http_port)
    again = timed(stub.Embed, small, timeout=600)
    print(f"4. cancel after {args.cancel_after_s:.0f} s: a 1-token call sent "
          f"at the cancel {1000 * after:.0f} ms (goal < 1000), one 1 s "
          f"later {1000 * again:.0f} ms; batches running 1 s after the "
          f"cancel: {running} (goal 0)", flush=True)

    body = json.dumps({"model": "alibi", "input": [
        [4 + (i * 31 + j * 7) % 9000 for j in range(args.heavy_tokens)]
        for i in range(args.heavy_inputs)]}).encode()
    http_request = (b"POST /v1/embeddings HTTP/1.1\r\nHost: bench\r\n"
                    b"Content-Type: application/json\r\n"
                    b"Content-Length: %d\r\n\r\n" % len(body)) + body

    def idle_after(t0, limit=60):
        while running_batches(http_port) != 0:
            if time.monotonic() - t0 > limit:
                return float("inf")
            time.sleep(0.02)
        return time.monotonic() - t0

    sock = socket.create_connection(("127.0.0.1", http_port))
    sock.sendall(http_request)
    time.sleep(args.cancel_after_s)
    busy = running_batches(http_port)
    left = time.monotonic()
    sock.close()
    after = timed(stub.Embed, small, timeout=600)
    idle = idle_after(left)
    print(f"5. HTTP client gone after {args.cancel_after_s:.0f} s "
          f"({busy} batches running): no batch running {idle:.2f} s after "
          f"the close (goal <= 1); a 1-token call sent at the close "
          f"{1000 * after:.0f} ms (goal < 1000)", flush=True)

    sock = socket.create_connection(("127.0.0.1", http_port), timeout=600)
    start = time.monotonic()
    sock.sendall(http_request)
    reply = b""
    while b"\r\n\r\n" not in reply:
        chunk = sock.recv(65536)
        if not chunk:
            break
        reply += chunk
    answered = time.monotonic() - start
    sock.close()
    status = reply.split(b" ", 2)[1].decode() if reply else "none"
    time.sleep(max(0.0, start + args.deadline_s + 1 - time.monotonic()))
    running = running_batches(http_port)
    after = timed(stub.Embed, small, timeout=600)
    print(f"6. HTTP request timeout {args.deadline_s:.0f} s: {status} "
          f"{answered - args.deadline_s:.2f} s after the timeout; batches "
          f"running 1 s after it: {running} (goal 0); next 1-token call "
          f"{1000 * after:.0f} ms (goal < 1000)", flush=True)


if __name__ == "__main__":
    main()
