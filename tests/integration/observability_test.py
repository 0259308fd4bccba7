#!/usr/bin/python3
"""The server's access log, request ids, traceparent echo, log rate limit
and build/input-length metrics, seen from outside: a real encoder-server
run with --log-format json, called with the real gRPC Python library, its
stdout parsed line by line as JSON.

Expected values come from the test's own inputs: the built-in models'
byte tokenizer gives len(UTF-8 bytes) + 2 tokens per text ([CLS] ... [SEP]),
token-id inputs have as many tokens as ids.

Usage: observability_test.py --server BIN --python-client CLIENT.py
"""
import argparse
import datetime
import importlib.util
import json
import os
import re
import sys
import tempfile
import time
import unittest
import urllib.request

import grpc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from server_process import ServerProcess  # noqa: E402

ARGS = None
TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
HEX32 = re.compile(r"^[0-9a-f]{32}$")
ACCESS_KEYS = {"ts", "level", "msg", "protocol", "method", "model", "inputs",
               "tokens", "status", "queue_ms", "inference_ms", "total_ms",
               "request_id", "peer"}


def load_client():
    spec = importlib.util.spec_from_file_location("client", ARGS.python_client)
    client = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(client)
    return client


def read_json_lines(path):
    """Every line of the log that is a JSON object (gRPC's own C-core lines
    on stderr are not ours)."""
    lines = []
    with open(path, errors="replace") as f:
        for line in f:
            line = line.strip()
            if line.startswith("{"):
                lines.append(json.loads(line))
    return lines


def scrape(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics",
                                timeout=10) as r:
        return r.read().decode()


def sample(text, name, labels):
    """The value of the sample `name` whose labels include `labels`."""
    for line in text.splitlines():
        if not line.startswith(name + "{") and line.split(" ")[0] != name:
            continue
        m = re.match(r"^([a-z_]+)(?:\{(.*)\})? (\S+)$", line)
        if m is None or m.group(1) != name:
            continue
        found = dict(re.findall(r'(\w+)="([^"]*)"', m.group(2) or ""))
        if all(found.get(k) == v for k, v in labels.items()):
            return float(m.group(3))
    return None


class ObservabilityTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="encoder-obs-")
        client = load_client()
        cls.pb2, cls.pb2_grpc = client.load_stubs(cls.tmp.name)
        cls.server = ServerProcess(
            ARGS.server, directory=cls.tmp.name,
            extra_args=["--log-format=json", "--metrics-listen=127.0.0.1:0",
                        "--log-rate-limit=3", "--max-request-id-bytes=64"])
        cls.server.wait_ready(300)
        with open(cls.server.ready_file) as f:
            cls.metrics_port = json.load(f)["metrics_port"]
        cls.channel = grpc.insecure_channel(f"127.0.0.1:{cls.server.port}")
        cls.stub = cls.pb2_grpc.EncoderServiceStub(cls.channel)

    @classmethod
    def tearDownClass(cls):
        cls.channel.close()
        cls.server.stop()
        cls.tmp.cleanup()

    def access_lines(self, request_id=None, method=None, count=1,
                     timeout=10):
        """Waits for `count` access lines matching request_id / method."""
        deadline = time.monotonic() + timeout
        while True:
            self.server.log.flush()
            found = [l for l in read_json_lines(self.server.log_path)
                     if l.get("msg") == "access"
                     and (request_id is None or l["request_id"] == request_id)
                     and (method is None or l["method"] == method)]
            if len(found) >= count or time.monotonic() > deadline:
                return found
            time.sleep(0.1)

    def check_common(self, line, method, status):
        self.assertTrue(ACCESS_KEYS <= set(line), line)
        self.assertEqual(line["protocol"], "grpc")
        self.assertEqual(line["method"], method)
        self.assertEqual(line["status"], status)
        self.assertEqual(line["level"], "info" if status == "OK" else
                         "warning")
        self.assertTrue(line["peer"].startswith("ipv4:127.0.0.1:"), line)
        ts = datetime.datetime.strptime(line["ts"], "%Y-%m-%dT%H:%M:%S.%fZ")
        now = datetime.datetime.utcnow()
        self.assertLess(abs((now - ts).total_seconds()), 120)
        for key in ("queue_ms", "inference_ms", "total_ms"):
            self.assertGreaterEqual(line[key], 0)

    def embed(self, request, metadata=()):
        return self.stub.Embed.with_call(request, metadata=metadata,
                                         timeout=60)

    def text_request(self, texts, model="rope", request_id=""):
        request = self.pb2.EmbedRequest(model=model, request_id=request_id)
        for t in texts:
            request.inputs.add().text = t
        return request

    def test_embed_ok_logs_every_field_and_echoes_ids(self):
        texts = ["héllo", "x" * 300]
        request = self.text_request(texts, request_id="req-field-1")
        response, call = self.embed(
            request, metadata=[("x-request-id", "from-metadata"),
                               ("traceparent", TRACEPARENT)])
        initial = dict(call.initial_metadata())
        # The request's own id comes before the metadata's.
        self.assertEqual(initial["x-request-id"], "req-field-1")
        self.assertEqual(initial["traceparent"], TRACEPARENT)
        [line] = self.access_lines("req-field-1")
        self.check_common(line, "Embed", "OK")
        self.assertEqual(line["model"], "rope")
        self.assertEqual(line["inputs"], 2)
        expected_tokens = sum(len(t.encode()) + 2 for t in texts)
        self.assertEqual(line["tokens"], expected_tokens)
        self.assertEqual(
            line["tokens"], sum(r.num_tokens for r in response.results))
        self.assertEqual(line["traceparent"], TRACEPARENT)
        self.assertNotIn("error", line)
        self.assertGreater(line["inference_ms"], 0)
        self.assertGreaterEqual(line["total_ms"], line["inference_ms"])

    def test_metadata_request_id_and_malformed_traceparent(self):
        request = self.text_request(["abc"])
        _, call = self.embed(request, metadata=[
            ("x-request-id", "meta-id-7"),
            # Upper-case hex is not a valid traceparent: ignored.
            ("traceparent",
             "00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-01")])
        initial = dict(call.initial_metadata())
        self.assertEqual(initial["x-request-id"], "meta-id-7")
        self.assertNotIn("traceparent", initial)
        [line] = self.access_lines("meta-id-7")
        self.check_common(line, "Embed", "OK")
        self.assertNotIn("traceparent", line)
        self.assertEqual(line["tokens"], 5)

    def test_generated_request_id(self):
        _, call = self.embed(self.text_request(["generated"]))
        generated = dict(call.initial_metadata())["x-request-id"]
        self.assertRegex(generated, HEX32)
        [line] = self.access_lines(generated)
        self.check_common(line, "Embed", "OK")
        # A request id the server cannot echo (too long) is replaced.
        _, call = self.embed(self.text_request(["long"]),
                             metadata=[("x-request-id", "a" * 200)])
        self.assertRegex(dict(call.initial_metadata())["x-request-id"], HEX32)
        # --max-request-id-bytes=64: 64 bytes are echoed, 65 are replaced
        # (the default, 128, would echo both).
        _, call = self.embed(self.text_request(["at the limit"]),
                             metadata=[("x-request-id", "b" * 64)])
        self.assertEqual(dict(call.initial_metadata())["x-request-id"],
                         "b" * 64)
        _, call = self.embed(self.text_request(["over the limit"]),
                             metadata=[("x-request-id", "c" * 65)])
        self.assertRegex(dict(call.initial_metadata())["x-request-id"], HEX32)

    def test_failed_call_logs_status_and_error(self):
        request = self.text_request(["abc"], model="no-such-model",
                                    request_id="bad-model-1")
        with self.assertRaises(grpc.RpcError) as raised:
            self.embed(request, metadata=[("traceparent", TRACEPARENT)])
        error = raised.exception
        self.assertEqual(error.code(), grpc.StatusCode.NOT_FOUND)
        # A call that fails without a response still carries the ids, in
        # a trailers-only answer: no initial metadata, so gRPC's retry
        # policies take the call as not committed (a draining server's
        # UNAVAILABLE is retried elsewhere).
        self.assertEqual(dict(error.initial_metadata()), {})
        echoed = dict(error.trailing_metadata())
        self.assertEqual(echoed["x-request-id"], "bad-model-1")
        self.assertEqual(echoed["traceparent"], TRACEPARENT)
        [line] = self.access_lines("bad-model-1")
        self.check_common(line, "Embed", "NOT_FOUND")
        self.assertEqual(line["model"], "no-such-model")
        self.assertIn("no-such-model", line["error"])
        self.assertEqual(line["inputs"], 1)
        self.assertEqual(line["tokens"], 0)

        request = self.pb2.EmbedRequest(model="rope", request_id="empty-1")
        with self.assertRaises(grpc.RpcError) as raised:
            self.embed(request)
        self.assertEqual(raised.exception.code(),
                         grpc.StatusCode.INVALID_ARGUMENT)
        [line] = self.access_lines("empty-1")
        self.check_common(line, "Embed", "INVALID_ARGUMENT")
        self.assertEqual(line["inputs"], 0)
        self.assertEqual(line["error"], raised.exception.details())

    def test_other_methods(self):
        md = [("x-request-id", "tok-1")]
        response, _ = self.stub.Tokenize.with_call(
            self.pb2.TokenizeRequest(model="alibi", texts=["ab", "cde"]),
            metadata=md, timeout=30)
        [line] = self.access_lines("tok-1")
        self.check_common(line, "Tokenize", "OK")
        self.assertEqual((line["model"], line["inputs"], line["tokens"]),
                         ("alibi", 2, (2 + 2) + (3 + 2)))

        decode = self.pb2.DecodeRequest(model="alibi")
        decode.inputs.add().ids.extend([1, 4 + ord("h"), 4 + ord("i"), 2])
        self.stub.Decode(decode, metadata=[("x-request-id", "dec-1")],
                         timeout=30)
        [line] = self.access_lines("dec-1")
        self.check_common(line, "Decode", "OK")
        self.assertEqual((line["inputs"], line["tokens"]), (1, 4))
        bad = self.pb2.DecodeRequest(model="alibi")
        bad.inputs.add().ids.extend([1, 99999999])
        with self.assertRaises(grpc.RpcError):
            self.stub.Decode(bad, metadata=[("x-request-id", "dec-2")],
                             timeout=30)
        [line] = self.access_lines("dec-2")
        self.check_common(line, "Decode", "INVALID_ARGUMENT")

        self.stub.ListModels(self.pb2.ListModelsRequest(),
                             metadata=[("x-request-id", "list-1")],
                             timeout=30)
        [line] = self.access_lines("list-1")
        self.check_common(line, "ListModels", "OK")

        diagnose = self.pb2.DiagnoseRequest(model="rope", text="abcd",
                                            permutation=True)
        self.stub.Diagnose(diagnose, metadata=[("x-request-id", "diag-1")],
                           timeout=120)
        [line] = self.access_lines("diag-1")
        self.check_common(line, "Diagnose", "OK")
        self.assertEqual((line["model"], line["inputs"], line["tokens"]),
                         ("rope", 1, 4 + 2))
        self.assertGreater(line["inference_ms"], 0)

    def test_stream_logs_each_request(self):
        requests = [
            self.text_request(["one"], request_id="s-own-id"),
            self.text_request(["two"], model="missing"),
            self.text_request(["three!"]),
        ]
        call = self.stub.EmbedStream(
            iter(requests), metadata=[("x-request-id", "stream-9"),
                                      ("traceparent", TRACEPARENT)],
            timeout=60)
        responses = list(call)
        self.assertEqual(len(responses), 3)
        initial = dict(call.initial_metadata())
        self.assertEqual(initial["x-request-id"], "stream-9")
        self.assertEqual(initial["traceparent"], TRACEPARENT)
        lines = {l["request_id"]: l for l in
                 self.access_lines(method="EmbedStream", count=3)
                 if l["request_id"] in ("s-own-id", "stream-9-2",
                                        "stream-9-3")}
        self.assertEqual(set(lines), {"s-own-id", "stream-9-2",
                                      "stream-9-3"})
        self.check_common(lines["s-own-id"], "EmbedStream", "OK")
        self.assertEqual(lines["s-own-id"]["tokens"], 5)
        self.check_common(lines["stream-9-2"], "EmbedStream", "NOT_FOUND")
        self.check_common(lines["stream-9-3"], "EmbedStream", "OK")
        self.assertEqual(lines["stream-9-3"]["tokens"], 8)
        for line in lines.values():
            self.assertEqual(line["traceparent"], TRACEPARENT)

    def test_repeated_errors_are_rate_limited(self):
        # --log-rate-limit=3: at most 3 lines per second for one method,
        # status and message; OK lines are never held back.
        burst = 40
        start = time.monotonic()
        for i in range(burst):
            with self.assertRaises(grpc.RpcError):
                self.embed(self.text_request(["x"], model="flood-model",
                                             request_id=f"flood-{i}"))
        elapsed = time.monotonic() - start
        for i in range(burst):
            self.embed(self.text_request(["y"], request_id=f"fine-{i}"))

        def flood_state():
            lines = read_json_lines(self.server.log_path)
            logged = [l for l in lines if l.get("msg") == "access"
                      and l["request_id"].startswith("flood-")]
            summaries = [l for l in lines if "suppressed" in l
                         and "flood-model" in l["key"]]
            return logged, summaries

        # The summary comes once the one-second window ends (the server
        # flushes every second).
        deadline = time.monotonic() + 10
        while True:
            logged, summaries = flood_state()
            if (len(logged) + sum(s["suppressed"] for s in summaries) ==
                    burst or time.monotonic() > deadline):
                break
            time.sleep(0.2)
        windows = int(elapsed) + 2
        self.assertGreaterEqual(len(logged), 3)
        self.assertLessEqual(len(logged), 3 * windows)
        self.assertTrue(summaries)
        for s in summaries:
            self.assertEqual(s["level"], "warning")
            self.assertRegex(s["msg"], r"^suppressed \d+ similar log lines: ")
        self.assertEqual(
            len(logged) + sum(s["suppressed"] for s in summaries), burst)
        fine = self.access_lines(count=burst)
        self.assertEqual(
            len([l for l in fine if l["request_id"].startswith("fine-")]),
            burst)
        print(f"{burst} failing calls in {elapsed:.2f} s: {len(logged)} "
              f"logged, {burst - len(logged)} in {len(summaries)} summaries")

    def test_metrics_build_info_and_input_tokens(self):
        def histogram(text):
            return {le: sample(text, "encoder_input_tokens_bucket",
                               {"model": "learned", "le": le})
                    for le in ("4", "8", "16", "64", "128", "+Inf")}
        before_text = scrape(self.metrics_port)
        before = histogram(before_text)
        before_sum = sample(before_text, "encoder_input_tokens_sum",
                            {"model": "learned"})
        # 3 + 2, 10 + 2 and 100 + 2 tokens.
        self.embed(self.text_request(["abc", "a" * 10, "b" * 100],
                                     model="learned"))
        after_text = scrape(self.metrics_port)
        after = histogram(after_text)
        delta = {le: after[le] - before[le] for le in after}
        self.assertEqual(delta, {"4": 0, "8": 1, "16": 2, "64": 2,
                                 "128": 3, "+Inf": 3})
        self.assertEqual(
            sample(after_text, "encoder_input_tokens_sum",
                   {"model": "learned"}) - before_sum, 5 + 12 + 102)
        le_values = set(re.findall(
            r'encoder_input_tokens_bucket\{[^}]*model="learned"[^}]*'
            r'le="([^"]+)"', after_text))
        self.assertEqual(le_values,
                         {str(2 ** i) for i in range(14)} | {"+Inf"})

        version = run_version()
        self.assertEqual(sample(after_text, "encoder_build_info", {
            "version": version["encoder-server"],
            "commit": version["commit"],
            "libtorch": version["LibTorch"],
            "compiler": version["compiler"]}), 1)


def run_version():
    """--version as {first word: rest} ("encoder-server": version)."""
    import subprocess
    result = subprocess.run([ARGS.server, "--version"], capture_output=True,
                            text=True, timeout=60, check=True)
    fields = {}
    lines = result.stdout.strip().splitlines()
    name, version = lines[0].split(" ", 1)
    fields[name] = version
    for line in lines[1:]:
        key, value = line.split(": ", 1)
        fields[key] = value
    return fields


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--server", required=True)
    parser.add_argument("--python-client", required=True)
    ARGS, rest = parser.parse_known_args()
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)
