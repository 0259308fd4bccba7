#!/usr/bin/python3
"""The HTTP front against a real encoder-server on loopback: requests made
with curl, the official OpenAI Node client (npm `openai`, run by node), and
every vector compared with gRPC Embed's for the same input (python grpcio)
and with numpy's arithmetic for normalization and Matryoshka truncation.

Usage: http_front_test.py --server BIN --python-client PY --node NODE
       --openai-dir DIR [unittest arguments, e.g. HttpFrontTest]
"""
import argparse
import base64
import importlib.util
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

import grpc
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
from server_process import ServerProcess, rss_bytes  # noqa: E402

ARGS = None
TOKEN = "http-front-token-5c1e"
MAX_INPUTS = 4
MAX_TOKENIZE = 6  # texts per /tokenize, id lists per /decode
MAX_BODY = 4096
MAX_TOKENS = 24
# The response estimate is 256 bytes + 128 + 4 x 32 per input: two inputs
# fit (768), three (1024) do not.
MAX_SEND = 1000
TINY = {"vocab_size": 300, "d_model": 32, "num_heads": 4, "num_layers": 1,
        "d_ff": 64, "max_input_tokens": MAX_TOKENS}
REPOSITORY = {"default_model": "unit", "models": [
    {"name": "unit", "seed": 3, "config": {**TINY, "normalize": True}},
    {"name": "raw", "seed": 5, "config": {**TINY, "normalize": False},
     "batching": {"executions": 1}},
    # "unit"'s weights with a prompt.
    {"name": "prompted", "seed": 3, "config": {**TINY, "normalize": True},
     "prompts": {"query": "query: "}}]}
TEXTS = ["hello world", "another, longer"]


def project_version():
    """The version CMakeLists.txt declares, read here independently."""
    with open(os.path.join(HERE, "..", "..", "CMakeLists.txt")) as f:
        return re.search(r"project\(\w+ .*VERSION ([0-9.]+)\)",
                         f.read()).group(1)


def load_client():
    spec = importlib.util.spec_from_file_location("encoder_client",
                                                  ARGS.python_client)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def start_server(directory, extra=(), max_body=MAX_BODY, max_send=MAX_SEND):
    repo = os.path.join(directory, "repo.json")
    with open(repo, "w") as f:
        json.dump(REPOSITORY, f)
    tokens = os.path.join(directory, "tokens")
    with open(tokens, "w") as f:
        f.write(TOKEN + "\n")
    server = ServerProcess(ARGS.server, directory=directory, extra_args=[
        f"--models={repo}", "--no-warm-up", f"--auth-token-file={tokens}",
        "--http-listen=127.0.0.1:0",
        f"--max-inputs-per-request={MAX_INPUTS}",
        f"--max-tokenize-texts-per-request={MAX_TOKENIZE}",
        f"--http-max-body-bytes={max_body}",
        f"--max-send-message-bytes={max_send}",
        "--skip-padding-min-share=0.25", "--executions-per-model=3", *extra])
    server.wait_ready(120)
    with open(server.ready_file) as f:
        ready = json.load(f)
    server.http_port = ready["http_port"]
    return server, ready


class Http:
    """curl against one port; returns (status, headers dict, body text)."""

    def __init__(self, port):
        self.base = f"http://127.0.0.1:{port}"

    def __call__(self, method, path, body=None, token=TOKEN, raw=None,
                 headers=()):
        with tempfile.NamedTemporaryFile("w+b") as head, \
                tempfile.NamedTemporaryFile("w+b") as payload:
            cmd = ["curl", "-sS", "-X", method, "-D", head.name,
                   "-o", "-", "-w", "\n%{http_code}",
                   "--max-time", "60", self.base + path]
            if token is not None:
                cmd += ["-H", f"Authorization: Bearer {token}"]
            for h in headers:
                cmd += ["-H", h]
            data = raw if raw is not None else (
                None if body is None else json.dumps(body).encode())
            if data is not None:
                payload.write(data)
                payload.flush()
                cmd += ["-H", "Content-Type: application/json",
                        "--data-binary", f"@{payload.name}"]
            out = subprocess.run(cmd, capture_output=True, timeout=90,
                                 check=True).stdout.decode()
            text, _, code = out.rpartition("\n")
            head.seek(0)
            header_lines = head.read().decode().split("\r\n")[1:]
            parsed = {}
            for line in header_lines:
                if ":" in line:
                    k, v = line.split(":", 1)
                    parsed[k.strip().lower()] = v.strip()
            return int(code), parsed, text


def raw_exchange(port, data, replies=1, timeout=30):
    """Sends `data` as is on one connection and reads `replies` responses
    (Content-Length framed); returns [(status, headers, body)] and whether
    the server then closed the connection."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        sock.sendall(data)
        buf = b""
        out = []
        while len(out) < replies:
            while b"\r\n\r\n" not in buf:
                chunk = sock.recv(65536)
                if not chunk:
                    return out, True
                buf += chunk
            head, buf = buf.split(b"\r\n\r\n", 1)
            lines = head.decode().split("\r\n")
            headers = {}
            for line in lines[1:]:
                k, _, v = line.partition(":")
                headers[k.strip().lower()] = v.strip()
            n = int(headers.get("content-length", "0"))
            while len(buf) < n:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                buf += chunk
            out.append((int(lines[0].split()[1]), headers, buf[:n]))
            buf = buf[n:]
        sock.settimeout(0.5)  # well inside the 2 s keep-alive
        try:
            closed = sock.recv(1) == b""
        except socket.timeout:
            closed = False
        return out, closed
    finally:
        sock.close()


def post(path, body, extra=b""):
    """A raw POST with the test's token."""
    return (f"POST {path} HTTP/1.1\r\nHost: t\r\n"
            f"Authorization: Bearer {TOKEN}\r\n"
            f"Content-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n").encode() + extra + \
        b"\r\n" + body


class Fixture(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="encoder-http-")
        cls.client = load_client()
        cls.pb2, cls.pb2_grpc = cls.client.load_stubs(cls.tmp.name)
        cls.server, cls.ready = start_server(cls.tmp.name)
        cls.http = Http(cls.server.http_port)
        cls.channel = grpc.insecure_channel(f"127.0.0.1:{cls.server.port}")
        cls.stub = cls.pb2_grpc.EncoderServiceStub(cls.channel)

    @classmethod
    def tearDownClass(cls):
        cls.channel.close()
        cls.server.stop()
        cls.tmp.cleanup()

    def grpc_embed(self, model, inputs, **fields):
        """gRPC Embed's pooled vectors (numpy float32) and token counts."""
        request = self.pb2.EmbedRequest(model=model, **fields)
        for item in inputs:
            if isinstance(item, str):
                request.inputs.add(text=item)
            else:
                request.inputs.add().token_ids.ids.extend(item)
        response = self.stub.Embed(
            request, timeout=60,
            metadata=(("authorization", f"Bearer {TOKEN}"),))
        vectors = [np.array(self.client.decode_tensor(self.pb2, r.pooled),
                            dtype=np.float32) for r in response.results]
        return vectors, [r.num_tokens for r in response.results]

    def embeddings(self, body, status=200, **kw):
        code, headers, text = self.http("POST", "/v1/embeddings", body, **kw)
        self.assertEqual(code, status, text)
        return json.loads(text), headers

    def assert_error(self, body, status, param=None, contains="", **kw):
        reply, headers = self.embeddings(body, status, **kw)
        self.assert_error_shape(reply, status, param, contains)
        return reply, headers

    def assert_error_shape(self, reply, status, param=None, contains=""):
        self.assertEqual(set(reply), {"error"})
        error = reply["error"]
        self.assertEqual(set(error), {"message", "type", "param", "code"})
        expected_type = {400: "invalid_request_error",
                         401: "authentication_error",
                         404: "invalid_request_error",
                         405: "invalid_request_error",
                         413: "invalid_request_error",
                         503: "service_unavailable"}[status]
        self.assertEqual(error["type"], expected_type)
        if param is not None:
            self.assertEqual(error["param"], param)
        self.assertIn(contains, error["message"])


