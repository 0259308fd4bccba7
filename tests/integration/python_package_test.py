#!/usr/bin/python3
"""The encoder_client Python package (client/python) against a real
encoder-server, offline, on Debian's grpcio, protobuf and numpy (the
package's oldest supported versions).

The package is installed offline into a temporary virtual environment
(`python3 -m venv --system-site-packages --without-pip`, then the system
pip with --no-build-isolation --no-index, so the protocol is compiled with
Debian's protoc), from a copy of client/python and proto/ so that the build
leaves nothing in the source tree. The checks then run in that environment
(this script re-runs itself there with --in-venv): EncoderClient's numpy
results against unary calls made with the example client's stubs and
struct decoding, attention rows that sum to 1, the byte tokenizer's ids,
the Diagnose tensors, errors as grpc.RpcError; Client and AsyncClient
(encode over several requests, a str, typed errors); the example script's
PNG; and the package, and its deprecated alias encoderclient, imported
from the source tree through PYTHONPATH.

Usage: python_package_test.py --server PATH --source-dir DIR
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

ARGS = None
D_MODEL = 512
READY_TIMEOUT_S = 180
CALL_TIMEOUT_S = 300
# A vector batched with different neighbours may differ in its last bits.
BATCHING_ATOL = 2e-5


def outer():
    """Starts the server, builds the venv, runs the checks inside it."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from server_process import ServerProcess
    with tempfile.TemporaryDirectory(prefix="encoder-client-test-") as tmp:
        tree = os.path.join(tmp, "tree")
        shutil.copytree(os.path.join(ARGS.source_dir, "client", "python"),
                        os.path.join(tree, "client", "python"),
                        ignore=shutil.ignore_patterns("build", "*.egg-info",
                                                      "__pycache__"))
        shutil.copytree(os.path.join(ARGS.source_dir, "proto"),
                        os.path.join(tree, "proto"))
        venv = os.path.join(tmp, "venv")
        subprocess.run([sys.executable, "-m", "venv", "--system-site-packages",
                        "--without-pip", venv], check=True)
        python = os.path.join(venv, "bin", "python")
        install = subprocess.run(
            [python, "-m", "pip", "install", "--no-build-isolation",
             "--no-index", os.path.join(tree, "client", "python")],
            capture_output=True, text=True, timeout=CALL_TIMEOUT_S)
        if install.returncode != 0:
            print(install.stdout, install.stderr, sep="\n")
            return 1
        server = ServerProcess(ARGS.server)
        try:
            server.wait_ready(READY_TIMEOUT_S)
            inner = subprocess.run(
                [python, os.path.abspath(__file__), "--in-venv",
                 "--server", ARGS.server, "--source-dir", ARGS.source_dir,
                 "--target", f"127.0.0.1:{server.port}", "--tmp", tmp,
                 *ARGS.rest], timeout=CALL_TIMEOUT_S * 3)
            return inner.returncode
        finally:
            server.stop()


class PythonPackageTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        import grpc
        import numpy as np
        import encoder_client
        cls.np = np
        cls.grpc = grpc
        cls.package = encoder_client
        cls.client = encoder_client.EncoderClient(ARGS.target, timeout=120)
        # Independent reference: the example client's struct decoding
        # (client/python/examples/minimal_client.py).
        import importlib.util
        spec = importlib.util.spec_from_file_location(
            "minimal_client", os.path.join(ARGS.source_dir, "client",
                                           "python", "examples",
                                           "minimal_client.py"))
        cls.example = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(cls.example)
        cls.ref_channel = grpc.insecure_channel(ARGS.target)

    @classmethod
    def tearDownClass(cls):
        cls.client.close()
        cls.ref_channel.close()

    def reference_pooled(self, items, model):
        """Pooled vectors from raw Embed responses, decoded with struct by
        the example client's decode_tensor."""
        pb2 = self.package.pb2
        stub = self.package.pb2_grpc.EncoderServiceStub(self.ref_channel)
        rows = []
        for item in items:
            message = (pb2.Input(text=item) if isinstance(item, str) else
                       pb2.Input(token_ids=pb2.TokenIds(ids=item)))
            response = stub.Embed(pb2.EmbedRequest(model=model,
                                                   inputs=[message]),
                                  timeout=120)
            rows.append(self.example.decode_tensor(pb2,
                                                   response.results[0].pooled))
        return self.np.array(rows)

    def test_installed_not_from_source(self):
        self.assertIn("site-packages", self.package.__file__)
        package_dir = os.path.dirname(self.package.__file__)
        self.assertTrue(os.path.isfile(os.path.join(
            package_dir, "_stubs_gen", "encoder.desc")))
        self.assertEqual(self.package.pb2.EmbedRequest.DESCRIPTOR.full_name,
                         "encoder.v1.EmbedRequest")

    def test_embed_matches_raw_responses(self):
        np = self.np
        items = ["héllo", [5, 6, 7, 8], "Positions matter."]
        vectors = self.client.embed(items, model="rope")
        self.assertEqual(vectors.shape, (3, D_MODEL))
        self.assertEqual(vectors.dtype, np.float32)
        np.testing.assert_allclose(vectors,
                                   self.reference_pooled(items, "rope"),
                                   rtol=0, atol=BATCHING_ATOL)
        unit = self.client.embed(items, model="rope", normalize=True)
        np.testing.assert_allclose(np.linalg.norm(unit, axis=1), 1.0,
                                   atol=1e-5)
        tokens = self.client.token_embeddings("abc", model="rope")
        self.assertEqual(tokens.shape, (5, D_MODEL))

    def test_attention_maps(self):
        np = self.np
        text = "attention!"
        seq = len(text) + 2
        models = {m.name: m for m in self.client.models().models}
        heads = models["alibi"].num_heads
        maps = self.client.attention(text, model="alibi", layers=[0, 1])
        self.assertEqual(maps.shape, (2, heads, seq, seq))
        np.testing.assert_allclose(maps.sum(axis=-1), 1.0, atol=1e-4)
        self.assertTrue((maps >= 0).all())
        averaged = self.client.attention(text, model="alibi", layers=[0, 1],
                                         average_heads=True)
        self.assertEqual(averaged.shape, (2, seq, seq))
        np.testing.assert_allclose(averaged, maps.mean(axis=1), atol=1e-5)

    def test_hidden_states(self):
        np = self.np
        text = "layers"
        seq = len(text) + 2
        models = {m.name: m for m in self.client.models().models}
        layers = models["rope"].num_layers
        states = self.client.hidden_states(text, model="rope",
                                           layers=[0, -1])
        self.assertEqual(states.shape, (2, seq, D_MODEL))
        self.assertEqual(states.dtype, np.float32)
        tokens = self.client.token_embeddings(text, model="rope")
        # Post-norm (the built-in models): the last state is the output.
        self.assertFalse(models["rope"].norm_first)
        np.testing.assert_allclose(states[1], tokens, rtol=0, atol=1e-6)
        pooled = self.client.hidden_states(text, model="rope",
                                           layers=[layers], pooled=True)
        self.assertEqual(pooled.shape, (1, D_MODEL))

    def test_tokenize_with_the_byte_tokenizer(self):
        text = "Hé!"
        [encoding] = self.client.tokenize([text], model="rope")
        # The built-in byte tokenizer: [CLS]=1, byte b -> b + 4, [SEP]=2.
        self.assertEqual(encoding["ids"].tolist(),
                         [1] + [b + 4 for b in text.encode()] + [2])
        self.assertEqual(encoding["byte_offsets"].shape,
                         (len(encoding["ids"]), 2))
        self.assertEqual(encoding["special_tokens_mask"].tolist(),
                         [True] + [False] * len(text.encode()) + [True])

    def test_diagnose_arrays(self):
        np = self.np
        response, arrays = self.client.diagnose(
            ids=[5, 6, 7, 8, 9], model="sinusoidal",
            probes=["structure"], attention_maps=True,
            structure_positions=16)
        self.assertEqual(response.model, "sinusoidal")
        layers = arrays["attention_maps"]
        self.assertEqual(layers.ndim, 4)
        self.assertEqual(layers.shape[2:], (5, 5))
        np.testing.assert_allclose(layers.sum(axis=-1), 1.0, atol=1e-4)
        gram = arrays["gram"]
        self.assertEqual(gram.shape, (16, 16))
        np.testing.assert_allclose(gram, gram.T, atol=1e-5)

    def test_errors_raise_rpc_error(self):
        with self.assertRaises(self.grpc.RpcError) as caught:
            self.client.embed(["x"], model="no-such-model")
        self.assertEqual(caught.exception.code(), self.grpc.StatusCode.NOT_FOUND)
        with self.assertRaises(ValueError):
            self.client.attention(model="rope")

    def test_example_script_writes_png(self):
        out = os.path.join(ARGS.tmp, "attention.png")
        script = os.path.join(ARGS.source_dir, "client", "python", "examples",
                              "plot_attention.py")
        run = subprocess.run([sys.executable, script, "--target", ARGS.target,
                              "--model", "alibi", "--text", "Positions!",
                              "--out", out], capture_output=True, text=True,
                             timeout=CALL_TIMEOUT_S)
        self.assertEqual(run.returncode, 0, run.stderr)
        with open(out, "rb") as f:
            self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")
        import matplotlib.pyplot as plt
        image = plt.imread(out)
        self.assertGreater(image.shape[0], 100)
        self.assertGreater(image.shape[1], 100)

    def test_client_encode_in_batches(self):
        np = self.np
        texts = [f"text number {i}" for i in range(70)]
        with self.package.Client(ARGS.target, max_concurrency=3) as client:
            vectors = client.encode(texts, model="rope", batch_size=16)
            self.assertEqual(vectors.shape, (70, D_MODEL))
            self.assertEqual(vectors.dtype, np.float32)
            one = client.encode(texts[41], model="rope")
            self.assertEqual(one.shape, (D_MODEL,))
            np.testing.assert_allclose(vectors[41], one, rtol=0,
                                       atol=BATCHING_ATOL)
            np.testing.assert_allclose(
                vectors[:5], self.reference_pooled(texts[:5], "rope"),
                rtol=0, atol=BATCHING_ATOL)
            unit = client.encode(texts[:3], model="rope", normalize=True,
                                 dimensions=100)
            self.assertEqual(unit.shape, (3, 100))
            np.testing.assert_allclose(np.linalg.norm(unit, axis=1), 1.0,
                                       atol=1e-5)
            tokens = client.tokenize("Hé!", model="rope")
            self.assertEqual(tokens["tokens"][0], "[CLS]")

    def test_client_typed_errors(self):
        errors = self.package.errors
        with self.package.Client(ARGS.target, retries=0) as client:
            with self.assertRaises(errors.ModelNotFound) as caught:
                client.encode("x", model="no-such-model")
            self.assertEqual(caught.exception.code,
                             self.grpc.StatusCode.NOT_FOUND)
            self.assertIn("no-such-model", caught.exception.message)
            with self.assertRaises(errors.InvalidInput):
                client.encode(["fine", ""], model="rope")
        with self.package.Client("127.0.0.1:1", retries=1, backoff=0.01,
                                 timeout=10) as client:
            with self.assertRaises(errors.Unavailable):
                client.encode("x")

    def test_async_client(self):
        import asyncio
        np = self.np
        texts = [f"async text {i}" for i in range(40)]

        async def run():
            async with self.package.AsyncClient(ARGS.target,
                                                max_concurrency=2) as client:
                many = await client.encode(texts, model="rope",
                                           batch_size=8)
                one = await client.encode(texts[7], model="rope")
                with self.assertRaises(self.package.ModelNotFound):
                    await client.encode("x", model="no-such-model")
                return many, one

        many, one = asyncio.run(run())
        self.assertEqual(many.shape, (40, D_MODEL))
        np.testing.assert_allclose(many[7], one, rtol=0, atol=BATCHING_ATOL)

    def test_source_tree_import_through_pythonpath(self):
        env = dict(os.environ,
                   PYTHONPATH=os.path.join(ARGS.source_dir, "client",
                                           "python"),
                   PYTHONDONTWRITEBYTECODE="1")
        code = ("import warnings, sys;"
                "warnings.simplefilter('error', DeprecationWarning);"
                "import encoder_client as e;"
                "c = e.Client(sys.argv[1]);"
                "v = c.encode(['abc'], model='rope');"
                "print(e.__file__, v.shape)")
        run = subprocess.run(["/usr/bin/python3", "-c", code, ARGS.target],
                             capture_output=True, text=True, env=env,
                             timeout=CALL_TIMEOUT_S)
        self.assertEqual(run.returncode, 0, run.stderr)
        self.assertIn(os.path.join("client", "python", "encoder_client"),
                      run.stdout)
        self.assertIn(f"(1, {D_MODEL})", run.stdout)
        # The deprecated alias: the same package, with a warning.
        code = ("import encoderclient as old, encoder_client as new, sys;"
                "c = old.EncoderClient(sys.argv[1]);"
                "print(old.EncoderClient is new.EncoderClient,"
                "      c.embed(['abc'], model='rope').shape)")
        run = subprocess.run(["/usr/bin/python3", "-W", "default", "-c",
                              code, ARGS.target],
                             capture_output=True, text=True, env=env,
                             timeout=CALL_TIMEOUT_S)
        self.assertEqual(run.returncode, 0, run.stderr)
        self.assertIn(f"True (1, {D_MODEL})", run.stdout)
        self.assertIn("DeprecationWarning", run.stderr)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--server", required=True)
    parser.add_argument("--source-dir", required=True)
    parser.add_argument("--in-venv", action="store_true")
    parser.add_argument("--target")
    parser.add_argument("--tmp")
    ARGS, rest = parser.parse_known_args()
    ARGS.rest = rest
    if not ARGS.in_venv:
        sys.exit(outer())
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)
