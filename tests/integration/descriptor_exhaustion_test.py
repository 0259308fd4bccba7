#!/usr/bin/python3
"""The server keeps accepting after it runs out of file descriptors.

The server runs with an open-file limit of 160 (soft = hard, so raising the
soft limit does not help). The test opens idle TCP connections to the gRPC
port until the server cannot accept more, checks that it does not spin
while exhausted, closes them, and then a gRPC call on a new connection must
succeed within a few seconds. gRPC 1.51 alone closes its listener on the
first EMFILE, after which no call would ever succeed again.

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

import grpc

ARGS = None
LIMIT = 160


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def open_fds(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


class DescriptorExhaustionTest(unittest.TestCase):
    def test_accepts_again_after_running_out_of_descriptors(self):
        spec = importlib.util.spec_from_file_location("client",
                                                      ARGS.python_client)
        client = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(client)
        with tempfile.TemporaryDirectory() as tmp:
            pb2, pb2_grpc = client.load_stubs(tmp)
            ready = os.path.join(tmp, "ready.json")
            log = open(os.path.join(tmp, "server.log"), "w")
            proc = subprocess.Popen(
                ["prlimit", f"--nofile={LIMIT}:{LIMIT}", ARGS.server,
                 "--listen=127.0.0.1:0", "--no-warm-up",
                 f"--ready-file={ready}"],
                stdout=log, stderr=subprocess.STDOUT)
            sockets = []
            try:
                deadline = time.monotonic() + 120
                while not os.path.exists(ready):
                    self.assertIsNone(proc.poll(), "server exited")
                    self.assertLess(time.monotonic(), deadline)
                    time.sleep(0.1)
                time.sleep(0.5)
                with open(ready) as f:
                    port = json.load(f)["grpc_port"]
                request = pb2.EmbedRequest(model="rope")
                request.inputs.add().token_ids.ids.extend([5, 6, 7])

                def call():
                    with grpc.insecure_channel(f"127.0.0.1:{port}") as ch:
                        stub = pb2_grpc.EncoderServiceStub(ch)
                        return stub.Embed(request, timeout=5)

                call()
                # Idle connections until the server's table is full (and
                # some beyond, which it must shed).
                for _ in range(LIMIT + 40):
                    sockets.append(socket.create_connection(
                        ("127.0.0.1", port), timeout=5))
                time.sleep(1.0)
                self.assertGreaterEqual(open_fds(proc.pid), LIMIT - 2)
                with self.assertRaises(grpc.RpcError):
                    call()
                # Exhausted, the server must not spin.
                before = cpu_seconds(proc.pid)
                time.sleep(2.0)
                spent = cpu_seconds(proc.pid) - before
                self.assertLess(spent, 0.5, f"{spent:.2f} s of CPU in 2 s")
                for s in sockets:
                    s.close()
                sockets.clear()
                # Descriptors free up as the server notices the closes.
                deadline = time.monotonic() + 10
                while True:
                    try:
                        call()
                        break
                    except grpc.RpcError as e:
                        self.assertLess(time.monotonic(), deadline,
                                        f"still failing: {e.code()}")
                        time.sleep(0.2)
                print(f"recovered; server CPU while exhausted {spent:.2f} s "
                      f"in 2 s")
                with open(log.name) as f:
                    self.assertIn("out of file descriptors", f.read())
            finally:
                for s in sockets:
                    s.close()
                proc.terminate()
                proc.wait(timeout=60)
                log.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--server", required=True)
    parser.add_argument("--python-client", required=True)
    ARGS, rest = parser.parse_known_args()
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)