class HttpFrontTest(Fixture):
    def test_text_inputs_equal_grpc_and_unit_norm(self):
        reply, _ = self.embeddings({"model": "unit", "input": TEXTS,
                                    "user": "someone"})
        self.assertEqual(set(reply), {"object", "data", "model", "usage"})
        self.assertEqual(reply["object"], "list")
        self.assertEqual(reply["model"], "unit")
        expected, tokens = self.grpc_embed("unit", TEXTS)
        self.assertEqual(len(reply["data"]), len(TEXTS))
        for i, item in enumerate(reply["data"]):
            self.assertEqual(set(item), {"object", "index", "embedding"})
            self.assertEqual(item["object"], "embedding")
            self.assertEqual(item["index"], i)
            got = np.array(item["embedding"], dtype=np.float32)
            self.assertEqual(got.shape, (32,))
            np.testing.assert_allclose(got, expected[i], rtol=0, atol=1e-6)
            self.assertAlmostEqual(float(np.linalg.norm(
                got.astype(np.float64))), 1.0, places=5)
        self.assertEqual(reply["usage"], {"prompt_tokens": sum(tokens),
                                          "total_tokens": sum(tokens)})

    def test_single_string_and_default_model(self):
        reply, _ = self.embeddings({"input": TEXTS[0]})
        self.assertEqual(reply["model"], "unit")
        expected, _ = self.grpc_embed("", [TEXTS[0]])
        np.testing.assert_allclose(reply["data"][0]["embedding"], expected[0],
                                   rtol=0, atol=1e-6)
        reply, _ = self.embeddings({"input": TEXTS[0], "model": ""})
        self.assertEqual(reply["model"], "unit")

    def test_token_id_inputs_equal_grpc(self):
        ids = [[5, 17, 200, 3], [9, 9, 9]]
        reply, _ = self.embeddings({"model": "raw", "input": ids[0]})
        expected, _ = self.grpc_embed("raw", [ids[0]])
        self.assertEqual(reply["usage"]["prompt_tokens"], 4)
        np.testing.assert_allclose(reply["data"][0]["embedding"], expected[0],
                                   rtol=0, atol=1e-6)
        reply, _ = self.embeddings({"model": "raw", "input": ids})
        expected, _ = self.grpc_embed("raw", ids)
        self.assertEqual(reply["usage"]["total_tokens"], 7)
        for i in range(2):
            np.testing.assert_allclose(reply["data"][i]["embedding"],
                                       expected[i], rtol=0, atol=1e-6)

    def test_base64_is_little_endian_float32(self):
        body = {"model": "raw", "input": TEXTS}
        floats, _ = self.embeddings(body)
        packed, _ = self.embeddings({**body, "encoding_format": "base64"})
        for f, p in zip(floats["data"], packed["data"]):
            decoded = np.frombuffer(base64.b64decode(p["embedding"]),
                                    dtype="<f4")
            self.assertEqual(decoded.shape, (32,))
            # Same values exactly: the float text reads back as the float32.
            np.testing.assert_array_equal(
                decoded, np.array(f["embedding"], dtype=np.float32))

    def test_hidden_states_extension_equals_grpc(self):
        ids = [5, 17]
        request = self.pb2.EmbedRequest(
            model="raw", inputs=[self.pb2.Input(
                token_ids=self.pb2.TokenIds(ids=ids))],
            hidden_states=self.pb2.HiddenStateSelection(layers=[-1]))
        result = self.stub.Embed(
            request, timeout=60,
            metadata=(("authorization", f"Bearer {TOKEN}"),)).results[0]
        want = np.array(self.client.decode_tensor(
            self.pb2, result.hidden_states), dtype=np.float32)
        reply, _ = self.embeddings({"model": "raw", "input": ids,
                                    "hidden_states": {"layers": [-1]}})
        item = reply["data"][0]
        self.assertEqual(set(item), {"object", "index", "embedding",
                                     "hidden_states"})
        states = item["hidden_states"]
        self.assertEqual(states["layers"], [TINY["num_layers"]])
        self.assertEqual(states["shape"], [1, 2, TINY["d_model"]])
        got = np.array(states["data"], dtype=np.float32).reshape(
            states["shape"])
        np.testing.assert_array_equal(got, want.reshape(states["shape"]))
        # Pooled, base64: the same float32 bytes as the float list.
        body = {"model": "raw", "input": ids,
                "hidden_states": {"layers": [0, 1], "pooled": True}}
        floats, _ = self.embeddings(body)
        packed, _ = self.embeddings({**body, "encoding_format": "base64"})
        f, p = floats["data"][0]["hidden_states"], \
            packed["data"][0]["hidden_states"]
        self.assertEqual(f["shape"], [2, TINY["d_model"]])
        self.assertEqual(p["shape"], f["shape"])
        np.testing.assert_array_equal(
            np.frombuffer(base64.b64decode(p["data"]), dtype="<f4"),
            np.array(f["data"], dtype=np.float32))
        # The mean of the token states is the pooled state ("raw" pools
        # by mean).
        np.testing.assert_allclose(
            np.array(f["data"][TINY["d_model"]:], dtype=np.float32),
            got[0].mean(0), rtol=0, atol=1e-5)
        # Without the extension, no hidden_states key.
        plain, _ = self.embeddings({"model": "raw", "input": ids})
        self.assertNotIn("hidden_states", plain["data"][0])
        for bad, words in (("x", "must be an object"),
                           ({"layers": 1}, "list of integers"),
                           ({"layers": ["1"]}, "not a layer index"),
                           ({"layers": [0], "pool": True}, "unknown key"),
                           ({"layers": [0], "pooled": 1}, "true or false"),
                           ({"layers": [2]}, "out of range"),
                           ({"layers": [0, -2]}, "repeats layer 0"),
                           ({"pooled": True}, "without")):
            self.assert_error({"model": "raw", "input": ids,
                               "hidden_states": bad}, 400, "hidden_states",
                              words)

    def test_prompt_name_prepends_the_prompt(self):
        # The prompt's text then the input, on the same weights ("unit").
        reply, _ = self.embeddings({"model": "prompted", "input": TEXTS,
                                    "prompt_name": "query"})
        expected, tokens = self.grpc_embed(
            "unit", ["query: " + t for t in TEXTS])
        for i in range(len(TEXTS)):
            np.testing.assert_allclose(reply["data"][i]["embedding"],
                                       expected[i], rtol=0, atol=1e-6)
        self.assertEqual(reply["usage"]["prompt_tokens"], sum(tokens))
        # On gRPC too.
        grpc_prompted, _ = self.grpc_embed("prompted", TEXTS,
                                           prompt_name="query")
        for i in range(len(TEXTS)):
            np.testing.assert_allclose(grpc_prompted[i], expected[i],
                                       rtol=0, atol=1e-6)
        self.assert_error({"model": "prompted", "input": "x",
                           "prompt_name": "passage"}, 400, "prompt_name",
                          "its prompts: query")
        self.assert_error({"model": "unit", "input": "x",
                           "prompt_name": "query"}, 400, "prompt_name",
                          "it has none")
        self.assert_error({"model": "prompted", "input": "x",
                           "prompt_name": 3}, 400, "prompt_name")
        # A caller's own prompt text, as prompt_name's would be.
        own, _ = self.embeddings({"model": "unit", "input": TEXTS,
                                  "prompt": "query: "})
        for i in range(len(TEXTS)):
            np.testing.assert_allclose(own["data"][i]["embedding"],
                                       expected[i], rtol=0, atol=1e-6)
        self.assert_error({"model": "prompted", "input": "x",
                           "prompt": "query: ", "prompt_name": "query"},
                          400, "prompt_name", "not both")
        self.assert_error({"model": "unit", "input": "x", "prompt": 3},
                          400, "prompt")
        # Packed sign bits: one bit per value, eight to a byte.
        floats, _ = self.embeddings({"model": "unit", "input": TEXTS})
        packed, _ = self.embeddings({"model": "unit", "input": TEXTS,
                                     "embedding_type": "ubinary"})
        for i in range(len(TEXTS)):
            bits = np.packbits(np.asarray(floats["data"][i]["embedding"]) > 0)
            self.assertEqual(packed["data"][i]["embedding"], bits.tolist())
        self.assert_error({"model": "unit", "input": "x",
                           "embedding_type": "int4"}, 400, "embedding_type",
                          "binary")
        code, _, text = self.http("GET", "/info")
        self.assertEqual(code, 200, text)
        models = {m["name"]: m for m in json.loads(text)["models"]}
        self.assertEqual(models["prompted"]["prompts"], {"query": "query: "})
        self.assertEqual(models["prompted"]["default_prompt_name"], "")
        # The server's setting, not the default (0.1).
        self.assertEqual(models["unit"]["skip_padding_min_share"], 0.25)
        # The flag, and a repository entry's own batching.executions.
        self.assertEqual(models["unit"]["batching"]["executions"], 3)
        self.assertEqual(models["raw"]["batching"]["executions"], 1)

    def test_dimensions_cut_then_renormalize(self):
        raw, _ = self.grpc_embed("raw", TEXTS)
        for model in ("unit", "raw"):
            reply, _ = self.embeddings({"model": model, "input": TEXTS,
                                        "dimensions": 8})
            full, _ = self.grpc_embed(model, TEXTS, normalize=False)
            for i, item in enumerate(reply["data"]):
                got = np.array(item["embedding"], dtype=np.float64)
                cut = full[i][:8].astype(np.float64)
                np.testing.assert_allclose(got, cut / np.linalg.norm(cut),
                                           rtol=0, atol=1e-6)
        # gRPC's dimensions: renormalized only when normalization is on.
        cut, _ = self.grpc_embed("raw", TEXTS, dimensions=8)
        for i in range(2):
            np.testing.assert_allclose(cut[i], raw[i][:8], rtol=0, atol=1e-7)
        cut, _ = self.grpc_embed("unit", TEXTS, dimensions=8)
        full, _ = self.grpc_embed("unit", TEXTS, normalize=False)
        for i in range(2):
            c = full[i][:8].astype(np.float64)
            np.testing.assert_allclose(cut[i], c / np.linalg.norm(c),
                                       rtol=0, atol=1e-6)
        # The full width is allowed; beyond it or below 1 is refused.
        reply, _ = self.embeddings({"model": "unit", "input": "x",
                                    "dimensions": 32})
        self.assertEqual(len(reply["data"][0]["embedding"]), 32)
        for bad in (0, -3, 33):
            self.assert_error({"model": "unit", "input": "x",
                               "dimensions": bad}, 400, "dimensions",
                              "dimensions must be 1 to 32")
        self.assert_error({"input": "x", "dimensions": 2 ** 40}, 400,
                          "dimensions")
        self.assert_error({"input": "x", "dimensions": "8"}, 400,
                          "dimensions")
        with self.assertRaises(grpc.RpcError) as caught:
            self.grpc_embed("unit", TEXTS, dimensions=33)
        self.assertEqual(caught.exception.code(),
                         grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("dimensions must be 1 to 32",
                      caught.exception.details())

    def tei(self, path, body, status=200):
        code, headers, text = self.http("POST", path, body)
        self.assertEqual(code, status, text)
        return json.loads(text), headers

    def test_tei_embed_is_normalized_by_default_and_equals_grpc(self):
        # text-embeddings-inference's /embed: a bare list of vectors, unit
        # length unless "normalize": false, "dimensions" cut first.
        reply, _ = self.tei("/embed", {"inputs": TEXTS, "model": "raw"})
        raw, _ = self.grpc_embed("raw", TEXTS)
        self.assertEqual(len(reply), len(TEXTS))
        for got, want in zip(reply, raw):
            want = want.astype(np.float64)
            np.testing.assert_allclose(got, want / np.linalg.norm(want),
                                       rtol=0, atol=1e-6)
        reply, _ = self.tei("/embed", {"inputs": TEXTS[0], "model": "raw",
                                       "normalize": False})
        np.testing.assert_allclose(reply[0], raw[0], rtol=0, atol=1e-6)
        reply, _ = self.tei("/embed", {"inputs": [[5, 6, 7]], "model": "raw",
                                       "dimensions": 8, "truncate": True,
                                       "truncation_direction": "Right",
                                       "prompt_name": None})
        ids_raw, _ = self.grpc_embed("raw", [[5, 6, 7]])
        cut = ids_raw[0][:8].astype(np.float64)
        np.testing.assert_allclose(reply[0], cut / np.linalg.norm(cut),
                                   rtol=0, atol=1e-6)

    def test_tei_routes_share_truncation_direction(self):
        # Every TEI route reads truncation_direction alike: Left keeps the
        # last tokens. The byte tokenizer makes a byte a token, so the cut
        # text is known: [CLS] + the last (or first) MAX_TOKENS - 2 bytes +
        # [SEP].
        text = "a" * 40 + " the tail of it"
        keep = MAX_TOKENS - 2
        for side, part in (("Left", text[-keep:]), ("Right", text[:keep])):
            body = {"inputs": text, "model": "raw", "truncate": True,
                    "truncation_direction": side}
            cut, _ = self.tei("/embed", body)
            whole, _ = self.tei("/embed", {"inputs": part, "model": "raw"})
            np.testing.assert_allclose(cut[0], whole[0], rtol=0, atol=1e-6,
                                       err_msg=side)
            sim, _ = self.tei("/similarity", {
                "inputs": {"source_sentence": text, "sentences": [part]},
                "model": "raw",
                "parameters": {"truncate": True,
                               "truncation_direction": side}})
            self.assertAlmostEqual(sim[0], 1.0, places=5, msg=side)
        self.tei("/similarity", {
            "inputs": {"source_sentence": "a", "sentences": ["b"]},
            "parameters": "truncate"}, 422)

    def test_timing_headers_and_metadata(self):
        # text-embeddings-inference's per-request headers, whole
        # milliseconds: the parts fit in the total, the tokens are the
        # call's; gRPC's trailing metadata carries the same names.
        names = ("x-total-time", "x-compute-time", "x-tokenization-time",
                 "x-queue-time", "x-inference-time")

        def check(values, tokens, where):
            for name in names + ("x-compute-tokens",):
                self.assertRegex(values.get(name, ""), r"^[0-9]+$",
                                 f"{where}: {name}")
            ms = {n: int(values[n]) for n in names}
            self.assertEqual(ms["x-compute-time"], ms["x-total-time"], where)
            # Each part is floored apart: up to 1 ms each above the total.
            self.assertLessEqual(
                ms["x-tokenization-time"] + ms["x-queue-time"] +
                ms["x-inference-time"], ms["x-total-time"] + 2, where)
            self.assertEqual(int(values["x-compute-tokens"]), tokens, where)

        reply, headers = self.embeddings({"input": TEXTS, "model": "raw"})
        check(headers, reply["usage"]["prompt_tokens"], "/v1/embeddings")
        code, headers, _ = self.http("POST", "/embed",
                                     {"inputs": TEXTS, "model": "raw"})
        self.assertEqual(code, 200)
        tokenized, _ = self.tei("/tokenize", {"inputs": TEXTS,
                                              "model": "raw"})
        check(headers, sum(len(t) for t in tokenized), "/embed")
        request = self.pb2.EmbedRequest(model="raw")
        for text in TEXTS:
            request.inputs.add().text = text
        response, call = self.stub.Embed.with_call(
            request, timeout=60,
            metadata=(("authorization", f"Bearer {TOKEN}"),))
        trailing = dict(call.trailing_metadata())
        check(trailing, sum(r.num_tokens for r in response.results), "gRPC")
        self.assertEqual(trailing["x-truncated-tokens"], "0")
        # The metric beside queue and inference times.
        code, _, metrics = self.http("GET", "/metrics", token=None)
        self.assertEqual(code, 200)
        self.assertRegex(
            metrics, r'encoder_tokenization_duration_seconds_count\{'
            r'model="raw",scheme="[a-z_]+"\} [1-9]')

    def test_long_inputs_are_truncated_unless_refused(self):
        # As text-embeddings-inference's --auto-truncate (on by default): an
        # input past the model's length is cut unless the request says
        # truncate false, and X-Truncated-Tokens counts the tokens dropped.
        text = " ".join(["word"] * 12)
        tokenized, _ = self.tei("/tokenize", {"inputs": text, "model": "raw"})
        whole = len(tokenized[0])  # /tokenize never truncates
        self.assertGreater(whole, MAX_TOKENS)
        cut, _ = self.tei("/embed", {"inputs": text, "model": "raw",
                                     "truncate": True, "normalize": False})
        for path, body in (
                ("/embed", {"inputs": text, "normalize": False}),
                ("/v1/embeddings", {"input": text})):
            code, headers, reply = self.http("POST", path,
                                             {**body, "model": "raw"})
            self.assertEqual(code, 200, f"{path}: {reply}")
            self.assertEqual(headers["x-truncated-tokens"],
                             str(whole - MAX_TOKENS), path)
            reply = json.loads(reply)
            if path == "/embed":
                np.testing.assert_array_equal(reply, cut)
            else:
                self.assertEqual(reply["usage"]["prompt_tokens"], MAX_TOKENS)
        # Over gRPC: truncate unset is the default, each result counts.
        request = self.pb2.EmbedRequest(model="raw")
        request.inputs.add().text = text
        request.inputs.add().text = "short"
        response = self.stub.Embed(
            request, timeout=60,
            metadata=(("authorization", f"Bearer {TOKEN}"),))
        self.assertEqual([r.truncated_tokens for r in response.results],
                         [whole - MAX_TOKENS, 0])
        self.assertEqual([r.truncated for r in response.results],
                         [True, False])
        request.truncate = False
        with self.assertRaises(grpc.RpcError) as refused:
            self.stub.Embed(request, timeout=60, metadata=(
                ("authorization", f"Bearer {TOKEN}"),))
        self.assertEqual(refused.exception.code(),
                         grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn(f"accepts at most {MAX_TOKENS}",
                      refused.exception.details())
        # A short input is not cut: the header says 0.
        code, headers, _ = self.http("POST", "/embed",
                                     {"inputs": "short", "model": "raw"})
        self.assertEqual((code, headers["x-truncated-tokens"]), (200, "0"))
        for path, body, status in (
                ("/embed", {"inputs": text}, 413),
                ("/embed_all", {"inputs": text}, 413),
                ("/v1/embeddings", {"input": text}, 400)):
            code, _, reply = self.http(
                "POST", path, {**body, "model": "raw", "truncate": False})
            self.assertEqual(code, status, f"{path}: {reply}")
            self.assertIn(f"accepts at most {MAX_TOKENS}", reply, path)

    def test_tei_embed_all_is_every_token_vector(self):
        # Two tokens: every token's vector fits the test's 1000-byte send
        # limit.
        reply, _ = self.tei("/embed_all", {"inputs": [[5, 6]], "model": "raw"})
        request = self.pb2.EmbedRequest(model="raw",
                                        return_token_embeddings=True)
        request.inputs.add().token_ids.ids.extend([5, 6])
        response = self.stub.Embed(
            request, timeout=60,
            metadata=(("authorization", f"Bearer {TOKEN}"),))
        self.assertEqual(len(reply), 1)
        for got, r in zip(reply, response.results):
            want = np.array(self.client.decode_tensor(
                self.pb2, r.token_embeddings), dtype=np.float32)
            self.assertEqual(np.array(got).shape, (r.num_tokens, 32))
            np.testing.assert_allclose(np.array(got).reshape(want.shape),
                                       want, rtol=0, atol=1e-6)

    def test_tei_errors_have_its_shape_and_statuses(self):
        # TEI's statuses: its validation errors are 413 (PAYLOAD_TOO_LARGE),
        # a body that does not deserialize 422, no inputs 400.
        cases = [({"inputs": []}, 400, "Empty", "empty"),
                 ({}, 422, "Validation", "missing"),
                 ({"inputs": {"a": 1}}, 422, "Validation", "inputs must"),
                 ({"inputs": "x", "truncation_direction": "Up"}, 422,
                  "Validation", "truncation_direction"),
                 ({"inputs": "x", "truncate": "yes"}, 422, "Validation",
                  "truncate"),
                 ({"inputs": ""}, 413, "Validation", "empty text"),
                 ({"inputs": list(range(1, MAX_TOKENS + 6)),
                   "truncate": False}, 413, "Validation",
                  f"at most {MAX_TOKENS}"),
                 ({"inputs": ["x"] * (MAX_INPUTS + 1)}, 413, "Validation",
                  f"at most {MAX_INPUTS}"),
                 ({"inputs": "x", "model": "nope"}, 422, "Validation",
                  "not found")]
        for body, status, kind, words in cases:
            for path in ("/embed", "/embed_all"):
                reply, _ = self.tei(path, body, status)
                self.assertEqual(set(reply), {"error", "error_type"}, body)
                self.assertEqual(reply["error_type"], kind, body)
                self.assertIn(words, reply["error"], body)
        # A response over --max-send-message-bytes is refused before it
        # runs (413); fields TEI does not know are ignored, as TEI does;
        # a refused token is the front's 401.
        reply, _ = self.tei("/embed", {"inputs": ["x", "y", "z"]}, 413)
        self.assertEqual(reply["error_type"], "Validation")
        self.tei("/embed", {"inputs": "x", "parameters": {}, "user": "u"})
        code, _, _ = self.http("POST", "/embed", {"inputs": "x"}, token="bad")
        self.assertEqual(code, 401)

    def test_tei_tokenize_and_decode_equal_grpc(self):
        # /tokenize: one token list per input, byte offsets into the input
        # and its text there; special tokens without offsets. /decode:
        # one text per id list. Both as gRPC Tokenize and Decode give them.
        reply, _ = self.tei("/tokenize", {"inputs": TEXTS, "model": "raw"})
        auth = (("authorization", f"Bearer {TOKEN}"),)
        grpc = self.stub.Tokenize(self.pb2.TokenizeRequest(
            model="raw", texts=TEXTS), timeout=60, metadata=auth)
        self.assertEqual(len(reply), len(TEXTS))
        for tokens, encoding, text in zip(reply, grpc.encodings, TEXTS):
            self.assertEqual([t["id"] for t in tokens], list(encoding.ids))
            self.assertEqual([t["special"] for t in tokens],
                             list(encoding.special_tokens_mask))
            raw = text.encode()
            for k, t in enumerate(tokens):
                start, stop = encoding.byte_offsets[2 * k: 2 * k + 2]
                if t["special"] and start == stop:
                    self.assertIsNone(t["start"])
                    self.assertEqual(t["text"], encoding.tokens[k])
                else:
                    self.assertEqual((t["start"], t["stop"]), (start, stop))
                    self.assertEqual(t["text"].encode(), raw[start:stop])
        plain, _ = self.tei("/tokenize", {"inputs": TEXTS[0], "model": "raw",
                                          "add_special_tokens": False})
        self.assertFalse(any(t["special"] for t in plain[0]))
        ids = [t["id"] for t in reply[0]]
        decoded, _ = self.tei("/decode", {"ids": ids, "model": "raw"})
        want = self.stub.Decode(self.pb2.DecodeRequest(
            model="raw", inputs=[self.pb2.TokenIds(ids=ids)],
            skip_special_tokens=True), timeout=60, metadata=auth)
        self.assertEqual(decoded, list(want.texts))
        both, _ = self.tei("/decode", {"ids": [ids, ids[:2]], "model": "raw",
                                       "skip_special_tokens": False})
        self.assertEqual(len(both), 2)
        for path, body, status, kind in [
                ("/tokenize", {"inputs": []}, 400, "Empty"),
                ("/tokenize", {"inputs": 3}, 422, "Validation"),
                ("/tokenize", {"inputs": ["x"] * (MAX_TOKENIZE + 1)}, 413,
                 "Validation"),
                ("/decode", {"ids": [[5]] * (MAX_TOKENIZE + 1)}, 413,
                 "Validation"),
                ("/tokenize", {"inputs": "x", "model": "nope"}, 422,
                 "Validation"),
                ("/decode", {"ids": []}, 400, "Empty"),
                ("/decode", {"ids": "1 2"}, 422, "Validation"),
                ("/decode", {"ids": [999999]}, 413, "Validation")]:
            reply, _ = self.tei(path, body, status)
            self.assertEqual(reply["error_type"], kind, (path, body))
        # The limit is --max-tokenize-texts-per-request, not the Embed one:
        # MAX_TOKENIZE texts pass though they are more than MAX_INPUTS, and
        # the refusal names the flag.
        self.tei("/tokenize", {"inputs": ["x"] * MAX_TOKENIZE})
        reply, _ = self.tei("/tokenize",
                            {"inputs": ["x"] * (MAX_TOKENIZE + 1)}, 413)
        self.assertIn(f"at most {MAX_TOKENIZE} "
                      "(--max-tokenize-texts-per-request)", reply["error"])
        info = json.loads(self.http("GET", "/info")[2])
        self.assertEqual(info["limits"]["max_tokenize_texts_per_request"],
                         MAX_TOKENIZE)

    def test_tei_similarity_and_root_route(self):
        # /similarity: each sentence's cosine similarity to the source, from
        # the same vectors gRPC Embed gives (one sentence: the test server's
        # send limit is small); POST / routes an embedding model to /embed,
        # as TEI routes it.
        reply, _ = self.tei("/similarity", {
            "inputs": {"source_sentence": TEXTS[0],
                       "sentences": [TEXTS[1]]},
            "parameters": {"truncate": True}, "model": "raw"})
        vectors, _ = self.grpc_embed("raw", [TEXTS[0], TEXTS[1]])
        unit = [v.astype(np.float64) / np.linalg.norm(v) for v in vectors]
        np.testing.assert_allclose(reply, [unit[1] @ unit[0]], rtol=0,
                                   atol=1e-6)
        root, _ = self.tei("/", {"inputs": TEXTS[0], "model": "raw"})
        embed, _ = self.tei("/embed", {"inputs": TEXTS[0], "model": "raw"})
        np.testing.assert_allclose(root, embed, rtol=0, atol=1e-7)
        reply, _ = self.tei("/similarity", {
            "inputs": {"source_sentence": "a", "sentences": []}}, 400)
        self.assertEqual(reply["error_type"], "Empty")
        reply, _ = self.tei("/similarity", {"inputs": "a"}, 422)
        self.assertIn("source_sentence", reply["error"])

    def test_scoring_routes_refuse_a_model_without_a_head(self):
        # The built-in models embed only: TEI's rerank and predict answer
        # its backend error (424), /v1/rerank a 400 naming the tasks.
        reply, _ = self.tei("/rerank", {"query": "q", "texts": ["a"],
                                        "model": "raw"}, 424)
        self.assertEqual(reply["error_type"], "Backend")
        self.assertIn("no classification head", reply["error"])
        self.assertIn("serves: embed", reply["error"])
        reply, _ = self.tei("/predict", {"inputs": ["a", "b"],
                                         "model": "raw"}, 424)
        self.assertEqual(reply["error_type"], "Backend")
        reply, _ = self.tei("/rerank", {"query": "q", "texts": []}, 400)
        self.assertEqual(reply["error_type"], "Empty")
        reply, _ = self.tei("/rerank", {"texts": ["a"]}, 422)
        self.assertIn("query", reply["error"])
        code, _, text = self.http("POST", "/v1/rerank", {
            "model": "raw", "query": "q", "documents": ["a", {"text": "b"}]})
        self.assertEqual(code, 400, text)
        self.assert_error_shape(json.loads(text), 400, None,
                                "no classification head")
        code, _, text = self.http("POST", "/v1/rerank",
                                  {"query": "q", "documents": [{"x": 1}]})
        self.assertEqual(code, 400, text)
        self.assert_error_shape(json.loads(text), 400, "documents",
                                "each document")

    def test_sparse_and_info_routes(self):
        # The built-in models have no masked-LM head: /embed_sparse is
        # TEI's 424 naming the tasks; /info carries TEI's Info fields for
        # the default model beside its own.
        reply, _ = self.tei("/embed_sparse", {"inputs": ["a", "b"],
                                              "model": "raw"}, 424)
        self.assertEqual(reply["error_type"], "Backend")
        self.assertIn("no sparse head", reply["error"])
        self.assertIn("serves: embed", reply["error"])
        reply, _ = self.tei("/embed_sparse", {"inputs": []}, 400)
        self.assertEqual(reply["error_type"], "Empty")
        code, _, text = self.http("GET", "/info")
        self.assertEqual(code, 200, text)
        info = json.loads(text)
        for key in ("model_id", "served_model_name", "model_dtype",
                    "model_type", "max_input_length", "max_batch_tokens",
                    "max_client_batch_size", "max_concurrent_requests",
                    "auto_truncate", "tokenization_workers", "version"):
            self.assertIn(key, info)
        self.assertEqual(info["model_id"], info["default_model"])
        self.assertIn("embedding", info["model_type"])
        self.assertIsInstance(info["auto_truncate"], bool)
        default = next(m for m in info["models"]
                       if m["name"] == info["default_model"])
        self.assertEqual(info["max_input_length"], default["max_input_tokens"])
        self.assertEqual(default["tasks"], ["embed"])

    def test_request_errors(self):
        code, _, text = self.http("POST", "/v1/embeddings", raw=b"{not json")
        self.assertEqual(code, 400)
        self.assert_error_shape(json.loads(text), 400, None, "not valid JSON")
        self.assert_error([1, 2], 400, None, "JSON object")
        reply, _ = self.assert_error({"model": "nope", "input": "x"}, 404,
                                     "model", "available: unit, raw")
        self.assertEqual(reply["error"]["code"], "model_not_found")
        self.assert_error({"model": 7, "input": "x"}, 400, "model")
        self.assert_error({"model": "unit"}, 400, "input", "missing")
        self.assert_error({"input": ""}, 400, None, "empty text")
        self.assert_error({"input": []}, 400, "input", "empty list")
        self.assert_error({"input": [[]]}, 400, "input", "no token ids")
        self.assert_error({"input": ["a", 3]}, 400, "input")
        self.assert_error({"input": [1.5]}, 400, "input", "token id")
        self.assert_error({"input": {"a": 1}}, 400, "input")
        self.assert_error({"input": [[1, 2], [999999]]}, 400, None,
                          "outside the vocabulary")
        self.assert_error({"input": ["x"] * (MAX_INPUTS + 1)}, 400, "input",
                          f"at most {MAX_INPUTS}")
        self.assert_error({"input": "x", "encoding_format": "hex"}, 400,
                          "encoding_format")
        too_long = list(range(1, MAX_TOKENS + 6))
        self.assert_error({"input": too_long, "truncate": False}, 400, None,
                          f"accepts at most {MAX_TOKENS}")
        self.assert_error({"input": too_long,
                           "long_input": {"policy": "refuse"}}, 400, None,
                          f"accepts at most {MAX_TOKENS}")
        for body in ({"input": too_long, "truncate": True},
                     {"input": too_long}):
            reply, headers = self.embeddings(body)
            self.assertEqual(reply["usage"]["prompt_tokens"], MAX_TOKENS)
            self.assertEqual(headers["x-truncated-tokens"], "5")
        # Over --http-max-body-bytes: 413 before any parsing.
        code, _, text = self.http(
            "POST", "/v1/embeddings", {"input": "y" * (MAX_BODY + 10)})
        self.assertEqual(code, 413)
        self.assert_error_shape(json.loads(text), 413, None,
                                "--http-max-body-bytes")

    def test_concurrent_requests_share_the_batcher_with_grpc(self):
        """Parallel HTTP and gRPC calls: every answer is its input's own."""
        from concurrent.futures import ThreadPoolExecutor
        inputs = [[7 + i, 20 + i, 30 + 2 * i] for i in range(12)]
        expected = [self.grpc_embed("raw", [ids])[0][0] for ids in inputs]

        def over_http(i):
            reply, _ = self.embeddings({"model": "raw", "input": [inputs[i]]})
            return np.array(reply["data"][0]["embedding"], dtype=np.float32)

        def over_grpc(i):
            return self.grpc_embed("raw", [inputs[i]])[0][0]

        with ThreadPoolExecutor(max_workers=24) as pool:
            http = [pool.submit(over_http, i) for i in range(12)]
            rpc = [pool.submit(over_grpc, i) for i in range(12)]
            for i in range(12):
                np.testing.assert_allclose(http[i].result(), expected[i],
                                           rtol=0, atol=1e-5)
                np.testing.assert_allclose(rpc[i].result(), expected[i],
                                           rtol=0, atol=1e-5)

    def test_response_over_the_send_limit_is_413(self):
        reply, _ = self.assert_error({"input": ["a", "b", "c"]}, 413, None,
                                     "--max-send-message-bytes")
        self.assertEqual(reply["error"]["code"], "resource_exhausted")
        with self.assertRaises(grpc.RpcError) as caught:
            self.grpc_embed("", ["a", "b", "c"])
        self.assertEqual(caught.exception.code(),
                         grpc.StatusCode.RESOURCE_EXHAUSTED)

    def test_authentication(self):
        for token, words in ((None, "missing"), ("wrong", "not accepted")):
            reply, headers = self.assert_error(
                {"input": "x"}, 401, None, words, token=token)
            self.assertEqual(headers.get("www-authenticate"), "Bearer")
            code, _, _ = self.http("GET", "/v1/models", token=token)
            self.assertEqual(code, 401)
            code, _, _ = self.http("GET", "/info", token=token)
            self.assertEqual(code, 401)
        # Probes and /metrics stay open (no --auth-health).
        self.assertEqual(self.http("GET", "/health", token=None)[0], 200)
        self.assertEqual(self.http("GET", "/ready", token=None)[0], 200)
        self.assertEqual(self.http("GET", "/metrics", token=None)[0], 200)

    def test_models_ready_health(self):
        code, _, text = self.http("GET", "/v1/models")
        self.assertEqual(code, 200)
        listed = json.loads(text)
        self.assertEqual(listed["object"], "list")
        self.assertEqual([m["id"] for m in listed["data"]],
                         [m["name"] for m in REPOSITORY["models"]])
        for m in listed["data"]:
            self.assertEqual(m["object"], "model")
            self.assertEqual(set(m), {"id", "object", "created", "owned_by"})
        code, _, text = self.http("GET", "/v1/models/raw")
        self.assertEqual((code, json.loads(text)["id"]), (200, "raw"))
        code, _, text = self.http("GET", "/v1/models/nope")
        self.assertEqual(code, 404)
        self.assertEqual(json.loads(text)["error"]["code"], "model_not_found")
        self.assertEqual(self.http("GET", "/health")[0], 200)
        code, _, text = self.http("GET", "/ready")
        self.assertEqual((code, json.loads(text)["status"]), (200, "ready"))
        self.assertEqual(self.http("GET", "/ready/raw")[0], 200)
        self.assertEqual(self.http("GET", "/ready/nope")[0], 404)
        code, headers, text = self.http("GET", "/nowhere")
        self.assertEqual(code, 404)
        self.assertIn("/v1/embeddings", json.loads(text)["error"]["message"])
        code, headers, _ = self.http("GET", "/v1/embeddings")
        self.assertEqual((code, headers.get("allow")), (405, "POST"))

    def test_pipelined_requests_are_answered_in_order(self):
        bodies = [json.dumps({"model": "raw", "input": [[7 + i, 9]]}).encode()
                  for i in range(3)]
        data = b"".join(post("/v1/embeddings", b) for b in bodies)
        data += b"GET /health HTTP/1.1\r\nHost: t\r\n\r\n"
        replies, closed = raw_exchange(self.server.http_port, data, 4)
        self.assertEqual([r[0] for r in replies], [200, 200, 200, 200])
        self.assertFalse(closed)
        for i in range(3):
            got = json.loads(replies[i][2])["data"][0]["embedding"]
            want = self.grpc_embed("raw", [[7 + i, 9]])[0][0]
            np.testing.assert_allclose(got, want, rtol=0, atol=1e-5)
        self.assertEqual(json.loads(replies[3][2])["status"], "ok")

    def test_framing_attacks_are_refused(self):
        body = json.dumps({"model": "raw", "input": [[7, 9]]}).encode()
        # Two different lengths: RFC 9112 says 400 (a proxy might pick the
        # other one and see a second, smuggled request).
        replies, closed = raw_exchange(
            self.server.http_port,
            post("/v1/embeddings", body, b"Content-Length: 3\r\n"))
        self.assertEqual(replies[0][0], 400)
        self.assertIn("Content-Length", json.loads(replies[0][2])
                      ["error"]["message"])
        self.assertTrue(closed)
        # Content-Length beside chunked.
        replies, closed = raw_exchange(
            self.server.http_port,
            post("/v1/embeddings", b"0\r\n\r\n",
                 b"Transfer-Encoding: chunked\r\n"))
        self.assertEqual(replies[0][0], 400)
        self.assertTrue(closed)

    def test_other_methods_are_405_with_allow(self):
        for method in ("PUT", "DELETE", "PATCH"):
            code, headers, text = self.http(method, "/v1/embeddings",
                                            {"input": "x"})
            self.assertEqual(code, 405, method)
            self.assertEqual(headers.get("allow"), "POST")
            self.assert_error_shape(json.loads(text), 405)
            self.assertEqual(json.loads(text)["error"]["code"],
                             "method_not_allowed")
        code, headers, _ = self.http("DELETE", "/v1/models")
        self.assertEqual((code, headers.get("allow")), (405, "GET, HEAD"))

    def test_info_models_equal_list_models(self):
        # Both fronts render one report per model: every field of gRPC's
        # ModelInfo is in /info's model entry, under the same name (or the
        # spelling /info had first), with the same value. A field added to
        # one front only fails here.
        # A server of its own: this one's send limit (MAX_SEND) is below
        # ListModels' answer.
        tmp = tempfile.TemporaryDirectory(prefix="encoder-http-info-")
        self.addCleanup(tmp.cleanup)
        server, _ = start_server(tmp.name, max_send="64MiB")
        self.addCleanup(server.stop)
        channel = grpc.insecure_channel(f"127.0.0.1:{server.port}")
        self.addCleanup(channel.close)
        stub = self.pb2_grpc.EncoderServiceStub(channel)
        auth = (("authorization", f"Bearer {TOKEN}"),)
        listed = stub.ListModels(self.pb2.ListModelsRequest(), timeout=60,
                                 metadata=auth)
        code, _, text = Http(server.http_port)("GET", "/info")
        self.assertEqual(code, 200, text)
        entries = {m["name"]: m for m in json.loads(text)["models"]}
        self.assertEqual(sorted(entries), sorted(m.name for m in listed.models))
        renamed = {"pooled_dim": ("dimensions",),
                   "onednn_isa": ("kernels", "onednn_isa"),
                   "mkl_isa": ("kernels", "mkl_isa")}

        def plain(message):
            out = {}
            for field in message.DESCRIPTOR.fields:
                value = getattr(message, field.name)
                if field.message_type is not None and \
                        field.message_type.GetOptions().map_entry:
                    value = dict(value)
                elif field.label == field.LABEL_REPEATED:
                    value = [plain(v) if field.message_type else v
                             for v in value]
                elif field.message_type is not None:
                    value = plain(value)
                elif field.enum_type is not None:
                    value = field.enum_type.values_by_number[value].name
                out[field.name] = value
            return out

        compared = 0
        for model in listed.models:
            entry = entries[model.name]
            for name, want in plain(model).items():
                compared += 1
                # An unset framing (a model that is not ColBERT), or a
                # reach not measured (--long-input is not auto), is null.
                if name in ("colbert", "measured_reach") and \
                        not model.HasField(name):
                    want = None
                got = entry
                for key in renamed.get(name, (name,)):
                    self.assertIn(key, got, (model.name, name))
                    got = got[key]
                if name == "dtype":
                    want = want.removeprefix("DTYPE_").lower()
                elif name == "kernels":
                    got = [k for k in got["ran"]]
                    self.assertEqual(len(got), len(want), model.name)
                    continue
                if isinstance(want, float):
                    self.assertAlmostEqual(got, want, places=5,
                                           msg=(model.name, name))
                elif name == "batching":
                    for key, value in want.items():
                        if isinstance(value, float):
                            self.assertAlmostEqual(got[key], value, places=3,
                                                   msg=(model.name, key))
                        else:
                            self.assertEqual(got[key], value,
                                             (model.name, key))
                elif name == "positional":
                    for key, value in want.items():
                        if key == "alibi_slopes":
                            np.testing.assert_allclose(got[key], value,
                                                       rtol=1e-6)
                        else:
                            self.assertEqual(got[key], value,
                                             (model.name, key))
                else:
                    self.assertEqual(got, want, (model.name, name))
        # Every ModelInfo field of every model (51 fields, 3 models).
        self.assertEqual(compared, len(listed.models) *
                         len(self.pb2.ModelInfo.DESCRIPTOR.fields))
        self.assertGreaterEqual(compared, 3 * 50)

    def test_info(self):
        code, _, text = self.http("GET", "/info")
        self.assertEqual(code, 200)
        info = json.loads(text)
        self.assertEqual(info["version"], project_version())
        self.assertEqual(info["state"], "ready")
        self.assertEqual(info["default_model"], "unit")
        self.assertIn("grpc", info["build"])
        # The commit is git's own answer for this checkout (a binary built
        # before a later commit names an ancestor of HEAD).
        commit = info["build"]["commit"]
        git = subprocess.run(
            ["git", "-C", HERE, "merge-base", "--is-ancestor", commit, "HEAD"],
            capture_output=True)
        if commit != "unknown":
            self.assertEqual(git.returncode, 0, f"commit {commit!r}")
        self.assertIn(info["build"]["build_type"],
                      {"Release", "RelWithDebInfo", "Debug", "MinSizeRel"})
        self.assertTrue(
            info["build"]["libtorch"].startswith(ARGS.libtorch_version + "."),
            (info["build"]["libtorch"], ARGS.libtorch_version))
        self.assertEqual(info["limits"]["max_inputs_per_request"], MAX_INPUTS)
        self.assertEqual(info["limits"]["http_max_body_bytes"], MAX_BODY)
        self.assertGreater(info["limits"]["batch_memory_budget_bytes"], 0)
        models = {m["name"]: m for m in info["models"]}
        self.assertEqual(set(models),
                         {m["name"] for m in REPOSITORY["models"]})
        for m in models.values():
            self.assertEqual(m["dimensions"], TINY["d_model"])
            self.assertEqual(m["max_input_tokens"], MAX_TOKENS)
            self.assertEqual(m["scheme"], "sinusoidal")
            self.assertTrue(m["accepts_text"])
        self.assertTrue(models["unit"]["normalize"])
        self.assertFalse(models["raw"]["normalize"])

    def test_metrics_count_http_requests_apart(self):
        self.embeddings({"model": "raw", "input": "count me"})
        self.assert_error({"model": "nope", "input": "x"}, 404)
        code, headers, text = self.http("GET", "/metrics", token=None)
        self.assertEqual(code, 200)
        self.assertTrue(headers["content-type"].startswith("text/plain"))
        counts = {}
        for line in text.splitlines():
            m = re.match(r'encoder_requests_total\{(.*)\} (\S+)$', line)
            if m:
                labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1)))
                counts[(labels["rpc"], labels["model"], labels["code"])] = \
                    float(m.group(2))
        self.assertGreaterEqual(
            counts[("http:/v1/embeddings", "raw", "OK")], 1)
        self.assertGreaterEqual(
            counts[("http:/v1/embeddings", "", "NOT_FOUND")], 1)
        # gRPC calls are counted under their own rpc.
        self.grpc_embed("raw", ["x"])
        text = self.http("GET", "/metrics", token=None)[2]
        self.assertRegex(text, r'encoder_requests_total\{[^}]*rpc="Embed"')


