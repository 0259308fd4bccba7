#!/usr/bin/python3
"""`encoder-client embed --input` against a real encoder-server.

Checks that the jsonl, json and npy outputs hold the same vectors, in
input order, that numpy.load reads the .npy file, that the vectors equal
those of unary Embed calls made here with Python stubs compiled from the
.proto (decoded with struct, not by the client), that failing inputs are
named by line and make the run fail without dropping the others, and that
the default JSON output is compact.

Usage: client_embed_file_test.py --server PATH --client PATH
       --python-client PATH [unittest arguments]
"""

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import unittest

import numpy as np

import server_process
from server_process import ServerProcess

ARGS = None
VOCAB_SIZE = 10000
D_MODEL = 512
READY_TIMEOUT_S = 180
CALL_TIMEOUT_S = 300
# Vectors of one input batched with different neighbours may differ in the
# last float32 bits (padding changes the reduction order).
BATCHING_ATOL = 2e-5
# The float32 guarantee (docs/performance-tuning.md, "What is guaranteed"):
# two runs of the same request, and one input alone or batched, agree
# within this many ulps of the vector's largest |value| (MKL's products may
# change their order with the rows and the memory's alignment; oneDNN's do
# not, and there the floats are equal).
RUN_TO_RUN_ULPS = 256


def ulps_of_largest(a, b):
    """Max |a - b| per row, in ulps of the row's largest |value| (float32)."""
    a = np.asarray(a, dtype=np.float32)
    b = np.asarray(b, dtype=np.float32)
    top = np.maximum(np.abs(a).max(axis=1), np.abs(b).max(axis=1))
    ulp = np.spacing(top.astype(np.float32)).astype(np.float64)
    gap = np.abs(a.astype(np.float64) - b.astype(np.float64)).max(axis=1)
    return float((gap / ulp).max())


def run(command, timeout=CALL_TIMEOUT_S, stdin=None):
    if stdin is None:
        return server_process.run(command, timeout)
    return subprocess.run(command, input=stdin, capture_output=True,
                          text=True, timeout=timeout, check=False)


