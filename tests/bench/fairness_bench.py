#!/usr/bin/python3
"""A small call's latency while a maximal request runs on the same model.

Starts encoder-server (built-in models) once with --fair-share and once with
--no-fair-share (strict arrival order, the earlier behaviour). In each, times
N small Embed calls (8 tokens) on the alibi model alone, then again while
another client keeps sending the largest request admission accepts there
(--big-inputs inputs of --big-tokens tokens, with attention statistics).
Prints p50/p99/max per case, the batch size of the server's sub-batches, and
lscpu's model and flags first.

Usage: fairness_bench.py --binary build/encoder-server [--calls 40]
"""
import argparse
import pathlib
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import grpc

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "integration"))
sys.path.insert(0, str(HERE.parents[1] / "client" / "python" /
                        "examples"))
from server_process import ServerProcess  # noqa: E402
import minimal_client as encoder_client  # noqa: E402


def percentile(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


def request(pb2, model, n_inputs, n_tokens, stats=False):
    r = pb2.EmbedRequest(model=model, return_attention_stats=stats)
    for i in range(n_inputs):
        r.inputs.add().token_ids.ids.extend(
            4 + (i * 31 + j * 7) % 9000 for j in range(n_tokens))
    return r


def small_latencies(stub, pb2, calls):
    out = []
    small = request(pb2, "alibi", 1, 8)
    for _ in range(calls):
        t = time.monotonic()
        stub.Embed(small, timeout=600)
        out.append((time.monotonic() - t) * 1000)
        time.sleep(0.02)
    return out


def run_case(args, pb2, pb2_grpc, fair):
    with tempfile.TemporaryDirectory(prefix="fair-") as tmp:
        server = ServerProcess(
            args.binary, directory=tmp,
            extra_args=["--fair-share" if fair else "--no-fair-share",
                        f"--max-batch-sequences={args.max_batch_sequences}"])
        try:
            server.wait_ready(300)
            channel = grpc.insecure_channel(f"127.0.0.1:{server.port}")
            stub = pb2_grpc.EncoderServiceStub(channel)
            alone = small_latencies(stub, pb2, args.calls)
            stop = threading.Event()
            big_done = []

            def hammer():
                big = request(pb2, "alibi", args.big_inputs, args.big_tokens,
                              stats=True)
                while not stop.is_set():
                    t = time.monotonic()
                    stub.Embed(big, timeout=3600)
                    big_done.append(time.monotonic() - t)

            thread = threading.Thread(target=hammer)
            thread.start()
            time.sleep(1.0)  # the large request is queued and running
            loaded = small_latencies(stub, pb2, args.calls)
            stop.set()
            thread.join()
        finally:
            server.stop()
    return alone, loaded, big_done


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--binary", required=True)
    parser.add_argument("--calls", type=int, default=40)
    parser.add_argument("--big-inputs", type=int, default=64)
    parser.add_argument("--big-tokens", type=int, default=512)
    parser.add_argument("--max-batch-sequences", type=int, default=8)
    parser.add_argument("--only", choices=["fair", "arrival"],
                        help="run one of the two cases")
    args = parser.parse_args()
    lscpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    for line in lscpu.splitlines():
        if line.startswith(("Model name", "Flags", "CPU(s)")):
            print(line[:200])
    with tempfile.TemporaryDirectory() as tmp:
        pb2, pb2_grpc = encoder_client.load_stubs(tmp)
        print(f"small call: 1 x 8 tokens on alibi; large request: "
              f"{args.big_inputs} x {args.big_tokens} tokens with attention "
              f"statistics; --max-batch-sequences={args.max_batch_sequences}")
        print("| scheduling | small call alone p50 / p99 ms | with the large "
              "request p50 / p99 / max ms | large request s |")
        print("|---|---|---|---|")
        cases = {None: (False, True), "fair": (True,), "arrival": (False,)}
        for fair in cases[args.only]:
            alone, loaded, big = run_case(args, pb2, pb2_grpc, fair)
            name = "fair share" if fair else "arrival order"
            big_s = f"{statistics.median(big):.1f}" if big else "-"
            print(f"| {name} | {percentile(alone, .5):.1f} / "
                  f"{percentile(alone, .99):.1f} | {percentile(loaded, .5):.1f}"
                  f" / {percentile(loaded, .99):.1f} / {max(loaded):.1f} | "
                  f"{big_s} |", flush=True)


if __name__ == "__main__":
    main()