class BodyLimitTest(unittest.TestCase):
    """A body over --http-max-body-bytes, sent chunked so that no length
    announces it: the server stops it while it arrives, and its resident
    memory grows by at most twice the limit."""
    LIMIT = 8 << 20
    UPLOAD = 64 << 20

    def test_chunked_body_over_the_limit(self):
        with tempfile.TemporaryDirectory(prefix="encoder-http-body-") as d:
            server, _ = start_server(d, max_body=self.LIMIT)
            try:
                self.run_upload(server)
            finally:
                server.stop()

    def run_upload(self, server):
        pid = server.process.pid
        base = rss_bytes(pid)
        peak = [base]
        stop = threading.Event()

        def sample():
            while not stop.is_set():
                peak[0] = max(peak[0], rss_bytes(pid))
                time.sleep(0.002)

        sampler = threading.Thread(target=sample)
        sampler.start()
        sock = socket.create_connection(("127.0.0.1", server.http_port),
                                        timeout=60)
        sent = 0
        status = None
        try:
            sock.sendall((f"POST /v1/embeddings HTTP/1.1\r\nHost: t\r\n"
                          f"Authorization: Bearer {TOKEN}\r\n"
                          "Transfer-Encoding: chunked\r\n\r\n").encode())
            chunk = b"10000\r\n" + b"[" * 0x10000 + b"\r\n"
            try:
                while sent < self.UPLOAD:
                    sock.sendall(chunk)
                    sent += 0x10000
            except (BrokenPipeError, ConnectionResetError):
                pass
            reply = b""
            try:
                while b"\r\n\r\n" not in reply:
                    data = sock.recv(65536)
                    if not data:
                        break
                    reply += data
            except ConnectionResetError:
                pass
            if reply:
                status = int(reply.split(b" ", 2)[1])
        finally:
            sock.close()
            time.sleep(0.2)
            stop.set()
            sampler.join()
        growth = peak[0] - base
        print(f"chunked upload: {sent >> 20} MiB of {self.UPLOAD >> 20} "
              f"sent, answer {status}; RSS {base >> 20} -> peak "
              f"{peak[0] >> 20} MiB (growth {growth / 2**20:.1f} MiB, limit "
              f"{2 * self.LIMIT >> 20})", file=sys.stderr)
        self.assertEqual(status, 413)
        self.assertLess(sent, self.UPLOAD, "the server read the whole body")
        self.assertLessEqual(growth, 2 * self.LIMIT)
        # The server goes on serving.
        code, _, _ = Http(server.http_port)("GET", "/health")
        self.assertEqual(code, 200)


