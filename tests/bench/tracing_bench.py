#!/usr/bin/python3
"""What tracing costs the serving path, side by side: one encoder-server
build started three ways, round by round (--rounds, the order alternating):
  off   no --otlp-endpoint (no tracer);
  live  every call traced and exported to a collector that answers at once
        (an OTLP/gRPC TraceService in this process, counting spans);
  dead  every call traced, exported to a port that accepts connections and
        never answers (each export waits out --otlp-export-timeout; full
        queues drop spans).
Each is measured with this build's `encoder-client bench`: one caller's
p50/p99 and --concurrency callers' sequences/s and p50/p99 (token-id
inputs of --length tokens on --model). Prints lscpu's model name first,
then medians over rounds and the ratios live/off and dead/off.

Usage: tracing_bench.py --binary build/encoder-server
Needs the opentelemetry-proto and grpcio packages (the project's .venv).
"""
import argparse
import os
import socket
import subprocess
import sys
import threading
from concurrent import futures

import grpc
from opentelemetry.proto.collector.trace.v1 import (trace_service_pb2,
                                                    trace_service_pb2_grpc)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run_bench  # noqa: E402
from grpc_front_bench import measure  # noqa: E402


class CountingCollector(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self):
        self.lock = threading.Lock()
        self.spans = 0
        self.server = grpc.server(futures.ThreadPoolExecutor(4))
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(
            self, self.server)
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        self.server.start()

    def Export(self, request, context):
        n = sum(len(ss.spans) for rs in request.resource_spans
                for ss in rs.scope_spans)
        with self.lock:
            self.spans += n
        return trace_service_pb2.ExportTraceServiceResponse()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary", required=True)
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
    build = os.path.dirname(os.path.abspath(a.binary))
    collector = CountingCollector()
    hole = socket.socket()
    hole.bind(("127.0.0.1", 0))
    hole.listen(1024)
    sides = {
        "off": [],
        "live": ["--otlp-endpoint=http://127.0.0.1:%d" % collector.port],
        "dead": ["--otlp-endpoint=http://127.0.0.1:%d" %
                 hole.getsockname()[1], "--otlp-export-timeout=1s"],
    }
    rounds = {side: [] for side in sides}
    for r in range(a.rounds):
        order = list(sides) if r % 2 == 0 else list(reversed(sides))
        for side in order:
            rounds[side].append(measure(os.path.abspath(a.binary), build, a,
                                        sides[side]))
            print("round %d %s: %s" % (r + 1, side, rounds[side][-1]),
                  flush=True)
    print("spans the live collector received: %d" % collector.spans)
    print("\n%-22s %10s %10s %10s %9s %9s" % (
        "median over %d rounds" % a.rounds, "off", "live", "dead",
        "live/off", "dead/off"))
    for key in rounds["off"][0]:
        m = {side: run_bench.median([x[key] for x in rounds[side]])
             for side in sides}
        print("%-22s %10.2f %10.2f %10.2f %9.3f %9.3f" % (
            key, m["off"], m["live"], m["dead"], m["live"] / m["off"],
            m["dead"] / m["off"]))
    collector.server.stop(0)
    hole.close()


if __name__ == "__main__":
    main()
