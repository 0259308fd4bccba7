#!/usr/bin/python3
"""Clients that never read their responses cannot make the server hold
unbounded memory. A raw HTTP/2 connection (python3-h2) announces a stream
window of 0 bytes, so the server can send headers (which flow control does
not cover) but no response data: every response it produces stays in the
server. The test checks that
- the server counts those bytes per connection and refuses a call on that
  connection whose response would go over the per-connection limit, with
  RESOURCE_EXHAUSTED naming the limit's flag;
- a second such connection runs into the server-wide limit, which then
  refuses a well-behaved caller's large call too (small calls still fit),
  until a stuck connection closes;
- the encoder_unread_response_bytes gauge shows the held bytes and returns
  to 0;
- once the client opens its window, every admitted response arrives whole
  with status OK: nothing is dropped.

Usage: unread_responses_test.py --server BIN --python-client CLIENT.py
"""
import argparse
import importlib.util
import json
import os
import socket
import struct
import sys
import tempfile
import time
import unittest
import urllib.request

import grpc
import h2.config
import h2.connection
import h2.events
import h2.settings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from server_process import ServerProcess  # noqa: E402

ARGS = None
MIB = 1 << 20
PER_CONNECTION = 20 * MIB  # two ~8 MiB responses fit, a third does not
TOTAL = 30 * MIB  # three fit, a fourth does not
TOKENS = 256
EMBED = "/encoder.v1.EncoderService/Embed"


class StuckClient:
    """One HTTP/2 connection whose stream windows start at 0 bytes."""

    def __init__(self, port):
        self.port = port
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.settimeout(0.2)
        config = h2.config.H2Configuration(client_side=True,
                                           header_encoding="utf-8")
        self.conn = h2.connection.H2Connection(config=config)
        self.conn.local_settings = h2.settings.Settings(
            client=True,
            initial_values={h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 0})
        self.conn.initiate_connection()
        self.sock.sendall(self.conn.data_to_send())
        self.headers = {}   # stream -> response headers
        self.status = {}    # stream -> (grpc-status, grpc-message)
        self.data = {}      # stream -> bytes received

    def call(self, body):
        stream = self.conn.get_next_available_stream_id()
        self.conn.send_headers(stream, [
            (":method", "POST"), (":scheme", "http"), (":path", EMBED),
            (":authority", f"127.0.0.1:{self.port}"),
            ("content-type", "application/grpc"), ("te", "trailers")])
        self.conn.send_data(stream, b"\x00" + struct.pack(">I", len(body)) +
                            body, end_stream=True)
        self.sock.sendall(self.conn.data_to_send())
        return stream

    def pump(self, seconds, until):
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and not until():
            try:
                chunk = self.sock.recv(1 << 20)
            except socket.timeout:
                continue
            if not chunk:
                break
            for event in self.conn.receive_data(chunk):
                self._on(event)
            self.sock.sendall(self.conn.data_to_send())
        return until()

    def _on(self, event):
        if isinstance(event, (h2.events.ResponseReceived,
                              h2.events.TrailersReceived)):
            fields = dict(event.headers)
            self.headers.setdefault(event.stream_id, fields)
            if "grpc-status" in fields:
                self.status[event.stream_id] = (
                    int(fields["grpc-status"]),
                    urllib.request.unquote(fields.get("grpc-message", "")))
        elif isinstance(event, h2.events.DataReceived):
            self.data[event.stream_id] = (self.data.get(event.stream_id, b"")
                                          + event.data)
            self.conn.acknowledge_received_data(
                event.flow_controlled_length, event.stream_id)

    def open_windows(self, streams):
        self.conn.increment_flow_control_window(1 << 30)
        for stream in streams:
            self.conn.increment_flow_control_window(1 << 30, stream)
        self.sock.sendall(self.conn.data_to_send())

    def close(self):
        self.sock.close()


def gauge(metrics_port):
    with urllib.request.urlopen(
            f"http://127.0.0.1:{metrics_port}/metrics", timeout=10) as r:
        for line in r.read().decode().splitlines():
            if line.startswith("encoder_unread_response_bytes"):
                return float(line.split()[-1])
    raise AssertionError("no encoder_unread_response_bytes gauge")


