#!/usr/bin/env python3
"""OpenTelemetry traces from a real encoder-server, received by collectors
built on the official OTLP messages (the opentelemetry-proto package): its
TraceService over gRPC and POST /v1/traces over HTTP.

Checked: an HTTP call continues its caller's traceparent and a gRPC call
without one starts a trace; the call's server span and its children
(tokenize, queue, inference, encode response) with their parentage, times
inside the call that add up to its duration within 5%, the attributes
(model, scheme, precision, tokens, status); the inference span's links to
the "forward" spans of its batches; OpenTelemetry's variables
(OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES, OTEL_TRACES_SAMPLER(_ARG));
parent-based sampling; and that a collector that never answers costs the
calls nothing (all answered, the spans dropped and counted in
encoder_trace_spans_total). The latency side of that is
tests/bench/tracing_bench.py.

Usage: tracing_test.py --server BIN --source-dir DIR
"""
import argparse
import http.client
import http.server
import json
import os
import re
import socket
import sys
import tempfile
import threading
import time
import unittest
import uuid
from concurrent import futures

import grpc
from opentelemetry.proto.collector.trace.v1 import (trace_service_pb2,
                                                    trace_service_pb2_grpc)

from server_process import ServerProcess

ARGS = None
SERVER_SPAN = 2  # SPAN_KIND_SERVER
SPAN_NAMES = ["tokenize", "queue", "inference", "encode response"]


def attributes(kvs):
    return {kv.key: getattr(kv.value, kv.value.WhichOneof("value"))
            for kv in kvs}


class Collector:
    """What the collectors received: (resource attributes, span) pairs."""

    def __init__(self):
        self.lock = threading.Lock()
        self.spans = []
        self.requests = 0

    def add(self, request):
        with self.lock:
            self.requests += 1
            for rs in request.resource_spans:
                resource = attributes(rs.resource.attributes)
                for ss in rs.scope_spans:
                    for span in ss.spans:
                        self.spans.append((resource, span))

    def trace(self, trace_id):
        with self.lock:
            return [s for _, s in self.spans if s.trace_id == trace_id]

    def wait(self, predicate, timeout=30):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                found = predicate([s for _, s in self.spans])
            if found:
                return found
            time.sleep(0.05)
        raise AssertionError("the collector did not receive the spans")


class GrpcCollector(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self, collector):
        self.collector = collector
        self.server = grpc.server(futures.ThreadPoolExecutor(4))
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(
            self, self.server)
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        self.server.start()

    def Export(self, request, context):
        self.collector.add(request)
        return trace_service_pb2.ExportTraceServiceResponse()


class HttpCollector:
    def __init__(self, collector):
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                outer.paths.append(
                    (self.path, self.headers.get("Content-Type")))
                request = trace_service_pb2.ExportTraceServiceRequest()
                request.ParseFromString(body)
                collector.add(request)
                reply = trace_service_pb2.ExportTraceServiceResponse()
                data = reply.SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.paths = []
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0),
                                                      Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


def http_call(port, path, body, headers=None, method="POST"):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        data = None if body is None else json.dumps(body)
        conn.request(method, path, body=data,
                     headers={"Content-Type": "application/json",
                              **(headers or {})})
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def embed(port, headers=None, text="the quick brown fox"):
    status, body = http_call(port, "/v1/embeddings",
                             {"model": "sinusoidal", "input": [text]},
                             headers)
    assert status == 200, body
    return body


def start_server(directory, flags, env=None):
    os.makedirs(directory, exist_ok=True)
    server = ServerProcess(ARGS.server, directory,
                           ["--otlp-schedule-delay=50ms", *flags],
                           env={**os.environ, **(env or {})})
    server.wait_ready(120)
    return server


def nanos(span):
    return span.end_time_unix_nano - span.start_time_unix_nano


class TracingTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="tracing-test-")
        cls.dir = cls.tmp.name
        cls.grpc_spans = Collector()
        cls.grpc_collector = GrpcCollector(cls.grpc_spans)
        cls.http_spans = Collector()
        cls.http_collector = HttpCollector(cls.http_spans)
        cls.servers = []
        # OTLP/gRPC, configured by OpenTelemetry's variables.
        cls.grpc_server = start_server(
            os.path.join(cls.dir, "grpc"), [],
            {"OTEL_EXPORTER_OTLP_ENDPOINT":
                 f"http://127.0.0.1:{cls.grpc_collector.port}",
             "OTEL_SERVICE_NAME": "tracing-test",
             "OTEL_RESOURCE_ATTRIBUTES": "deployment.environment=ci,team=a%2Cb"})
        cls.servers.append(cls.grpc_server)
        # OTLP/HTTP, configured by flags; new traces sampled at ratio 0.
        cls.http_server = start_server(
            os.path.join(cls.dir, "http"),
            ["--otlp-protocol=http/protobuf",
             f"--otlp-endpoint=http://127.0.0.1:{cls.http_collector.port}",
             "--otlp-service-name=tracing-http",
             "--otlp-sampler=parentbased_traceidratio",
             "--otlp-sampler-arg=0"])
        cls.servers.append(cls.http_server)

    @classmethod
    def tearDownClass(cls):
        for server in cls.servers:
            server.stop()
        cls.grpc_collector.server.stop(0)
        cls.http_collector.server.shutdown()
        cls.tmp.cleanup()

    def check_call_tree(self, spans, call):
        """The call's children: parentage, times inside the call that add
        up to it within 5%, and the inference span's batch links."""
        children = {s.name: s for s in spans
                    if s.parent_span_id == call.span_id}
        self.assertEqual(sorted(children), sorted(SPAN_NAMES))
        total = 0
        for name in SPAN_NAMES:
            s = children[name]
            self.assertEqual(s.trace_id, call.trace_id, name)
            self.assertGreaterEqual(s.start_time_unix_nano,
                                    call.start_time_unix_nano, name)
            self.assertLessEqual(s.end_time_unix_nano,
                                 call.end_time_unix_nano, name)
            self.assertEqual(s.flags & 0x300, 0x100, name)  # local parent
            total += nanos(s)
        self.assertLessEqual(abs(nanos(call) - total), 0.05 * nanos(call),
                             f"children {total} ns, call {nanos(call)} ns")
        # Consecutive: each child starts where the one before ended.
        for before, after in zip(SPAN_NAMES, SPAN_NAMES[1:]):
            self.assertEqual(children[before].end_time_unix_nano,
                             children[after].start_time_unix_nano)
        return children

    def check_batches(self, collector, inference):
        self.assertGreaterEqual(len(inference.links), 1)
        for link in inference.links:
            forward = collector.wait(lambda spans: [
                s for s in spans if s.span_id == link.span_id])[0]
            self.assertEqual(forward.name, "forward")
            self.assertEqual(forward.trace_id, link.trace_id)
            self.assertNotEqual(forward.trace_id, inference.trace_id)
            a = attributes(forward.attributes)
            self.assertEqual(a["encoder.model"], "sinusoidal")
            self.assertGreaterEqual(a["encoder.batch.sequences"], 1)
            self.assertGreaterEqual(a["encoder.batch.traced_sequences"], 1)
            # The batch ran inside the call's inference span.
            self.assertGreaterEqual(forward.start_time_unix_nano,
                                    inference.start_time_unix_nano)
            self.assertLessEqual(forward.end_time_unix_nano,
                                 inference.end_time_unix_nano)

    def test_http_call_continues_the_callers_trace(self):
        trace_id = uuid.uuid4().hex
        parent = uuid.uuid4().hex[:16]
        embed(self.grpc_server.ports["http_port"],
              {"traceparent": f"00-{trace_id}-{parent}-01",
               "tracestate": "vendor=opaque"})
        want = bytes.fromhex(trace_id)
        spans = self.grpc_spans.wait(
            lambda all: len([s for s in all if s.trace_id == want]) >= 5
            and [s for s in all if s.trace_id == want])
        call = [s for s in spans if s.kind == SERVER_SPAN]
        self.assertEqual(len(call), 1)
        call = call[0]
        self.assertEqual(call.name, "POST /v1/embeddings")
        self.assertEqual(call.parent_span_id, bytes.fromhex(parent))
        self.assertEqual(call.flags & 0x3ff, 0x301)  # sampled, remote parent
        self.assertEqual(call.trace_state, "vendor=opaque")
        a = attributes(call.attributes)
        self.assertEqual(a["http.request.method"], "POST")
        self.assertEqual(a["http.route"], "/v1/embeddings")
        self.assertEqual(a["http.response.status_code"], 200)
        self.assertEqual(a["encoder.model"], "sinusoidal")
        self.assertEqual(a["encoder.scheme"], "sinusoidal")
        self.assertEqual(a["encoder.precision"], "float32")
        self.assertEqual(a["encoder.status"], "OK")
        self.assertGreater(a["encoder.tokens"], 0)
        self.assertEqual(a["encoder.inputs"], 1)
        self.assertEqual(call.status.code, 0)  # unset: not an error
        children = self.check_call_tree(spans, call)
        self.check_batches(self.grpc_spans, children["inference"])
        with self.grpc_spans.lock:
            resource = [r for r, s in self.grpc_spans.spans
                        if s.span_id == call.span_id][0]
        self.assertEqual(resource["service.name"], "tracing-test")
        self.assertEqual(resource["deployment.environment"], "ci")
        self.assertEqual(resource["team"], "a,b")
        self.assertIn("service.version", resource)

    def test_grpc_call_without_traceparent_starts_a_trace(self):
        sys.path.insert(0, os.path.join(ARGS.source_dir, "client", "python"))
        from encoder_client import pb2, pb2_grpc
        request_id = uuid.uuid4().hex
        with grpc.insecure_channel(
                f"127.0.0.1:{self.grpc_server.port}") as channel:
            stub = pb2_grpc.EncoderServiceStub(channel)
            stub.Embed(pb2.EmbedRequest(
                model="sinusoidal",
                inputs=[pb2.Input(token_ids=pb2.TokenIds(ids=[7] * 24))]),
                metadata=[("x-request-id", request_id)], timeout=60)

        def mine(spans):
            return [s for s in spans if s.kind == SERVER_SPAN and
                    attributes(s.attributes).get("encoder.request_id") ==
                    request_id]
        call = self.grpc_spans.wait(mine)[0]
        self.assertEqual(call.name, "encoder.v1.EncoderService/Embed")
        self.assertEqual(call.parent_span_id, b"")
        a = attributes(call.attributes)
        self.assertEqual(a["rpc.system"], "grpc")
        self.assertEqual(a["rpc.method"], "Embed")
        self.assertEqual(a["encoder.tokens"], 24)
        spans = self.grpc_spans.wait(
            lambda all: len([s for s in all if s.trace_id == call.trace_id])
            >= 5 and [s for s in all if s.trace_id == call.trace_id])
        children = self.check_call_tree(spans, call)
        self.check_batches(self.grpc_spans, children["inference"])

    def test_each_stream_request_is_a_span_of_its_own(self):
        sys.path.insert(0, os.path.join(ARGS.source_dir, "client", "python"))
        from encoder_client import pb2, pb2_grpc
        trace_id = uuid.uuid4().hex
        parent = uuid.uuid4().hex[:16]
        requests = [pb2.EmbedRequest(
            model="sinusoidal",
            inputs=[pb2.Input(token_ids=pb2.TokenIds(ids=[5] * n))])
            for n in (8, 12)]
        with grpc.insecure_channel(
                f"127.0.0.1:{self.grpc_server.port}") as channel:
            stub = pb2_grpc.EncoderServiceStub(channel)
            answers = list(stub.EmbedStream(
                iter(requests), timeout=60,
                metadata=[("traceparent", f"00-{trace_id}-{parent}-01")]))
        self.assertEqual(len(answers), 2)
        want = bytes.fromhex(trace_id)
        spans = self.grpc_spans.wait(
            lambda all: len([s for s in all if s.trace_id == want and
                             s.kind == SERVER_SPAN]) >= 2
            and [s for s in all if s.trace_id == want])
        calls = [s for s in spans if s.kind == SERVER_SPAN]
        self.assertEqual(len(calls), 2)
        self.assertNotEqual(calls[0].span_id, calls[1].span_id)
        self.assertEqual(
            sorted(attributes(c.attributes)["encoder.tokens"] for c in calls),
            [8, 12])
        for call in calls:
            self.assertEqual(call.name, "encoder.v1.EncoderService/EmbedStream")
            self.assertEqual(call.parent_span_id, bytes.fromhex(parent))
            self.check_call_tree(self.grpc_spans.wait(
                lambda all: len([s for s in all
                                 if s.parent_span_id == call.span_id]) >= 4
                and [s for s in all if s.trace_id == want]), call)

    def test_refused_call_is_an_error_span(self):
        trace_id = uuid.uuid4().hex
        status, _ = http_call(self.grpc_server.ports["http_port"],
                              "/v1/embeddings",
                              {"model": "no-such-model", "input": ["x"]},
                              {"traceparent":
                                   f"00-{trace_id}-{uuid.uuid4().hex[:16]}-01"})
        self.assertEqual(status, 404)
        want = bytes.fromhex(trace_id)
        call = self.grpc_spans.wait(
            lambda all: [s for s in all if s.trace_id == want])[0]
        self.assertEqual(call.status.code, 2)  # ERROR
        self.assertIn("no-such-model", call.status.message)
        self.assertEqual(attributes(call.attributes)["encoder.status"],
                         "NOT_FOUND")

    def test_http_protobuf_export_and_parent_based_sampling(self):
        port = self.http_server.ports["http_port"]
        unsampled_trace = uuid.uuid4().hex
        embed(port)  # no parent: ratio 0, not traced
        embed(port, {"traceparent":
                     f"00-{unsampled_trace}-{uuid.uuid4().hex[:16]}-00"})
        sampled_trace = uuid.uuid4().hex
        embed(port, {"traceparent":
                     f"00-{sampled_trace}-{uuid.uuid4().hex[:16]}-01"})
        want = bytes.fromhex(sampled_trace)
        spans = self.http_spans.wait(
            lambda all: len([s for s in all if s.trace_id == want]) >= 5
            and [s for s in all if s.trace_id == want])
        call = [s for s in spans if s.kind == SERVER_SPAN][0]
        self.check_call_tree(spans, call)
        # Exports leave in order: the earlier calls' spans would be here.
        with self.http_spans.lock:
            servers = [s for _, s in self.http_spans.spans
                       if s.kind == SERVER_SPAN]
            resource = self.http_spans.spans[0][0]
        self.assertEqual([s.trace_id for s in servers], [want])
        self.assertEqual(resource["service.name"], "tracing-http")
        self.assertIn(("/v1/traces", "application/x-protobuf"),
                      self.http_collector.paths)

    def test_a_dead_collector_costs_the_calls_nothing(self):
        # Accepts connections and never answers: every export waits out
        # its timeout.
        hole = socket.socket()
        hole.bind(("127.0.0.1", 0))
        hole.listen(64)
        self.addCleanup(hole.close)
        server = start_server(
            os.path.join(self.dir, "dead"),
            [f"--otlp-endpoint=http://127.0.0.1:{hole.getsockname()[1]}",
             "--otlp-export-timeout=300ms", "--otlp-max-queue-spans=16",
             "--otlp-max-export-batch-spans=4"])
        self.addCleanup(server.stop)
        port = server.ports["http_port"]
        errors = []

        def caller():
            try:
                for _ in range(15):
                    embed(port)
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(repr(e))
        threads = [threading.Thread(target=caller) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(errors, [])
        status, body = http_call(port, "/metrics", None, method="GET")
        self.assertEqual(status, 200)
        counts = {m.group(1): float(m.group(2)) for m in re.finditer(
            r'encoder_trace_spans_total\{outcome="(\w+)"\} (\S+)',
            body.decode())}
        self.assertEqual(counts["exported"], 0)
        self.assertGreater(counts["queue_full"], 0)
        # 60 calls of 5 spans and their batches' spans, all accounted for
        # once the exports in flight end.
        self.assertGreaterEqual(counts["queue_full"] + counts["export_failed"],
                                60 * 5 - 16 - 4)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--server", required=True)
    parser.add_argument("--source-dir", required=True)
    ARGS, rest = parser.parse_known_args()
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)