class DrainTest(unittest.TestCase):
    def test_draining_answers_503(self):
        with tempfile.TemporaryDirectory(prefix="encoder-http-drain-") as d:
            server, _ = start_server(d, ["--drain-unready=4s"])
            http = Http(server.http_port)
            try:
                self.assertEqual(http("GET", "/ready")[0], 200)
                server.process.send_signal(signal.SIGTERM)
                deadline = time.monotonic() + 3
                while time.monotonic() < deadline:
                    if http("GET", "/ready")[0] == 503:
                        break
                    time.sleep(0.05)
                code, _, text = http("GET", "/ready")
                self.assertEqual((code, json.loads(text)["status"]),
                                 (503, "draining"))
                code, headers, text = http("POST", "/v1/embeddings",
                                           {"input": "late"})
                self.assertEqual(code, 503)
                self.assertEqual(json.loads(text)["error"]["type"],
                                 "service_unavailable")
                self.assertEqual(headers.get("retry-after"), "1")
                self.assertEqual(server.process.wait(timeout=60), 0)
            finally:
                server.stop()


class OpenAiClientTest(Fixture):
    """The official OpenAI Node client against the front."""

    def run_client(self, request, token=TOKEN):
        script = os.path.join(HERE, "openai_client.js")
        env = dict(os.environ, NODE_PATH=os.path.join(ARGS.openai_dir,
                                                      "node_modules"))
        out = subprocess.run(
            [ARGS.node, script, f"http://127.0.0.1:{self.server.http_port}/v1",
             token, json.dumps(request)],
            capture_output=True, text=True, timeout=120, env=env)
        self.assertEqual(out.returncode, 0, out.stderr)
        return json.loads(out.stdout)

    def test_embeddings_create(self):
        # The client asks for base64 by default and decodes it itself.
        reply = self.run_client({"model": "unit", "input": TEXTS})
        self.assertEqual(reply["model"], "unit")
        expected, tokens = self.grpc_embed("unit", TEXTS)
        self.assertEqual(reply["usage"]["prompt_tokens"], sum(tokens))
        for i, item in enumerate(reply["data"]):
            self.assertEqual(item["index"], i)
            np.testing.assert_allclose(item["embedding"], expected[i],
                                       rtol=0, atol=1e-6)

    def test_float_format_and_dimensions(self):
        reply = self.run_client({"model": "raw", "input": [[4, 5, 6]],
                                 "encoding_format": "float",
                                 "dimensions": 5})
        full, _ = self.grpc_embed("raw", [[4, 5, 6]])
        cut = full[0][:5].astype(np.float64)
        np.testing.assert_allclose(reply["data"][0]["embedding"],
                                   cut / np.linalg.norm(cut), rtol=0,
                                   atol=1e-6)

    def test_errors_reach_the_client(self):
        reply = self.run_client({"model": "nope", "input": "x"})
        self.assertEqual(reply["error_status"], 404)
        self.assertIn("available: unit, raw", reply["error_message"])
        reply = self.run_client({"input": "x"}, token="wrong")
        self.assertEqual(reply["error_status"], 401)


def main():
    global ARGS
    parser = argparse.ArgumentParser()
    parser.add_argument("--server", required=True)
    parser.add_argument("--python-client", required=True)
    parser.add_argument("--node", default="node")
    parser.add_argument("--openai-dir", default=HERE)
    parser.add_argument("--libtorch-version", required=True)
    ARGS, rest = parser.parse_known_args()
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)


if __name__ == "__main__":
    main()
