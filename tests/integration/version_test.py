#!/usr/bin/python3
"""One version everywhere: CMake's project(VERSION) in CMakeLists.txt is the
source, and every place that reports a version must say the same, read
from the built binaries and a real server started on port 0:

- `encoder-server --version` (its first line) and `encoder-client --version`;
- the server's start-up log line;
- HTTP GET /info `version` (the same document carries text-embeddings-
  inference's Info fields at its top level, so TEI clients read this one);
- gRPC ListModels `server_version`;
- the `version` label of the `encoder_build_info` Prometheus metric;
- the Python client's `encoder_client.__version__` (and its deprecated
  alias `encoderclient`'s), imported from the source tree, and
  pyproject.toml taking the package version from it (so the installed
  metadata cannot differ).

Usage: version_test.py --server BIN --client BIN --source-dir DIR
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import tomllib
import unittest
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from server_process import ServerProcess  # noqa: E402

ARGS = None
READY_TIMEOUT_S = 300
SEMVER = re.compile(r"^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)$")


def cmake_version():
    with open(os.path.join(ARGS.source_dir, "CMakeLists.txt")) as f:
        match = re.search(r"^project\([^)]*\bVERSION\s+([0-9][0-9.]*)",
                          f.read(), re.MULTILINE)
    if match is None:
        raise RuntimeError("no project(... VERSION x.y.z) in CMakeLists.txt")
    return match.group(1)


def first_line(binary, *args):
    result = subprocess.run([binary, *args], capture_output=True, text=True,
                            timeout=60, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"{binary} {' '.join(args)} exited with "
                           f"{result.returncode}: {result.stderr}")
    return result.stdout.splitlines()[0]


def http_get(port, path):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}",
                                timeout=30) as r:
        return r.read().decode()


def build_info_version(metrics_text):
    """The version label of encoder_build_info's one sample."""
    versions = []
    for line in metrics_text.splitlines():
        if line.startswith("encoder_build_info{"):
            labels = dict(re.findall(r'(\w+)="([^"]*)"', line))
            versions.append(labels.get("version"))
    if len(versions) != 1:
        raise AssertionError(f"{len(versions)} encoder_build_info samples")
    return versions[0]


class VersionTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.version = cmake_version()
        cls.tmp = tempfile.TemporaryDirectory(prefix="encoder-version-")
        sys.path.insert(0, os.path.join(ARGS.source_dir, "client", "python"))
        import encoder_client  # protocol compiled from proto/ at import
        cls.encoder_client = encoder_client
        cls.server = ServerProcess(
            ARGS.server, directory=cls.tmp.name,
            extra_args=["--metrics-listen=127.0.0.1:0"])
        cls.server.wait_ready(READY_TIMEOUT_S)
        with open(cls.server.ready_file) as f:
            cls.http_port = json.load(f)["http_port"]

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()
        cls.tmp.cleanup()

    def test_cmake_version_is_semantic(self):
        self.assertRegex(self.version, SEMVER)

    def test_server_version_flag(self):
        self.assertEqual(first_line(ARGS.server, "--version"),
                         f"encoder-server {self.version}")

    def test_client_version_flag(self):
        self.assertEqual(first_line(ARGS.client, "--version"),
                         f"encoder-client {self.version}")

    def test_start_up_log(self):
        lines = re.findall(r"\] encoder-server (\S+) \(commit ",
                           self.server.log_tail(400))
        self.assertEqual(lines, [self.version])

    def test_http_info(self):
        info = json.loads(http_get(self.http_port, "/info"))
        self.assertEqual(info["version"], self.version)
        # TEI's Info fields sit beside it: one /info for both kinds of
        # client, so there is no second version to compare.
        self.assertIn("model_id", info)
        self.assertIn("max_input_length", info)

    def test_grpc_list_models(self):
        pb2 = self.encoder_client.pb2
        self.assertIn("server_version",
                      pb2.ListModelsResponse.DESCRIPTOR.fields_by_name)
        with self.encoder_client.Client(
                f"127.0.0.1:{self.server.port}") as client:
            response = client.models()
        self.assertEqual(response.server_version, self.version)
        self.assertTrue(response.models)

    def test_build_info_metric(self):
        self.assertEqual(
            build_info_version(http_get(self.http_port, "/metrics")),
            self.version)

    def test_python_client(self):
        self.assertEqual(self.encoder_client.__version__, self.version)
        sys.modules.pop("encoderclient", None)  # warns on first import
        with self.assertWarns(DeprecationWarning):
            import encoderclient
        self.assertEqual(encoderclient.__version__, self.version)
        with open(os.path.join(ARGS.source_dir, "client", "python",
                               "pyproject.toml"), "rb") as f:
            pyproject = tomllib.load(f)
        project = pyproject["project"]
        self.assertNotIn("version", project,
                         "pyproject.toml must not spell a version of its own")
        self.assertIn("version", project["dynamic"])
        self.assertEqual(
            pyproject["tool"]["setuptools"]["dynamic"]["version"],
            {"attr": "encoder_client._version.__version__"})


def main():
    global ARGS
    parser = argparse.ArgumentParser()
    parser.add_argument("--server", required=True)
    parser.add_argument("--client", required=True)
    parser.add_argument("--source-dir", required=True)
    ARGS, rest = parser.parse_known_args()
    unittest.main(argv=[sys.argv[0], *rest], verbosity=2)


if __name__ == "__main__":
    main()
