#!/usr/bin/python3
"""The server keeps accepting after it runs out of file descriptors.

The server runs with an open-file limit of 160 (soft = hard, so raising the
soft limit does not help). The test opens idle TCP connections to the gRPC
port until the server cannot accept more, checks that it does not spin
while exhausted, closes them, and then a gRPC call on a new connection must
succeed within a few seconds, with the shed connections counted on
/metrics. gRPC 1.51 alone stops accepting on the first EMFILE, after which
no call would ever succeed again: with the server's reserve turned off
(ENCODER_ACCEPT_RESERVE=off), the listener watch must notice and turn
health NOT_SERVING.

Usage: descriptor_exhaustion_test.py --server BIN --python-client CLIENT.py
"""
import argparse
import importlib.util
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.error
import urllib.request

import grpc

ARGS = None
LIMIT = 160


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def open_fds(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


HEALTH_CHECK = "/grpc.health.v1.Health/Check"
SERVING, NOT_SERVING = b"\x08\x01", b"\x08\x02"


def metrics(http_port):
    """The server's /metrics as {name{labels}: value}."""
    with urllib.request.urlopen(f"http://127.0.0.1:{http_port}/metrics",
                                timeout=10) as r:
        out = {}
        for line in r.read().decode().splitlines():
            if line and not line.startswith("#"):
                key, value = line.rsplit(" ", 1)
                out[key] = float(value)
        return out


class DescriptorExhaustionTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        spec = importlib.util.spec_from_file_location("client",
                                                      ARGS.python_client)
        client = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(client)
        cls.tmp = tempfile.TemporaryDirectory()
        cls.pb2, cls.pb2_grpc = client.load_stubs(cls.tmp.name)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def start(self, tmp, env=None):
        """The server under a descriptor limit of LIMIT; its ports."""
        ready = os.path.join(tmp, "ready.json")
        self.log_path = os.path.join(tmp, "server.log")
        log = open(self.log_path, "w")
        self.addCleanup(log.close)
        proc = subprocess.Popen(
            ["prlimit", f"--nofile={LIMIT}:{LIMIT}", ARGS.server,
             "--listen=127.0.0.1:0", "--http-listen=127.0.0.1:0",
             "--no-warm-up", f"--ready-file={ready}"],
            stdout=log, stderr=subprocess.STDOUT,
            env=dict(os.environ, **(env or {})))

        def stop():
            proc.terminate()
            proc.wait(timeout=60)
        self.addCleanup(stop)
        deadline = time.monotonic() + 120
        while not os.path.exists(ready):
            self.assertIsNone(proc.poll(), "server exited")
            self.assertLess(time.monotonic(), deadline)
            time.sleep(0.1)
        time.sleep(0.5)
        with open(ready) as f:
            ports = json.load(f)
        return proc, ports["grpc_port"], ports["http_port"]

    def call(self, port):
        request = self.pb2.EmbedRequest(model="rope")
        request.inputs.add().token_ids.ids.extend([5, 6, 7])
        with grpc.insecure_channel(f"127.0.0.1:{port}") as ch:
            stub = self.pb2_grpc.EncoderServiceStub(ch)
            return stub.Embed(request, timeout=5)

    def exhaust(self, proc, port):
        """Idle connections until the server's table is full (and some
        beyond, which it must shed); returns them."""
        sockets = []
        for _ in range(LIMIT + 40):
            sockets.append(socket.create_connection(("127.0.0.1", port),
                                                    timeout=5))
        time.sleep(1.0)
        self.assertGreaterEqual(open_fds(proc.pid), LIMIT - 2)
        with self.assertRaises(grpc.RpcError):
            self.call(port)
        return sockets

    def test_accepts_again_after_running_out_of_descriptors(self):
        with tempfile.TemporaryDirectory() as tmp:
            proc, port, http_port = self.start(tmp)
            self.call(port)
            sockets = self.exhaust(proc, port)
            try:
                # Exhausted, the server must not spin.
                before = cpu_seconds(proc.pid)
                time.sleep(2.0)
                spent = cpu_seconds(proc.pid) - before
                self.assertLess(spent, 0.5, f"{spent:.2f} s of CPU in 2 s")
            finally:
                for s in sockets:
                    s.close()
            # Descriptors free up as the server notices the closes.
            deadline = time.monotonic() + 10
            while True:
                try:
                    self.call(port)
                    break
                except grpc.RpcError as e:
                    self.assertLess(time.monotonic(), deadline,
                                    f"still failing: {e.code()}")
                    time.sleep(0.2)
            print(f"recovered; server CPU while exhausted {spent:.2f} s "
                  f"in 2 s")
            with open(self.log_path) as f:
                self.assertIn("out of file descriptors", f.read())
            m = metrics(http_port)
            self.assertGreater(m["encoder_connections_shed_total"], 0)
            self.assertGreater(m["encoder_accept_exhausted_total"], 0)
            self.assertEqual(m['encoder_listener_up{listener="grpc"}'], 1)

    def test_a_listener_that_stops_turns_health_not_serving(self):
        """Without the reserve (ENCODER_ACCEPT_RESERVE=off), gRPC 1.51 stops
        accepting for good after an accept fails with EMFILE: the listener
        watch notices, and health turns NOT_SERVING, on a connection opened
        before, so that an orchestrator restarts the server."""
        with tempfile.TemporaryDirectory() as tmp:
            proc, port, http_port = self.start(
                tmp, {"ENCODER_ACCEPT_RESERVE": "off"})
            # A connection of its own (not shared with the calls' channels).
            kept = grpc.insecure_channel(
                f"127.0.0.1:{port}",
                options=[("grpc.use_local_subchannel_pool", 1)])
            self.addCleanup(kept.close)
            check = kept.unary_unary(HEALTH_CHECK)
            self.assertEqual(check(b"", timeout=10), SERVING)
            sockets = self.exhaust(proc, port)
            for s in sockets:
                s.close()
            deadline = time.monotonic() + 30
            status = SERVING
            while status != NOT_SERVING and time.monotonic() < deadline:
                time.sleep(0.5)
                status = check(b"", timeout=10)
            self.assertEqual(status, NOT_SERVING)
            print(f"NOT_SERVING {30 - (deadline - time.monotonic()):.1f} s "
                  f"after the descriptors were freed")
            with open(self.log_path) as f:
                self.assertIn("stopped accepting connections", f.read())
            m = metrics(http_port)
            self.assertEqual(m['encoder_listener_up{listener="grpc"}'], 0)
            self.assertEqual(m['encoder_listener_up{listener="http"}'], 1)
            with self.assertRaises(urllib.error.HTTPError) as caught:
                urllib.request.urlopen(f"http://127.0.0.1:{http_port}/health",
                                       timeout=10)
            self.assertEqual(caught.exception.code, 503)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--server", required=True)
    parser.add_argument("--python-client", required=True)
    ARGS, rest = parser.parse_known_args()
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)