def load_python_client(path):
    spec = importlib.util.spec_from_file_location("encoder_client_example",
                                                  path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class EmbedFileTest(unittest.TestCase):
    server = None

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="embed-file-test-")
        cls.server = ServerProcess(ARGS.server)
        try:
            cls.server.wait_ready(READY_TIMEOUT_S)
        except BaseException:
            cls.server.stop()
            raise
        cls.target = f"127.0.0.1:{cls.server.port}"
        example = load_python_client(ARGS.python_client)
        stub_dir = os.path.join(cls.tmp.name, "stubs")
        os.mkdir(stub_dir)
        cls.pb2, pb2_grpc = example.load_stubs(stub_dir)
        cls.decode_tensor = staticmethod(example.decode_tensor)
        import grpc
        cls.channel = grpc.insecure_channel(cls.target)
        cls.stub = pb2_grpc.EncoderServiceStub(cls.channel)

    @classmethod
    def tearDownClass(cls):
        cls.channel.close()
        cls.server.stop()
        cls.tmp.cleanup()

    def path(self, name):
        return os.path.join(self.tmp.name, name)

    def write(self, name, text):
        with open(self.path(name), "w", encoding="utf-8") as f:
            f.write(text)
        return self.path(name)

    def client(self, *args, stdin=None):
        return run([ARGS.client, "embed", "--target", self.target,
                    "--deadline-ms", "60000", *args], stdin=stdin)

    def reference(self, inputs, model="rope"):
        """Pooled vectors of unary Embed calls, one input each."""
        vectors = []
        for item in inputs:
            if isinstance(item, str):
                message = self.pb2.Input(text=item)
            else:
                message = self.pb2.Input(
                    token_ids=self.pb2.TokenIds(ids=item))
            response = self.stub.Embed(
                self.pb2.EmbedRequest(model=model, inputs=[message]),
                timeout=60)
            [result] = response.results
            self.assertEqual(list(result.pooled.shape), [D_MODEL])
            vectors.append(self.decode_tensor(self.pb2, result.pooled))
        return np.array(vectors, dtype=np.float64)

    def test_jsonl_json_npy_agree_with_unary_embed(self):
        texts = ["héllo", "a", "Positions matter.", "", "x" * 40, "z"]
        lines = []
        inputs = []
        for i, text in enumerate(texts):
            if i == 3:
                lines.append("")  # blank: skipped
                continue
            lines.append(json.dumps({"id": f"doc-{i}", "text": text}))
            inputs.append(text)
        lines.append(json.dumps({"ids": [5, 6, 7, 8], "id": 99}))
        inputs.append([5, 6, 7, 8])
        source = self.write("inputs.jsonl", "\n".join(lines) + "\n")
        # One request in flight: each server batch is exactly one request's
        # inputs in every run, so the three runs send the same requests.
        common = ["--model", "rope", "--input", source, "--batch-size", "2",
                  "--max-in-flight", "1"]

        jsonl = self.client(*common, "--output-format", "jsonl")
        self.assertEqual(jsonl.returncode, 0, jsonl.stderr)
        records = [json.loads(line) for line in jsonl.stdout.splitlines()]
        self.assertEqual([r["index"] for r in records],
                         list(range(len(inputs))))
        self.assertEqual([r["line"] for r in records], [1, 2, 3, 5, 6, 7])
        self.assertEqual([r["id"] for r in records],
                         ["doc-0", "doc-1", "doc-2", "doc-4", "doc-5", 99])
        expected_tokens = [len(t.encode()) + 2 if isinstance(t, str)
                           else len(t) for t in inputs]
        self.assertEqual([r["num_tokens"] for r in records], expected_tokens)
        from_jsonl = np.array([r["embedding"] for r in records],
                              dtype=np.float32)

        document = self.client(*common, "--output-format", "json",
                               "--out", self.path("out.json"))
        self.assertEqual(document.returncode, 0, document.stderr)
        with open(self.path("out.json")) as f:
            text = f.read()
        self.assertEqual(text.count("\n"), 1)  # compact: one line
        parsed = json.loads(text)
        self.assertEqual(parsed["model"], "rope")
        self.assertEqual(parsed["dim"], D_MODEL)
        from_json = np.array([r["embedding"] for r in parsed["results"]],
                             dtype=np.float32)

        npy_path = self.path("out.npy")
        npy = self.client(*common, "--output-format", "npy", "--out",
                          npy_path)
        self.assertEqual(npy.returncode, 0, npy.stderr)
        from_npy = np.load(npy_path, allow_pickle=False)
        self.assertEqual(from_npy.dtype, np.dtype("<f4"))
        self.assertEqual(from_npy.shape, (len(inputs), D_MODEL))
        with open(npy_path, "rb") as f:
            self.assertEqual(f.read(8), b"\x93NUMPY\x01\x00")

        # The text forms read back as the float32 the server sent, so the
        # three runs agree as two runs of the same requests do.
        for name, got in (("jsonl", from_jsonl), ("json", from_json)):
            gap = ulps_of_largest(got, from_npy)
            print(f"{name} against npy: {gap:.0f} ulps of the largest value")
            self.assertLessEqual(gap, RUN_TO_RUN_ULPS, name)
        np.testing.assert_allclose(from_npy, self.reference(inputs),
                                   rtol=0, atol=BATCHING_ATOL)

    def test_text_from_stdin_keeps_order(self):
        texts = [f"line number {i}" for i in range(23)]
        result = self.client("--model", "rope", "--input", "-",
                             "--batch-size", "3", "--max-in-flight", "4",
                             "--progress",
                             stdin="\n".join(texts) + "\n")
        self.assertEqual(result.returncode, 0, result.stderr)
        records = [json.loads(line) for line in result.stdout.splitlines()]
        self.assertEqual([r["line"] for r in records], list(range(1, 24)))
        self.assertEqual([r["num_tokens"] for r in records],
                         [len(t) + 2 for t in texts])
        got = np.array([r["embedding"] for r in records], dtype=np.float32)
        np.testing.assert_allclose(got, self.reference(texts), rtol=0,
                                   atol=BATCHING_ATOL)
        # --progress: inputs done / total on stderr, ending at 23/23.
        self.assertIn("23/23 inputs", result.stderr)

    def test_failing_input_is_reported_by_line_and_fails_the_run(self):
        source = self.write("bad.jsonl", "\n".join([
            json.dumps({"text": "good one"}),
            json.dumps({"ids": [1, 2]}),
            json.dumps({"ids": [1, VOCAB_SIZE]}),  # beyond the vocabulary
            json.dumps({"text": "good two"}),
        ]) + "\n")
        result = self.client("--model", "rope", "--input", source,
                             "--batch-size", "4")
        self.assertEqual(result.returncode, 1, result.stderr)
        self.assertIn("line 3: INVALID_ARGUMENT: ", result.stderr)
        self.assertIn("1 of 4 inputs failed", result.stderr)
        records = [json.loads(line) for line in result.stdout.splitlines()]
        self.assertEqual(len(records), 4)  # nothing dropped
        self.assertEqual(records[2]["error"]["code"], "INVALID_ARGUMENT")
        self.assertEqual(records[2]["line"], 3)
        for i in (0, 1, 3):
            self.assertEqual(len(records[i]["embedding"]), D_MODEL)
        np.testing.assert_allclose(
            np.array([records[0]["embedding"], records[3]["embedding"]],
                     dtype=np.float32),
            self.reference(["good one", "good two"]), rtol=0,
            atol=BATCHING_ATOL)

        npy_path = self.path("bad.npy")
        result = self.client("--model", "rope", "--input", source,
                             "--output-format", "npy", "--out", npy_path)
        self.assertEqual(result.returncode, 1)
        self.assertIn("not written", result.stderr)
        self.assertFalse(os.path.exists(npy_path))

    def test_invalid_utf8_line_is_refused_by_the_server(self):
        source = self.path("latin1.txt")
        with open(source, "wb") as f:
            f.write(b"fine\ncaf\xe9\nalso fine\n")
        result = self.client("--model", "rope", "--input", source)
        self.assertEqual(result.returncode, 1, result.stderr)
        self.assertIn("line 2: INVALID_ARGUMENT: ", result.stderr)
        records = [json.loads(line) for line in result.stdout.splitlines()]
        self.assertEqual([("error" in r) for r in records],
                         [False, True, False])

    def test_malformed_lines_are_usage_errors_naming_the_line(self):
        for body, line in [('{"text": "ok"}\n{"text": 5}\n', 2),
                           ('{"text": "ok"}\n\nnot json\n', 3),
                           ('{"ids": [1, 2.5]}\n', 1)]:
            source = self.write("malformed.jsonl", body)
            result = self.client("--input", source)
            self.assertEqual(result.returncode, 2, result.stderr)
            self.assertIn(f"malformed.jsonl: line {line}: ", result.stderr)
            self.assertEqual(result.stdout, "")
        result = self.client("--input", self.path("missing.txt"))
        self.assertEqual(result.returncode, 2)
        self.assertIn("cannot open", result.stderr)
        result = self.client("--text", "a", "--output-format", "npy")
        self.assertEqual(result.returncode, 2)
        self.assertIn("--out", result.stderr)

    def test_default_json_is_compact_and_pretty_on_request(self):
        result = self.client("--model", "rope", "--text", "abc")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(result.stdout.count("\n"), 1)
        compact = json.loads(result.stdout)
        self.assertEqual(len(compact["results"][0]["pooled"]), D_MODEL)
        self.assertEqual(compact["results"][0]["num_tokens"], 5)
        pretty = self.client("--model", "rope", "--text", "abc", "--pretty")
        self.assertGreater(pretty.stdout.count("\n"), D_MODEL)
        camel = json.loads(self.client("--model", "rope", "--text", "abc",
                                       "--json-camel-case").stdout)
        self.assertEqual(camel["results"][0]["numTokens"], 5)
        # int64 fields follow protobuf's JSON mapping: strings.
        self.assertIsInstance(camel["results"][0]["batch"]["paddedTokens"],
                              str)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--server", required=True)
    parser.add_argument("--client", required=True)
    parser.add_argument("--python-client", required=True)
    ARGS, rest = parser.parse_known_args()
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)
