#!/usr/bin/python3
"""The HTTP front alone: encoder-server with --listen=off.

The process serves embeddings, probes and metrics on its HTTP port with no
gRPC port (the ready file says grpc_port 0), drains on SIGTERM with every
accepted HTTP call answered, and refuses the combinations that leave
nothing to serve or a gRPC-only option without gRPC.

Usage: http_only_test.py --server BIN
"""
import argparse
import http.client
import json
import subprocess
import sys
import tempfile
import threading
import time
import unittest

from server_process import ServerProcess

ARGS = None
CALLERS = 8


def request(port, method, path, body=None, timeout=60):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        data = None if body is None else json.dumps(body)
        headers = {} if body is None else {"Content-Type": "application/json"}
        conn.request(method, path, body=data, headers=headers)
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def embed_body(tokens):
    return {"model": "sinusoidal", "input": [[7] * tokens]}


class HttpOnlyTest(unittest.TestCase):
    def start(self, extra=()):
        # A directory of the test's own: the log is read after the stop.
        tmp = tempfile.TemporaryDirectory(prefix="encoder-http-only-")
        self.addCleanup(tmp.cleanup)
        server = ServerProcess(ARGS.server, tmp.name, extra_args=[
            "--http-listen=127.0.0.1:0", "--drain-grace=30s", *extra],
                               listen="off")
        self.addCleanup(server.stop)
        server.wait_ready(120)
        return server

    def test_serves_and_drains_without_a_grpc_port(self):
        server = self.start()
        self.assertEqual(server.ports["grpc_port"], 0)
        self.assertEqual(server.ports["health_port"], 0)
        port = server.ports["http_port"]
        self.assertGreater(port, 0)
        for path in ("/health", "/ready"):
            status, body = request(port, "GET", path)
            self.assertEqual(status, 200, (path, body))
        status, body = request(port, "POST", "/v1/embeddings", embed_body(8))
        self.assertEqual(status, 200, body)
        vector = json.loads(body)["data"][0]["embedding"]
        status, body = request(port, "GET", "/info")
        self.assertEqual(status, 200)
        widths = {m["name"]: m["dimensions"]
                  for m in json.loads(body)["models"]}
        self.assertEqual(len(vector), widths["sinusoidal"])
        status, body = request(port, "GET", "/metrics")
        self.assertEqual(status, 200)
        self.assertIn(b'encoder_requests_total{', body)

        # SIGTERM under HTTP traffic: every call sent well before the
        # signal is answered 200; later ones 503 or refused connections.
        calls = []  # (start, end, outcome)
        lock = threading.Lock()
        stop = threading.Event()

        def caller():
            while not stop.is_set():
                start = time.monotonic()
                try:
                    status, _ = request(port, "POST", "/v1/embeddings",
                                        embed_body(128))
                    outcome = status
                except OSError as e:
                    outcome = type(e).__name__
                with lock:
                    calls.append((start, time.monotonic(), outcome))
                if outcome != 200:
                    return

        threads = [threading.Thread(target=caller) for _ in range(CALLERS)]
        for t in threads:
            t.start()
        time.sleep(2)
        signalled = time.monotonic()
        try:
            exit_code = server.stop(timeout_s=60)
        finally:
            stop.set()
            for t in threads:
                t.join(timeout=90)
        with open(server.log_path) as f:
            log = f.read()
        self.assertEqual(exit_code, 0, log)
        self.assertIn("no gRPC port (--listen=off)", log)
        self.assertIn("drained; exiting", log)
        before = [c for c in calls if c[0] < signalled - 0.05]
        self.assertGreater(len(before), CALLERS)
        self.assertEqual([c for c in before if c[2] != 200], [],
                         "calls accepted before SIGTERM failed")
        for c in calls:
            self.assertIn(c[2], (200, 503, "ConnectionRefusedError",
                                 "ConnectionResetError",
                                 "RemoteDisconnected"), c)
        print("%d HTTP calls before SIGTERM (all 200), %d after" %
              (len(before), len(calls) - len(before)))

    def refused(self, args):
        result = subprocess.run([ARGS.server, *args], capture_output=True,
                                text=True, timeout=120)
        self.assertNotEqual(result.returncode, 0)
        return result.stdout + result.stderr

    def test_both_fronts_off_is_refused(self):
        out = self.refused(["--listen=off", "--http-listen=off"])
        self.assertIn("no port to serve on", out)

    def test_grpc_health_port_needs_the_grpc_front(self):
        out = self.refused(["--grpc-listen=off", "--http-listen=127.0.0.1:0",
                            "--health-listen=127.0.0.1:0"])
        self.assertIn("--health-listen", out)
        self.assertIn("--listen is off", out)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--server", required=True)
    ARGS, rest = parser.parse_known_args()
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)
