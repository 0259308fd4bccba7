#!/usr/bin/env python3
"""encoder-hub (server/hub) against huggingface_hub, on a stand-in Hub.

Runs in the project's Python environment (.venv): huggingface_hub is the
reference for the cache it writes and reads; fake_hub.py serves the
repositories. Every huggingface_hub call runs in a child Python with
HF_ENDPOINT / HF_HUB_OFFLINE set before the library is imported, as a
user's would.

  a. encoder-hub download fills a fresh cache with exactly the model's
     files; snapshot_download(local_files_only) finds them,
     try_to_load_from_cache gives each file's bytes, scan_cache_dir sees one
     clean repository, and hf_hub_download online re-links a file from our
     blob without fetching it (the blob is named as it names it);
  b. huggingface_hub's snapshot_download fills a cache; encoder-hub
     resolve finds the snapshot with no server, and download does with
     HF_HUB_OFFLINE=1;
  c. a download cut mid-file leaves no snapshot link to a partial blob
     and no ref; the next run resumes with a Range request and the file's
     sha256 is right; with retries on, one run recovers by itself;
  d. bad inputs: unknown repository, unknown revision, gated without a
     token (names HF_TOKEN) and with one, no server (UNAVAILABLE, names
     HF_HUB_OFFLINE and the cache), PyTorch pickles only (names
     convert_to_safetensors.py), a corrupted LFS payload (DATA_LOSS, no
     blob kept), a stalled transfer (DEADLINE_EXCEEDED under the
     low-speed limit), a malformed id, offline with an empty cache;
  e. two downloads at once into one empty cache: both succeed and the
     file is fetched once; a lock held by Python's filelock (what
     huggingface_hub locks with) holds encoder-hub off;
  f. a branch writes refs/<branch>; a commit hash resolves without refs;
  g. encoder-hub import lays a directory out under the Hub's etags (sha256
     for LFS files, git blob sha1 for others); huggingface_hub finds it
     offline; a later download moves refs/main to the Hub's commit without
     fetching any file's bytes; importing over another revision's ref is
     refused (exit 3).

Also prints the loopback download rate of a 200 MB LFS file (not asserted).

Usage: hub_test.py --tool build/encoder-hub
"""
import argparse
import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
import unittest

import numpy as np
from safetensors.numpy import save as save_safetensors

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fake_hub  # noqa: E402

TOOL = None
BIG_BYTES = 200 * 1000 * 1000

# The files of the tiny repository the library must fetch (config,
# tokenizer, sentence-transformers modules, safetensors), and those it
# must leave (pickles, ONNX, README).
TINY_WANTED = sorted([
    "config.json", "tokenizer.json", "tokenizer_config.json", "vocab.txt",
    "special_tokens_map.json", "modules.json", "sentence_bert_config.json",
    "config_sentence_transformers.json", "1_Pooling/config.json",
    "model.safetensors"])
TINY_LEFT = ["pytorch_model.bin", "onnx/model.onnx", "README.md",
             "1_Pooling/extra/notes.json"]


