#!/usr/bin/python3
"""GET /docs against a real encoder-server, rendered by headless Chromium
(Debian's chromium package; a missing Chromium fails the test):

- the page and its two files (/docs/swagger-ui-bundle.js,
  /docs/swagger-ui.css) are served by the server itself, with no address
  of another host in the page, so it works without network access; they
  are open without a token when the server wants one, as /openapi.json is;
- Swagger UI, run by Chromium, renders an operation for every
  (method, path) of /openapi.json (its "opblock" elements, read from the
  DOM Chromium dumps), under the document's title and version;
- --no-http-docs: /docs and /openapi.json answer 404.

Usage: docs_page_test.py --server BIN --chromium PATH
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import unittest
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
from server_process import ServerProcess  # noqa: E402

ARGS = None
TOKEN = "docs-page-token-7d2f"
METHODS = ("get", "put", "post", "delete", "options", "head", "patch")


def start(directory, *extra):
    tokens = os.path.join(directory, "tokens")
    with open(tokens, "w") as f:
        f.write(TOKEN + "\n")
    server = ServerProcess(ARGS.server, directory=directory, extra_args=[
        "--no-warm-up", "--http-listen=127.0.0.1:0",
        f"--auth-token-file={tokens}", *extra])
    server.wait_ready(120)
    with open(server.ready_file) as f:
        server.http_port = json.load(f)["http_port"]
    return server


def get(port, path):
    """(status, content type, body bytes); no token sent."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}",
                                    timeout=30) as r:
            return r.status, r.headers.get("Content-Type", ""), r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Content-Type", ""), e.read()


class DocsPageTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.TemporaryDirectory(prefix="docs-page-")
        cls.server = start(cls.dir.name)
        cls.port = cls.server.http_port

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()
        cls.dir.cleanup()

    def test_page_and_files_are_served_here_without_a_token(self):
        status, ctype, page = get(self.port, "/docs")
        self.assertEqual(status, 200)
        self.assertTrue(ctype.startswith("text/html"), ctype)
        html = page.decode()
        # Every address in the page is relative: nothing from another host.
        self.assertEqual(re.findall(r"(?:src|href|url)\s*[=:]\s*\"(?:https?:)?//",
                                    html), [])
        for path, kind, at_least in (
                ("/docs/swagger-ui-bundle.js", "text/javascript", 500_000),
                ("/docs/swagger-ui.css", "text/css", 50_000)):
            self.assertIn(path.lstrip("/"), html)
            status, ctype, body = get(self.port, path)
            self.assertEqual(status, 200, path)
            self.assertTrue(ctype.startswith(kind), (path, ctype))
            self.assertGreater(len(body), at_least, path)
        status, _, _ = get(self.port, "/openapi.json")
        self.assertEqual(status, 200)
        # The API itself still wants the token.
        status, _, _ = get(self.port, "/info")
        self.assertEqual(status, 401)

    def test_chromium_renders_every_operation(self):
        status, _, body = get(self.port, "/openapi.json")
        self.assertEqual(status, 200)
        doc = json.loads(body)
        want = sorted((m.upper(), p) for p, item in doc["paths"].items()
                      for m in item if m in METHODS)
        self.assertGreater(len(want), 15)
        chromium = ARGS.chromium
        self.assertTrue(os.path.isfile(chromium) and
                        os.access(chromium, os.X_OK),
                        f"Chromium not found at {chromium}; install Debian's "
                        "chromium package (scripts/install_deps.sh test)")
        with tempfile.TemporaryDirectory(prefix="chromium-") as profile:
            result = subprocess.run([
                chromium, "--headless", "--no-sandbox", "--disable-gpu",
                "--disable-quic", "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update", "--disable-sync",
                "--virtual-time-budget=20000", "--dump-dom",
                f"--user-data-dir={profile}",
                f"http://127.0.0.1:{self.port}/docs"],
                capture_output=True, text=True, timeout=240)
        self.assertEqual(result.returncode, 0, result.stderr[-4000:])
        dom = result.stdout
        # Each operation: a block with its method and its path.
        got = sorted(
            (m.upper(), p.replace("\u200b", "")) for m, p in re.findall(
                r'class="opblock-summary-method">([A-Z]+)</span>.*?'
                r'data-path="([^"]*)"', dom, flags=re.S))
        self.assertEqual(got, want, dom[:2000])
        self.assertIn(doc["info"]["title"], dom)
        self.assertIn(doc["info"]["version"], dom)


class DocsOffTest(unittest.TestCase):
    def test_no_http_docs(self):
        with tempfile.TemporaryDirectory(prefix="docs-off-") as d:
            server = start(d, "--no-http-docs")
            try:
                for path in ("/docs", "/openapi.json",
                             "/api-doc/openapi.json",
                             "/docs/swagger-ui-bundle.js"):
                    status, _, _ = get(server.http_port, path)
                    self.assertEqual(status, 404, path)
            finally:
                server.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--server", required=True)
    parser.add_argument("--chromium", required=True)
    ARGS, rest = parser.parse_known_args()
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)
