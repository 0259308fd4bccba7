#!/usr/bin/python3
"""Many grpc.health.v1 Watch streams on one connection, against the real
encoder-server binary.

A load balancer or mesh sidecar may watch health over one connection per
backend with many streams. 300 Watch streams on one channel (one HTTP/2
connection) must each get their first status within 30 s with the default
flags; with --max-health-watchers=40, the 41st and later are refused at once
with RESOURCE_EXHAUSTED, and a slot freed by a cancelled stream serves a
new one.

Usage: health_watch_test.py --server BIN
"""
import argparse
import sys
import tempfile
import time
import unittest

import grpc

from server_process import ServerProcess

ARGS = None
WATCH = "/grpc.health.v1.Health/Watch"
SERVING = b"\x08\x01"
REPOSITORY = ('{"models": [{"name": "tiny", "seed": 3, "config": '
              '{"vocab_size": 300, "d_model": 32, "num_heads": 4, '
              '"num_layers": 1, "d_ff": 64}}]}')


def start(directory, extra=()):
    repo = f"{directory}/repo.json"
    with open(repo, "w") as f:
        f.write(REPOSITORY)
    server = ServerProcess(ARGS.server, directory=directory,
                           extra_args=[f"--models={repo}", "--no-warm-up",
                                       *extra])
    server.wait_ready(120)
    return server


def first_statuses(calls, timeout_s):
    """The first message (or the error code) of each call, in order, and
    the seconds it took to have them all."""
    start = time.monotonic()
    out = []
    for call in calls:
        try:
            out.append(next(call))
        except grpc.RpcError as e:
            out.append(e.code())
        except StopIteration:
            out.append(None)
        if time.monotonic() - start > timeout_s:
            break
    return out, time.monotonic() - start


class HealthWatchTest(unittest.TestCase):
    def test_300_watch_streams_on_one_connection(self):
        with tempfile.TemporaryDirectory() as d:
            server = start(d)
            try:
                with grpc.insecure_channel(
                        f"127.0.0.1:{server.port}") as channel:
                    watch = channel.unary_stream(WATCH)
                    calls = [watch(b"", timeout=60) for _ in range(300)]
                    got, seconds = first_statuses(calls, 30)
                    answered = sum(1 for g in got if g == SERVING)
                    print(f"300 Watch streams: {answered} answered SERVING "
                          f"in {seconds:.2f} s", file=sys.stderr)
                    self.assertEqual(answered, 300, got[-5:])
                    self.assertLess(seconds, 30)
                    for call in calls:
                        call.cancel()
            finally:
                server.stop()

    def test_watchers_over_the_limit_are_refused_at_once(self):
        with tempfile.TemporaryDirectory() as d:
            server = start(d, ["--max-health-watchers=40"])
            try:
                with grpc.insecure_channel(
                        f"127.0.0.1:{server.port}") as channel:
                    watch = channel.unary_stream(WATCH)
                    calls = [watch(b"", timeout=60) for _ in range(40)]
                    got, _ = first_statuses(calls, 30)
                    self.assertEqual(got, [SERVING] * 40)
                    extra = [watch(b"", timeout=60) for _ in range(5)]
                    got, seconds = first_statuses(extra, 30)
                    self.assertEqual(
                        got, [grpc.StatusCode.RESOURCE_EXHAUSTED] * 5)
                    self.assertLess(seconds, 5)
                    self.assertIn("--max-health-watchers",
                                  extra[0].details())
                    calls[0].cancel()
                    deadline = time.monotonic() + 10
                    while True:  # the slot frees once the server sees it
                        again, _ = first_statuses([watch(b"", timeout=60)],
                                                  10)
                        if again == [SERVING] or time.monotonic() > deadline:
                            break
                        time.sleep(0.1)
                    self.assertEqual(again, [SERVING])
                    for call in calls:
                        call.cancel()
            finally:
                server.stop()


def main():
    global ARGS
    parser = argparse.ArgumentParser()
    parser.add_argument("--server", required=True)
    ARGS, rest = parser.parse_known_args()
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)


if __name__ == "__main__":
    main()