def tiny_files(seed):
    rng = np.random.default_rng(seed)
    weights = save_safetensors({
        "embeddings.word_embeddings.weight":
            rng.standard_normal((32, 16)).astype(np.float32),
        "pooler.dense.bias": rng.standard_normal(16).astype(np.float32)})
    return {
        "config.json": json.dumps({"model_type": "bert", "hidden_size": 16,
                                   "seed": seed}).encode(),
        "tokenizer.json": json.dumps({"version": "1.0", "model": {}}).encode(),
        "tokenizer_config.json": b'{"do_lower_case": true}',
        "special_tokens_map.json": b'{"cls_token": "[CLS]"}',
        "vocab.txt": b"[PAD]\n[UNK]\n[CLS]\n[SEP]\nhello\n",
        "modules.json": json.dumps([
            {"idx": 0, "name": "0", "path": "",
             "type": "sentence_transformers.models.Transformer"},
            {"idx": 1, "name": "1", "path": "1_Pooling",
             "type": "sentence_transformers.models.Pooling"},
            {"idx": 2, "name": "2", "path": "2_Normalize",
             "type": "sentence_transformers.models.Normalize"}]).encode(),
        "sentence_bert_config.json": b'{"max_seq_length": 128}',
        "config_sentence_transformers.json": b'{"similarity_fn_name": "cosine"}',
        "1_Pooling/config.json": b'{"word_embedding_dimension": 16, '
                                 b'"pooling_mode_mean_tokens": true}',
        "1_Pooling/extra/notes.json": b"{}",
        "model.safetensors": weights,
        "pytorch_model.bin": rng.bytes(4096),
        "onnx/model.onnx": rng.bytes(4096),
        "README.md": b"# tiny\n",
    }


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def closed_port():
    """A local port with no listener (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def snapshot_files(snapshot):
    out = []
    for d, _, names in os.walk(snapshot):
        for n in names:
            out.append(os.path.relpath(os.path.join(d, n), snapshot))
    return sorted(out)


class HubTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="encoder-hub-test-")
        root = os.path.join(cls.tmp, "repos")
        cls.files = {}

        def repo(repo_id, files, lfs, **kw):
            cls.files[repo_id] = files
            return fake_hub.write_repo(root, repo_id, files, lfs, **kw)

        lfs = ["model.safetensors", "pytorch_model.bin", "onnx/model.onnx"]
        cls.tiny_commit = repo("acme/tiny-encoder", tiny_files(1), lfs,
                               branches=("main", "dev"))
        repo("acme/gated-encoder", tiny_files(2), lfs, gated=True)
        repo("acme/corrupt-encoder", tiny_files(3), lfs)
        repo("acme/bin-only", {
            "config.json": b'{"model_type": "bert"}',
            "vocab.txt": b"[PAD]\n",
            "pytorch_model.bin": os.urandom(2048)}, ["pytorch_model.bin"])
        rng = np.random.default_rng(7)
        # Each its own payload: the storage finds an object by its sha256.
        for name in ("resumable", "concurrent", "interrupted-once"):
            repo("acme/" + name, {
                "config.json": b'{"model_type": "bert"}',
                "tokenizer.json": b'{"version": "1.0"}',
                "model.safetensors": rng.bytes(8 << 20)},
                ["model.safetensors"])
        # The rate measurement's file is written straight to the stand-in's
        # directory (no copy of 200 MB in memory).
        big = {"config.json": b'{"model_type": "bert"}',
               "tokenizer.json": b'{"version": "1.0"}',
               "model.safetensors": b""}
        repo("acme/big-encoder", big, ["model.safetensors"])
        big_path = os.path.join(root, "acme", "big-encoder", "files",
                                "model.safetensors")
        with open(big_path, "wb") as f:
            block = rng.bytes(8 << 20)
            for _ in range(BIG_BYTES // len(block)):
                f.write(block)
            f.write(block[:BIG_BYTES % len(block)])
        cls.big_sha256 = sha256_file(big_path)
        cls.hub = fake_hub.FakeHub(root).start()
        # The stand-in hashes a file once, on first use: not while the rate
        # is measured.
        cls.hub.repo("acme/big-encoder").digest("model.safetensors")

    @classmethod
    def tearDownClass(cls):
        cls.hub.stop()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    # -- helpers ----------------------------------------------------------
    def cache(self, name):
        path = os.path.join(self.tmp, "cache-" + name)
        shutil.rmtree(path, ignore_errors=True)
        return path

    def env(self, **extra):
        """A clean environment: no token, no offline switch, our endpoint,
        an empty HF_HOME (no token file)."""
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("HF_", "HUGGING"))
               and k != "TRANSFORMERS_OFFLINE"}
        env["HF_HOME"] = os.path.join(self.tmp, "hf-home")
        env["HF_ENDPOINT"] = self.hub.endpoint
        env["HF_HUB_DISABLE_TELEMETRY"] = "1"
        env.update(extra)
        return env

    def tool(self, *args, env=None, ok=True):
        r = subprocess.run([TOOL, *args], capture_output=True, text=True,
                           env=env or self.env(), timeout=120)
        if ok:
            self.assertEqual(r.returncode, 0,
                             "encoder-hub %s: %s" % (" ".join(args), r.stderr))
        else:
            self.assertNotEqual(r.returncode, 0, r.stdout)
        return r

    def python(self, code, env):
        """Runs `code` in a child Python; returns what it prints as JSON."""
        r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)],
                           capture_output=True, text=True, env=env,
                           timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        return json.loads(r.stdout.strip().splitlines()[-1])

    def repo_dir(self, cache, repo_id):
        return os.path.join(cache, "models--" + repo_id.replace("/", "--"))

    def assert_no_partial_links(self, snapshot_root):
        """Every snapshot entry is a relative link to a whole blob."""
        for d, _, names in os.walk(snapshot_root):
            for n in names:
                link = os.path.join(d, n)
                self.assertTrue(os.path.islink(link), link)
                target = os.readlink(link)
                self.assertFalse(os.path.isabs(target), target)
                self.assertFalse(target.endswith(".incomplete"), target)
                self.assertTrue(os.path.exists(link), link)

    # -- environment --------------------------------------------------------
    def test_0_environment_as_huggingface_hub_reads_it(self):
        home = os.path.join(self.tmp, "home")
        base = {k: v for k, v in os.environ.items()
                if not k.startswith(("HF_", "HUGGING", "XDG_"))
                and k != "TRANSFORMERS_OFFLINE"}
        base["HOME"] = home
        cases = [
            {},
            {"XDG_CACHE_HOME": "/xdg"},
            {"XDG_CACHE_HOME": "/xdg", "HF_HOME": "/hf"},
            {"HF_HOME": "~/hf", "HUGGINGFACE_HUB_CACHE": "/legacy"},
            {"HF_HOME": "/hf", "HUGGINGFACE_HUB_CACHE": "/legacy",
             "HF_HUB_CACHE": "$BASE/models", "BASE": "/data"},
            {"HF_HUB_CACHE": "~/c/${NOPE}", "HF_ENDPOINT": "http://m:1//",
             "HF_HUB_OFFLINE": "yes", "HF_TOKEN_PATH": "~/tok"},
            {"TRANSFORMERS_OFFLINE": "1"},
            {"HF_HUB_OFFLINE": "0", "TRANSFORMERS_OFFLINE": "1"},
        ]
        for case in cases:
            env = dict(base, **case)
            ours = json.loads(self.tool("env", env=env).stdout)
            theirs = self.python("""
                import json
                from huggingface_hub import constants as c
                print(json.dumps({"cache": c.HF_HUB_CACHE,
                                  "endpoint": c.ENDPOINT,
                                  "offline": c.HF_HUB_OFFLINE,
                                  "token_path": c.HF_TOKEN_PATH}))
            """, env)
            self.assertEqual(ours, theirs, case)

    # -- a ----------------------------------------------------------------
    def test_a_download_then_huggingface_hub_reads(self):
        cache = self.cache("a")
        r = self.tool("download", "acme/tiny-encoder", "--cache", cache)
        repo_dir = self.repo_dir(cache, "acme/tiny-encoder")
        snapshot = os.path.join(repo_dir, "snapshots", self.tiny_commit)
        self.assertEqual(r.stdout.strip(), snapshot)
        self.assertEqual(snapshot_files(snapshot), TINY_WANTED)
        self.assert_no_partial_links(os.path.join(repo_dir, "snapshots"))
        for left in TINY_LEFT:
            self.assertEqual(self.hub.requests(
                contains="/acme/tiny-encoder/resolve/%s/%s"
                % (self.tiny_commit, left)), [], left)
        with open(os.path.join(repo_dir, "refs", "main")) as f:
            self.assertEqual(f.read(), self.tiny_commit)
        # Locks where huggingface_hub puts them, one per blob.
        blobs = sorted(os.listdir(os.path.join(repo_dir, "blobs")))
        locks = sorted(os.listdir(os.path.join(
            cache, ".locks", "models--acme--tiny-encoder")))
        self.assertEqual(locks, [b + ".lock" for b in blobs])

        expected = {p: hashlib.sha256(self.files["acme/tiny-encoder"][p])
                    .hexdigest() for p in TINY_WANTED}
        seen = self.python("""
            import hashlib, json
            from huggingface_hub import (scan_cache_dir, snapshot_download,
                                         try_to_load_from_cache)
            cache, files = %r, %r
            snap = snapshot_download("acme/tiny-encoder", revision="main",
                                     cache_dir=cache, local_files_only=True,
                                     allow_patterns=files)
            digests = {}
            for f in files:
                p = try_to_load_from_cache("acme/tiny-encoder", f,
                                           cache_dir=cache, revision="main")
                digests[f] = hashlib.sha256(open(p, "rb").read()).hexdigest()
            info = scan_cache_dir(cache)
            repos = [{"id": r.repo_id, "files": r.nb_files,
                      "refs": sorted(r.refs),
                      "revisions": sorted(v.commit_hash for v in r.revisions)}
                     for r in info.repos]
            print(json.dumps({"snapshot": snap, "digests": digests,
                              "repos": repos,
                              "warnings": [str(w) for w in info.warnings]}))
        """ % (cache, TINY_WANTED), self.env(HF_HUB_OFFLINE="1"))
        self.assertEqual(seen["snapshot"], snapshot)
        self.assertEqual(seen["digests"], expected)
        self.assertEqual(seen["warnings"], [])
        self.assertEqual(seen["repos"], [{
            "id": "acme/tiny-encoder", "files": len(TINY_WANTED),
            "refs": ["main"], "revisions": [self.tiny_commit]}])

        # huggingface_hub online, with a snapshot link removed: its HEAD
        # names the blob by the etag and finds ours, so it links it again
        # without a GET.
        os.unlink(os.path.join(snapshot, "config.json"))
        os.unlink(os.path.join(snapshot, "model.safetensors"))
        before = len(self.hub.log)
        got = self.python("""
            import json
            from huggingface_hub import hf_hub_download
            print(json.dumps([hf_hub_download("acme/tiny-encoder", f,
                                              cache_dir=%r)
                              for f in ("config.json", "model.safetensors")]))
        """ % cache, self.env())
        self.assertEqual(got, [os.path.join(snapshot, "config.json"),
                               os.path.join(snapshot, "model.safetensors")])
        gets = [e for e in self.hub.log[before:] if e["method"] == "GET"]
        self.assertEqual(gets, [])
        self.assertEqual(sorted(os.listdir(os.path.join(repo_dir, "blobs"))),
                         blobs)

    # -- b ----------------------------------------------------------------
    def test_b_huggingface_hub_then_resolve(self):
        cache = self.cache("b")
        snap = self.python("""
            import json
            from huggingface_hub import snapshot_download
            print(json.dumps(snapshot_download("acme/tiny-encoder",
                                               cache_dir=%r)))
        """ % cache, self.env())
        self.assertTrue(snap.endswith("/snapshots/" + self.tiny_commit), snap)
        # No Hub any more: nothing listens at the endpoint.
        dead = self.env(HF_ENDPOINT="http://127.0.0.1:%d" % closed_port())
        before = len(self.hub.log)
        r = self.tool("resolve", "acme/tiny-encoder", "--cache", cache,
                      env=dead)
        self.assertEqual(r.stdout.strip(), snap)
        r = self.tool("resolve", "acme/tiny-encoder@" + self.tiny_commit,
                      "--cache", cache, env=dead)
        self.assertEqual(r.stdout.strip(), snap)
        offline = dict(dead, HF_HUB_OFFLINE="1")
        r = self.tool("download", "acme/tiny-encoder", "--cache", cache,
                      env=offline)
        self.assertEqual(r.stdout.strip(), snap)
        # The cache found through HF_HUB_CACHE, as huggingface_hub finds it.
        r = self.tool("download", "acme/tiny-encoder",
                      env=dict(offline, HF_HUB_CACHE=cache))
        self.assertEqual(r.stdout.strip(), snap)
        self.assertEqual(len(self.hub.log), before)
        # A snapshot missing its weights is not resolved.
        os.unlink(os.path.join(snap, "model.safetensors"))
        r = self.tool("resolve", "acme/tiny-encoder", "--cache", cache,
                      env=dead, ok=False)
        self.assertIn("NOT_FOUND", r.stderr)
        self.assertIn("safetensors", r.stderr)
        self.assertIn(snap, r.stderr)

    # -- c ----------------------------------------------------------------
    def test_c_interrupted_download_resumes(self):
        repo_id = "acme/resumable"
        cache = self.cache("c")
        data = self.files[repo_id]["model.safetensors"]
        sha = hashlib.sha256(data).hexdigest()
        self.hub.drop_after[(repo_id, "model.safetensors")] = [3 << 20, 1]
        r = self.tool("download", repo_id, "--cache", cache, "--retries", "0",
                      ok=False)
        self.assertIn("UNAVAILABLE", r.stderr)
        self.assertIn("resume", r.stderr)
        repo_dir = self.repo_dir(cache, repo_id)
        partial = os.path.join(repo_dir, "blobs", sha + ".incomplete")
        kept = os.path.getsize(partial)
        self.assertGreater(kept, 0)
        self.assertLess(kept, len(data))
        self.assertFalse(os.path.exists(os.path.join(repo_dir, "blobs", sha)))
        self.assert_no_partial_links(os.path.join(repo_dir, "snapshots"))
        self.assertNotIn("model.safetensors", snapshot_files(
            os.path.join(repo_dir, "snapshots")) + [
                os.path.basename(p) for p in snapshot_files(
                    os.path.join(repo_dir, "snapshots"))])
        self.assertFalse(os.path.exists(os.path.join(repo_dir, "refs")))
        before = len(self.hub.log)
        r = self.tool("download", repo_id, "--cache", cache)
        ranges = [e["range"] for e in self.hub.log[before:]
                  if e["server"] == "storage" and e["method"] == "GET"]
        self.assertEqual(ranges, ["bytes=%d-" % kept])
        path = os.path.join(r.stdout.strip(), "model.safetensors")
        self.assertEqual(sha256_file(path), sha)
        self.assertFalse(os.path.exists(partial))

        # With retries (the default), one run resumes by itself.
        repo_id = "acme/interrupted-once"
        sha = hashlib.sha256(
            self.files[repo_id]["model.safetensors"]).hexdigest()
        cache = self.cache("c2")
        self.hub.drop_after[(repo_id, "model.safetensors")] = [3 << 20, 1]
        before = len(self.hub.log)
        r = self.tool("download", repo_id, "--cache", cache)
        ranges = [e["range"] for e in self.hub.log[before:]
                  if e["server"] == "storage" and e["method"] == "GET"]
        self.assertEqual(ranges, [None, "bytes=%d-" % (3 << 20)])
        self.assertEqual(sha256_file(os.path.join(r.stdout.strip(),
                                                  "model.safetensors")), sha)

        # A server that ignores Range: the kept prefix is dropped and the
        # whole file comes again, still right.
        cache = self.cache("c3")
        self.hub.drop_after[(repo_id, "model.safetensors")] = [3 << 20, 1]
        self.tool("download", repo_id, "--cache", cache, "--retries", "0",
                  ok=False)
        self.hub.ignore_range = True
        try:
            r = self.tool("download", repo_id, "--cache", cache)
        finally:
            self.hub.ignore_range = False
        self.assertEqual(sha256_file(os.path.join(r.stdout.strip(),
                                                  "model.safetensors")), sha)

    # -- d ----------------------------------------------------------------
    def test_d_errors(self):
        cache = self.cache("d")
        r = self.tool("download", "acme/no-such-model", "--cache", cache,
                      ok=False)
        self.assertIn("NOT_FOUND", r.stderr)
        self.assertIn("acme/no-such-model", r.stderr)

        r = self.tool("download", "acme/tiny-encoder@no-such-branch",
                      "--cache", cache, ok=False)
        self.assertIn("NOT_FOUND", r.stderr)
        self.assertIn('revision "no-such-branch"', r.stderr)

        r = self.tool("download", "acme/gated-encoder", "--cache", cache,
                      ok=False)
        self.assertIn("PERMISSION_DENIED", r.stderr)
        self.assertIn("HF_TOKEN", r.stderr)
        self.assertIn("--token-file", r.stderr)
        r = self.tool("download", "acme/gated-encoder", "--cache", cache,
                      env=self.env(HF_TOKEN="hf_wrong"), ok=False)
        self.assertIn("PERMISSION_DENIED", r.stderr)
        self.tool("download", "acme/gated-encoder", "--cache", cache,
                  env=self.env(HF_TOKEN=fake_hub.TOKEN))
        token_file = os.path.join(self.tmp, "token")
        with open(token_file, "w") as f:
            f.write(fake_hub.TOKEN + "\n")
        self.tool("download", "acme/gated-encoder", "--cache",
                  self.cache("d-token-file"), "--token-file", token_file)
        # The token goes to the Hub, never to the storage it redirects to.
        self.assertEqual([e for e in self.hub.requests(server="storage")
                          if e["auth"]], [])

        dead = self.env(HF_ENDPOINT="http://127.0.0.1:%d" % closed_port())
        r = self.tool("download", "acme/tiny-encoder", "--cache", cache,
                      env=dead, ok=False)
        self.assertIn("UNAVAILABLE", r.stderr)
        self.assertIn("HF_HUB_OFFLINE=1", r.stderr)
        self.assertIn(cache, r.stderr)

        before = len(self.hub.log)
        r = self.tool("download", "acme/bin-only", "--cache", cache, ok=False)
        self.assertIn("FAILED_PRECONDITION", r.stderr)
        self.assertIn("python scripts/convert_to_safetensors.py", r.stderr)
        self.assertEqual([e for e in self.hub.log[before:]
                          if "pytorch_model" in e["path"]], [])

        repo_id = "acme/corrupt-encoder"
        self.hub.corrupt.add((repo_id, "model.safetensors"))
        try:
            r = self.tool("download", repo_id, "--cache", cache, ok=False)
        finally:
            self.hub.corrupt.discard((repo_id, "model.safetensors"))
        self.assertIn("DATA_LOSS", r.stderr)
        self.assertIn("sha256", r.stderr)
        sha = hashlib.sha256(
            self.files[repo_id]["model.safetensors"]).hexdigest()
        blobs = os.listdir(os.path.join(self.repo_dir(cache, repo_id),
                                        "blobs"))
        self.assertEqual([b for b in blobs if b.startswith(sha)], [])
        self.assert_no_partial_links(
            os.path.join(self.repo_dir(cache, repo_id), "snapshots"))
        # Served right again, the same cache completes.
        r = self.tool("download", repo_id, "--cache", cache)
        self.assertEqual(sha256_file(os.path.join(r.stdout.strip(),
                                                  "model.safetensors")), sha)

        # A stalled transfer: under the low-speed limit for its time.
        self.hub.throttle_bytes_per_s = 100 << 10
        try:
            start = time.monotonic()
            r = self.tool("download", "acme/resumable", "--cache",
                          self.cache("d-stall"), "--retries", "0",
                          "--low-speed-limit", str(10 << 20),
                          "--low-speed-time", "1", ok=False)
            stalled_after = time.monotonic() - start
        finally:
            self.hub.throttle_bytes_per_s = 0
        self.assertIn("DEADLINE_EXCEEDED", r.stderr)
        self.assertIn("stalled", r.stderr)
        self.assertLess(stalled_after, 8)  # the whole file would take 80 s

        r = self.tool("download", "not a repo", "--cache", cache, ok=False)
        self.assertIn("INVALID_ARGUMENT", r.stderr)
        r = self.tool("download", "acme/tiny-encoder", "--cache",
                      self.cache("d-empty"),
                      env=self.env(HF_HUB_OFFLINE="1"), ok=False)
        self.assertIn("NOT_FOUND", r.stderr)
        self.assertIn(self.cache("d-empty"), r.stderr)

    # -- e ----------------------------------------------------------------
    def test_e_concurrent_downloads(self):
        repo_id = "acme/concurrent"
        cache = self.cache("e")
        sha = hashlib.sha256(
            self.files[repo_id]["model.safetensors"]).hexdigest()
        # 8 MB at 8 MB/s: the second process asks while the first fetches.
        self.hub.throttle_bytes_per_s = 8 << 20
        before = len(self.hub.log)
        try:
            procs = [subprocess.Popen(
                [TOOL, "download", repo_id, "--cache", cache],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                env=self.env()) for _ in range(2)]
            outs = [p.communicate(timeout=120) for p in procs]
        finally:
            self.hub.throttle_bytes_per_s = 0
        for p, (out, err) in zip(procs, outs):
            self.assertEqual(p.returncode, 0, err)
        self.assertEqual(outs[0][0], outs[1][0])
        log = self.hub.log[before:]
        heads = [e for e in log if e["method"] == "HEAD"
                 and e["path"].endswith("/model.safetensors")]
        gets = [e for e in log if e["server"] == "storage"
                and e["method"] == "GET"]
        self.assertEqual(len(heads), 2)  # both planned to fetch it
        self.assertEqual(len(gets), 1)   # one did, the other waited
        snap = outs[0][0].strip()
        self.assertEqual(sha256_file(os.path.join(snap, "model.safetensors")),
                         sha)
        self.assertEqual(sorted(os.listdir(os.path.join(
            self.repo_dir(cache, repo_id), "blobs"))).count(sha), 1)

        # The lock is the file huggingface_hub's filelock takes.
        import filelock
        cache = self.cache("e-filelock")
        lock_path = os.path.join(cache, ".locks", "models--acme--concurrent",
                                 sha + ".lock")
        os.makedirs(os.path.dirname(lock_path))
        with filelock.FileLock(lock_path):
            r = self.tool("download", repo_id, "--cache", cache,
                          "--lock-timeout", "1", ok=False)
        self.assertIn("DEADLINE_EXCEEDED", r.stderr)
        self.assertIn(lock_path, r.stderr)
        self.tool("download", repo_id, "--cache", cache)

    # -- f ----------------------------------------------------------------
    def test_f_refs(self):
        cache = self.cache("f")
        r = self.tool("download", "acme/tiny-encoder@dev", "--cache", cache)
        repo_dir = self.repo_dir(cache, "acme/tiny-encoder")
        self.assertEqual(os.listdir(os.path.join(repo_dir, "refs")), ["dev"])
        with open(os.path.join(repo_dir, "refs", "dev")) as f:
            self.assertEqual(f.read(), self.tiny_commit)
        self.assertTrue(r.stdout.strip().endswith(self.tiny_commit))

        cache = self.cache("f-commit")
        r = self.tool("download", "acme/tiny-encoder@" + self.tiny_commit,
                      "--cache", cache)
        repo_dir = self.repo_dir(cache, "acme/tiny-encoder")
        self.assertEqual(r.stdout.strip(), os.path.join(
            repo_dir, "snapshots", self.tiny_commit))
        self.assertFalse(os.path.exists(os.path.join(repo_dir, "refs")))
        r = self.tool("resolve", "acme/tiny-encoder@" + self.tiny_commit,
                      "--cache", cache)
        r = self.tool("resolve", "acme/tiny-encoder", "--cache", cache,
                      ok=False)
        self.assertIn("NOT_FOUND", r.stderr)
        self.assertIn("refs/main", r.stderr)

    # -- import -----------------------------------------------------------
    def test_g_import_then_download_reuses_the_blobs(self):
        """encoder-hub import lays a directory out under the etags the Hub
        gives its files; huggingface_hub finds it offline; a later online
        download of the same repository moves refs/main to the Hub's
        commit and fetches no file's bytes again."""
        cache = self.cache("g")
        source = os.path.join(self.tmp, "import-source")
        shutil.rmtree(source, ignore_errors=True)
        files = self.files["acme/tiny-encoder"]
        for path, data in files.items():
            full = os.path.join(source, *path.split("/"))
            os.makedirs(os.path.dirname(full), exist_ok=True)
            with open(full, "wb") as f:
                f.write(data)
        r = self.tool("import", source, "acme/tiny-encoder", "--cache", cache)
        snapshot = r.stdout.strip()
        repo_dir = self.repo_dir(cache, "acme/tiny-encoder")
        self.assert_no_partial_links(os.path.join(repo_dir, "snapshots"))
        # The blobs' names: sha256 for the LFS weights, git's blob sha1 for
        # the rest, as the stand-in (and the Hub) give their etags; no
        # pickle or ONNX file is imported.
        blobs = set(os.listdir(os.path.join(repo_dir, "blobs")))
        imported = snapshot_files(snapshot)
        self.assertIn("model.safetensors", imported)
        self.assertNotIn("pytorch_model.bin", imported)
        self.assertNotIn("onnx/model.onnx", imported)
        for path in imported:
            data = files[path]
            want = (hashlib.sha256(data).hexdigest()
                    if path.endswith(".safetensors")
                    else fake_hub.git_blob_sha1(data))
            self.assertIn(want, blobs, path)
        commit = os.path.basename(snapshot)
        self.assertNotEqual(commit, self.tiny_commit)
        found = self.python("""
            import json
            from huggingface_hub import snapshot_download
            print(json.dumps(snapshot_download(
                "acme/tiny-encoder", cache_dir=%r, local_files_only=True)))
            """ % cache, self.env(HF_HUB_OFFLINE="1"))
        self.assertEqual(found, snapshot)
        # Imported again: the same commit. Over another revision's ref:
        # refused with exit 3, the ref unchanged.
        r = self.tool("import", source, "acme/tiny-encoder", "--cache", cache)
        self.assertEqual(r.stdout.strip(), snapshot)
        before = len(self.hub.log)
        self.tool("download", "acme/tiny-encoder", "--cache", cache)
        with open(os.path.join(repo_dir, "refs", "main")) as f:
            self.assertEqual(f.read(), self.tiny_commit)
        gets = [e for e in self.hub.log[before:] if e["method"] == "GET"
                and ("/resolve/" in e["path"] or e["server"] == "storage")]
        self.assertEqual(gets, [], "bytes fetched again")
        r = self.tool("import", source, "acme/tiny-encoder", "--cache", cache,
                      ok=False)
        self.assertEqual(r.returncode, 3, r.stderr)
        self.assertIn("already", r.stderr)
        with open(os.path.join(repo_dir, "refs", "main")) as f:
            self.assertEqual(f.read(), self.tiny_commit)

    # -- rate -------------------------------------------------------------
    def test_z_loopback_rate(self):
        cache = self.cache("rate")
        start = time.monotonic()
        r = self.tool("download", "acme/big-encoder", "--cache", cache,
                      "--progress-interval", "0.5")
        seconds = time.monotonic() - start
        path = os.path.join(r.stdout.strip(), "model.safetensors")
        self.assertEqual(os.path.getsize(path), BIG_BYTES)
        self.assertEqual(sha256_file(path), self.big_sha256)
        progress = [l for l in r.stderr.splitlines() if "MB/s" in l]
        print("\nloopback download: %d MB in %.2f s = %.0f MB/s "
              "(goal >= 200 MB/s; %d progress lines)"
              % (BIG_BYTES // 1000000, seconds, BIG_BYTES / 1e6 / seconds,
                 len(progress)), flush=True)
        shutil.rmtree(cache, ignore_errors=True)


def main():
    global TOOL
    parser = argparse.ArgumentParser()
    parser.add_argument("--tool", required=True, help="the encoder-hub binary")
    args, rest = parser.parse_known_args()
    TOOL = os.path.abspath(args.tool)
    unittest.main(argv=[sys.argv[0], "-v", *rest])


if __name__ == "__main__":
    main()
