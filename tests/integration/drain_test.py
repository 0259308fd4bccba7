#!/usr/bin/python3
"""SIGTERM during traffic: the real encoder-server binary under 16 callers.

Every call that reached the server before the signal completes OK, later
calls fail cleanly (UNAVAILABLE, or CANCELLED for calls caught by the
transport shutdown), and the server exits 0 within its grace period.

Usage: drain_test.py --server BIN --python-client PATH
"""
import argparse
import importlib.util
import json
import signal
import sys
import tempfile
import threading
import time
import unittest

import grpc

from server_process import ServerProcess

ARGS = None
CALLERS = 16
TOKENS = 128
MIN_CALL_S = 0.1
MAX_INPUTS = 64


def load_example_client():
    spec = importlib.util.spec_from_file_location("encoder_client",
                                                  ARGS.python_client)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class DrainTest(unittest.TestCase):
    def test_sigterm_during_traffic(self):
        client = load_example_client()
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        pb2, pb2_grpc = client.load_stubs(tmp.name)
        server = ServerProcess(ARGS.server, tmp.name,
                               ["--drain-grace=30s"])
        self.addCleanup(server.stop)
        server.wait_ready(120)
        port = server.port

        channel = grpc.insecure_channel("127.0.0.1:%d" % port)
        self.addCleanup(channel.close)
        stub = pb2_grpc.EncoderServiceStub(channel)

        def request_of(n):
            return pb2.EmbedRequest(
                model="sinusoidal",
                inputs=[pb2.Input(token_ids=pb2.TokenIds(ids=[7] * TOKENS))
                        for _ in range(n)])

        # A call must outlast the 50 ms margin below on any CPU: the inputs
        # per call double until one call alone takes MIN_CALL_S (a fast CPU
        # ran a 1-input call in a few ms, so calls sent 50 ms before the
        # signal had already returned).
        inputs = 1
        while True:
            stub.Embed(request_of(inputs), timeout=60)  # warm this size
            start = time.monotonic()
            stub.Embed(request_of(inputs), timeout=60)
            alone_s = time.monotonic() - start
            if alone_s >= MIN_CALL_S or inputs >= MAX_INPUTS:
                break
            inputs *= 2
        print("%d inputs of %d tokens a call: %.0f ms alone" %
              (inputs, TOKENS, alone_s * 1000))
        request = request_of(inputs)
        calls = []  # (start, end, code name)
        lock = threading.Lock()
        stop = threading.Event()
        completed = threading.Event()  # set whenever a call returns

        def caller():
            while not stop.is_set():
                start = time.monotonic()
                try:
                    stub.Embed(request, timeout=60)
                    code = "OK"
                except grpc.RpcError as e:
                    code = e.code().name
                with lock:
                    calls.append((start, time.monotonic(), code))
                completed.set()
                if code != "OK":
                    return

        threads = [threading.Thread(target=caller) for _ in range(CALLERS)]
        for t in threads:
            t.start()
        time.sleep(3)
        # Signal 100 ms after a batch returned: its callers have sent their
        # next calls and those are in the server, whatever the batch time.
        completed.clear()
        self.assertTrue(completed.wait(timeout=60), "no call completed")
        time.sleep(0.1)
        signalled = time.monotonic()
        try:
            exit_code = server.stop(timeout_s=60)
        finally:
            stop.set()
            for t in threads:
                t.join(timeout=90)
        with open(server.log_path) as f:
            server_log = f.read()
        self.assertEqual(exit_code, 0, server_log)
        self.assertIn("drained; exiting", server_log)

        # Calls sent 50 ms or more before the signal were in the server.
        before = [c for c in calls if c[0] < signalled - 0.05]
        in_flight = [c for c in before if c[1] > signalled]
        self.assertGreater(len(before), CALLERS)
        self.assertGreaterEqual(len(in_flight), CALLERS // 2,
                                "too few calls were in flight at SIGTERM")
        failed = [c for c in before if c[2] != "OK"]
        self.assertEqual(failed, [], "accepted calls failed during drain")
        for c in calls:
            self.assertIn(c[2], ("OK", "UNAVAILABLE", "CANCELLED"))
        print("calls: %d before SIGTERM (%d in flight, all OK), %d after" %
              (len(before), len(in_flight), len(calls) - len(before)))


    def test_refusals_while_draining_are_retried_by_grpc(self):
        # Two replicas behind one channel (round robin) whose service
        # config retries UNAVAILABLE. While one drains (--drain-unready:
        # new calls refused with UNAVAILABLE before the port closes), its
        # refusals are trailers-only answers, not committed, so gRPC
        # retries them on the other replica: no call fails.
        client = load_example_client()
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        pb2, pb2_grpc = client.load_stubs(tmp.name)
        servers = []
        for i in range(2):
            directory = tempfile.mkdtemp(dir=tmp.name)
            server = ServerProcess(ARGS.server, directory,
                                   ["--drain-grace=20s", "--drain-unready=8s",
                                    "--http-listen=off"])
            self.addCleanup(server.stop)
            servers.append(server)
        for server in servers:
            server.wait_ready(120)
        config = json.dumps({
            "loadBalancingConfig": [{"round_robin": {}}],
            "methodConfig": [{
                "name": [{"service": "encoder.v1.EncoderService"}],
                "retryPolicy": {"maxAttempts": 5, "initialBackoff": "0.01s",
                                "maxBackoff": "0.1s", "backoffMultiplier": 2,
                                "retryableStatusCodes": ["UNAVAILABLE"]}}]})
        target = "ipv4:" + ",".join(f"127.0.0.1:{s.port}" for s in servers)
        channel = grpc.insecure_channel(target, options=[
            ("grpc.service_config", config), ("grpc.enable_retries", 1)])
        self.addCleanup(channel.close)
        stub = pb2_grpc.EncoderServiceStub(channel)
        request = pb2.EmbedRequest(
            model="sinusoidal",
            inputs=[pb2.Input(token_ids=pb2.TokenIds(ids=[7] * 16))])
        for _ in range(4):  # both replicas reached
            stub.Embed(request, timeout=60)
        drained = servers[0]
        drained.process.send_signal(signal.SIGTERM)
        # Calls while the first replica refuses (its unready window, 8 s;
        # the loop stops 2 s short of it). Round robin sends every other
        # call to the draining replica, so ten calls reach it about five
        # times; a sanitizer build makes about 7 calls a second.
        failures, calls = [], 0
        deadline = time.monotonic() + 6
        while time.monotonic() < deadline and calls < 200:
            try:
                stub.Embed(request, timeout=60)
            except grpc.RpcError as e:
                failures.append(e.code().name)
            calls += 1
        with open(drained.log_path) as f:
            log = f.read()
        self.assertIn("draining", log)
        self.assertGreaterEqual(calls, 10)
        self.assertEqual(failures, [], f"of {calls} calls")
        print("%d calls while a replica drained: all OK" % calls)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--server", required=True)
    parser.add_argument("--python-client", required=True)
    ARGS, rest = parser.parse_known_args()
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)
