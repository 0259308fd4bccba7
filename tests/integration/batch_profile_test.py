#!/usr/bin/python3
"""--batch-profile-time end to end: a server with the profile on reports, in
ListModels, the points it measured and caps that follow from them by the
documented rule (recomputed here from the reported points), logs them, and
serves; with the profile off (the default) both lists are empty.

Usage: batch_profile_test.py --server BIN --python-client minimal_client.py
"""
import argparse
import importlib.util
import json
import os
import sys
import tempfile
import unittest

import grpc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from server_process import ServerProcess  # noqa: E402

ARGS = None
MAX_BATCH = 8


def load_client():
    spec = importlib.util.spec_from_file_location("client",
                                                  ARGS.python_client)
    client = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(client)
    return client


def write_repository(directory):
    # Two small models of one shape (they share a profile) and a narrower
    # one (its own), all accepting 512 tokens.
    config = {"d_model": 64, "num_heads": 2, "d_ff": 128, "num_layers": 1,
              "vocab_size": 300, "max_input_tokens": 512}
    narrow = dict(config, d_model=32)
    path = os.path.join(directory, "repository.json")
    with open(path, "w") as f:
        json.dump({"models": [
            {"name": "a", "seed": 1, "config": config},
            {"name": "b", "seed": 2, "config": config},
            {"name": "c", "seed": 3, "config": narrow}]}, f)
    return path


class BatchProfileTest(unittest.TestCase):
    def listing(self, extra):
        client = load_client()
        with tempfile.TemporaryDirectory() as tmp:
            pb2, pb2_grpc = client.load_stubs(tmp)
            server = ServerProcess(
                ARGS.server, directory=tmp,
                extra_args=["--models=" + write_repository(tmp),
                            "--max-batch-sequences=%d" % MAX_BATCH,
                            "--log-level=info", *extra])
            try:
                server.wait_ready(300)
                with grpc.insecure_channel(
                        "127.0.0.1:%d" % server.port) as channel:
                    stub = pb2_grpc.EncoderServiceStub(channel)
                    models = stub.ListModels(pb2.ListModelsRequest(),
                                             timeout=60).models
                    request = pb2.EmbedRequest(model="a")
                    for n in (5, 100, 512):
                        request.inputs.add().token_ids.ids.extend(
                            [(7 * i) % 299 + 1 for i in range(n)])
                    response = stub.Embed(request, timeout=60)
                    self.assertEqual(len(response.results), 3)
                log = server.log_tail(200)
            finally:
                self.assertEqual(server.stop(), 0)
        return {m.name: m.batching for m in models}, log

    def test_profile_points_and_caps(self):
        batching, log = self.listing(["--batch-profile-time=60s"])
        for name in ("a", "b", "c"):
            b = batching[name]
            points = [(p.length, p.batch_size, p.sequences_per_s)
                      for p in b.profile]
            self.assertEqual(sorted({p[0] for p in points}), [32, 128, 512],
                             name)
            for length in (32, 128, 512):
                sizes = [p[1] for p in points if p[0] == length]
                # Doubling from 1, within the sequence limit, stopped early
                # only after a decline.
                self.assertEqual(sizes, [2 ** i for i in range(len(sizes))])
                self.assertLessEqual(max(sizes), MAX_BATCH)
                rates = [p[2] for p in points if p[0] == length]
                self.assertTrue(all(r > 0 for r in rates), rates)
                if max(sizes) < MAX_BATCH:
                    self.assertLess(rates[-1], 0.8 * max(rates), points)
            # The budget was ample: every length was measured to the end and
            # has the cap the rule gives.
            caps = {c.length: c.max_sequences for c in b.length_caps}
            self.assertEqual(sorted(caps), [32, 128, 512], name)
            for length, cap in caps.items():
                best = max(p[2] for p in points if p[0] == length)
                expected = max(p[1] for p in points
                               if p[0] == length and p[2] >= 0.9 * best)
                self.assertEqual(cap, expected, (name, length, points))
        # Models of one shape share one profile; another shape has its own.
        self.assertEqual(list(batching["a"].profile),
                         list(batching["b"].profile))
        self.assertNotEqual(list(batching["a"].profile),
                            list(batching["c"].profile))
        self.assertIn("model a: batch profile: 32 tokens: 1:", log)
        self.assertIn("-> cap", log)

    def test_profile_is_off_by_default(self):
        batching, log = self.listing([])
        for b in batching.values():
            self.assertEqual(len(b.profile), 0)
            self.assertEqual(len(b.length_caps), 0)
        self.assertNotIn("batch profile", log)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--server", required=True)
    parser.add_argument("--python-client", required=True)
    ARGS, rest = parser.parse_known_args()
    unittest.main(argv=[sys.argv[0]] + rest)