class UnreadResponsesTest(unittest.TestCase):
    def test_stuck_readers_are_bounded_and_lose_nothing(self):
        spec = importlib.util.spec_from_file_location("client",
                                                      ARGS.python_client)
        client = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(client)
        with tempfile.TemporaryDirectory() as tmp:
            pb2, pb2_grpc = client.load_stubs(tmp)
            server = ServerProcess(
                ARGS.server, directory=tmp,
                extra_args=[
                    "--metrics-listen=127.0.0.1:0",
                    f"--max-unread-response-bytes={TOTAL}",
                    "--max-unread-response-bytes-per-connection="
                    f"{PER_CONNECTION}"])
            try:
                server.wait_ready(300)
                self._run(server, pb2, pb2_grpc)
            finally:
                server.stop()

    def _run(self, server, pb2, pb2_grpc):
        with open(server.ready_file) as f:
            metrics_port = json.load(f)["metrics_port"]
        stub = pb2_grpc.EncoderServiceStub(
            grpc.insecure_channel(
                f"127.0.0.1:{server.port}",
                options=[("grpc.max_receive_message_length", 64 * MIB)]))
        info = {m.name: m for m in stub.ListModels(
            pb2.ListModelsRequest(), timeout=30).models}["alibi"]
        layers = list(range(info.num_layers))
        response_bytes = 4 * len(layers) * info.num_heads * TOKENS * TOKENS
        # The limits above assume responses of 7-10 MiB.
        self.assertTrue(7 * MIB <= response_bytes < 10 * MIB, response_bytes)
        request = pb2.EmbedRequest(model="alibi")
        request.inputs.add().token_ids.ids.extend(
            5 + j % 900 for j in range(TOKENS))
        request.attention.layers.extend(layers)
        body = request.SerializeToString()
        small = pb2.EmbedRequest(model="alibi")
        small.inputs.add().token_ids.ids.extend([5, 6, 7])

        a = StuckClient(server.port)
        held_a = []
        for _ in range(2):
            stream = a.call(body)
            # Headers arrive (not flow controlled): the response exists.
            self.assertTrue(a.pump(120, lambda: stream in a.headers))
            self.assertNotIn(stream, a.status)
            held_a.append(stream)
        self.assertGreaterEqual(gauge(metrics_port), 2 * response_bytes)
        # Two responses (~16 MiB) held: a third would pass 20 MiB.
        refused = a.call(body)
        self.assertTrue(a.pump(30, lambda: refused in a.status))
        code, message = a.status[refused]
        self.assertEqual(code, grpc.StatusCode.RESOURCE_EXHAUSTED.value[0])
        self.assertIn("(--max-unread-response-bytes-per-connection)", message)
        # Another caller is unaffected.
        stub.Embed(request, timeout=60)

        # A second stuck connection fills the server-wide limit.
        b = StuckClient(server.port)
        first_b = b.call(body)
        self.assertTrue(b.pump(120, lambda: first_b in b.headers))
        self.assertNotIn(first_b, b.status)
        over = b.call(body)
        self.assertTrue(b.pump(30, lambda: over in b.status))
        code, message = b.status[over]
        self.assertEqual(code, grpc.StatusCode.RESOURCE_EXHAUSTED.value[0])
        self.assertIn("(--max-unread-response-bytes)", message)
        # Now a well-behaved caller's large call is refused too; a small
        # one still fits.
        with self.assertRaises(grpc.RpcError) as blocked:
            stub.Embed(request, timeout=60)
        self.assertEqual(blocked.exception.code(),
                         grpc.StatusCode.RESOURCE_EXHAUSTED)
        stub.Embed(small, timeout=30)
        held = gauge(metrics_port)
        self.assertGreaterEqual(held, 3 * response_bytes)
        self.assertLessEqual(held, TOTAL)
        print(f"held {held / MIB:.1f} MiB unread for limits of "
              f"{TOTAL / MIB:.0f} MiB in total and "
              f"{PER_CONNECTION / MIB:.0f} MiB per connection")

        # Closing B frees its responses: callers are served again.
        b.close()
        deadline = time.monotonic() + 30
        while gauge(metrics_port) > 2 * response_bytes + MIB:
            self.assertLess(time.monotonic(), deadline)
            time.sleep(0.1)
        stub.Embed(request, timeout=60)

        # A reads at last: both of its admitted responses arrive whole.
        a.open_windows(held_a)
        self.assertTrue(a.pump(120, lambda: all(s in a.status
                                                for s in held_a)))
        for stream in held_a:
            self.assertEqual(a.status[stream][0], 0, a.status[stream])
            frame = a.data[stream]
            (length,) = struct.unpack(">I", frame[1:5])
            self.assertEqual(len(frame), 5 + length)
            response = pb2.EmbedResponse.FromString(frame[5:])
            self.assertEqual(len(response.results[0].attention.data),
                             response_bytes)
        a.close()
        deadline = time.monotonic() + 30
        while gauge(metrics_port) != 0:
            self.assertLess(time.monotonic(), deadline)
            time.sleep(0.1)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--server", required=True)
    parser.add_argument("--python-client", required=True)
    ARGS, rest = parser.parse_known_args()
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)
