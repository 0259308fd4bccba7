#!/usr/bin/python3
"""`pip install ./client/python` in a fresh virtual environment, as
docs/python-client.md tells users to install the client, then the
documentation's five-line example against a real encoder-server.

1. A copy of client/python and proto/ (so that pip's in-tree build leaves
   nothing in the source tree) is installed with the venv's own pip, with
   build isolation: pip fetches setuptools and grpcio-tools for the build,
   and grpcio, protobuf and numpy for the package, from the package index
   (through pip's cache).
2. In that environment: `import encoder_client` comes from site-packages,
   its __version__ and the installed distribution's version are
   CMakeLists.txt's project(VERSION), and the deprecated `encoderclient`
   alias imports.
3. The first ```python block of docs/python-client.md (at most five lines)
   runs there, pointed at a server started on port 0 (the built-in models;
   the default one is 512 wide), and prints the shape it promises.

Offline: pip's own cache cannot resolve an install without an index, so
the test keeps the wheels it needs in a wheelhouse (--wheelhouse; CTest
passes one in the build directory), refreshed with `pip download` whenever
an index is reachable. When none is, the install runs from the wheelhouse
with --no-index; only if that lacks a wheel does the test exit with 77
(CTest's SKIP_RETURN_CODE), saying so. Any other failure fails the test.

Usage: python_client_install_test.py --server BIN --source-dir DIR
           [--wheelhouse DIR] [--python PYTHON]
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from server_process import ServerProcess  # noqa: E402

SKIP = 77
PIP_TIMEOUT_S = 600
READY_TIMEOUT_S = 180
DEFAULT_DIM = 512  # the built-in models' width
# What pip prints when it cannot reach an index.
NETWORK_ERRORS = re.compile(
    r"NewConnectionError|Failed to establish a new connection|"
    r"Temporary failure in name resolution|Name or service not known|"
    r"Network is unreachable|No route to host|Connection refused|"
    r"ConnectTimeout|Read timed out|ProxyError|Could not fetch URL|"
    r"SSLError|ConnectionResetError", re.IGNORECASE)


def cmake_version(source_dir):
    with open(os.path.join(source_dir, "CMakeLists.txt")) as f:
        match = re.search(r"^project\([^)]*\bVERSION\s+([0-9][0-9.]*)",
                          f.read(), re.MULTILINE)
    return match.group(1)


def requirements(tree):
    """The build's and the package's requirements, from pyproject.toml."""
    with open(os.path.join(tree, "pyproject.toml"), "rb") as f:
        pyproject = tomllib.load(f)
    return (pyproject["build-system"]["requires"] +
            pyproject["project"]["dependencies"])


def docs_example(source_dir):
    """The first ```python block of docs/python-client.md."""
    with open(os.path.join(source_dir, "docs", "python-client.md")) as f:
        match = re.search(r"^```python\n(.*?)^```", f.read(),
                          re.MULTILINE | re.DOTALL)
    if match is None:
        raise AssertionError("no ```python block in docs/python-client.md")
    return match.group(1)


def run(command, **kwargs):
    print("+", " ".join(command), flush=True)
    t0 = time.monotonic()
    result = subprocess.run(command, capture_output=True, text=True,
                            timeout=PIP_TIMEOUT_S, **kwargs)
    print(f"  exit {result.returncode} in {time.monotonic() - t0:.1f} s",
          flush=True)
    return result


def show(result):
    print(result.stdout[-6000:], result.stderr[-6000:], sep="\n",
          flush=True)


def install(python, package, wheelhouse):
    """Installs `package` with pip; returns 0, 1 (failed) or SKIP."""
    pip = [python, "-m", "pip", "--disable-pip-version-check"]
    os.makedirs(wheelhouse, exist_ok=True)
    # Refreshes the wheelhouse, and finds out whether an index answers.
    download = run(pip + ["download", "--retries", "1", "--timeout", "20",
                          "--only-binary=:all:", "--dest", wheelhouse,
                          *requirements(package)])
    if download.returncode == 0:
        result = run(pip + ["install", package])
        if result.returncode != 0:
            show(result)
            return 1
        return 0
    no_index = os.environ.get("PIP_NO_INDEX", "").lower() in (
        "1", "true", "yes", "on")
    if not (no_index or
            NETWORK_ERRORS.search(download.stdout + download.stderr)):
        show(download)
        return 1
    print("no package index reachable; installing from the wheelhouse "
          f"{wheelhouse}", flush=True)
    result = run(pip + ["install", "--no-index", "--find-links", wheelhouse,
                        package])
    if result.returncode == 0:
        return 0
    show(result)
    if re.search(r"No matching distribution|Could not find a version",
                 result.stdout + result.stderr):
        print("SKIP: pip reaches no package index, and the wheelhouse "
              f"{wheelhouse} lacks wheels the install needs (run the test "
              "once with an index reachable to fill it)", flush=True)
        return SKIP
    return 1


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--server", required=True)
    parser.add_argument("--source-dir", required=True)
    parser.add_argument("--wheelhouse",
                        default=os.path.join(tempfile.gettempdir(),
                                             "encoder-client-wheelhouse"))
    parser.add_argument("--python", default=sys.executable,
                        help="the Python the virtual environment is made of")
    args = parser.parse_args()
    version = cmake_version(args.source_dir)
    example = docs_example(args.source_dir)
    code_lines = [line for line in example.splitlines() if line.strip()]
    if len(code_lines) > 5:
        print(f"FAIL: the documentation's example has {len(code_lines)} "
              "lines of code, not five or fewer")
        return 1

    with tempfile.TemporaryDirectory(prefix="encoder-client-install-") as tmp:
        tree = os.path.join(tmp, "tree")
        shutil.copytree(os.path.join(args.source_dir, "client", "python"),
                        os.path.join(tree, "client", "python"),
                        ignore=shutil.ignore_patterns("build", "*.egg-info",
                                                      "__pycache__"))
        shutil.copytree(os.path.join(args.source_dir, "proto"),
                        os.path.join(tree, "proto"))
        venv = os.path.join(tmp, "venv")
        made = run([args.python, "-m", "venv", venv])
        if made.returncode != 0:
            show(made)
            return 1
        python = os.path.join(venv, "bin", "python")
        status = install(python, os.path.join(tree, "client", "python"),
                         args.wheelhouse)
        if status != 0:
            return status

        # Away from the source tree, so that only the installed package can
        # be imported.
        check = run([python, "-c", (
            "import importlib.metadata as m, warnings, encoder_client as e\n"
            "with warnings.catch_warnings(record=True) as w:\n"
            "    warnings.simplefilter('always')\n"
            "    import encoderclient\n"
            "print(e.__version__, m.version('encoder-client'),\n"
            "      encoderclient.EncoderClient is e.EncoderClient,\n"
            "      w[0].category.__name__, e.__file__)")], cwd=tmp)
        show(check)
        if check.returncode != 0:
            return 1
        fields = check.stdout.split()
        expected = [version, version, "True", "DeprecationWarning"]
        if fields[:4] != expected or "site-packages" not in fields[4]:
            print(f"FAIL: got {fields}, expected {expected} and a "
                  "site-packages path")
            return 1

        server = ServerProcess(args.server, directory=tmp)
        try:
            server.wait_ready(READY_TIMEOUT_S)
            script = os.path.join(tmp, "example.py")
            with open(script, "w") as f:
                f.write(example.replace("127.0.0.1:50051",
                                        f"127.0.0.1:{server.port}"))
            result = run([python, script], cwd=tmp)
        finally:
            server.stop()
        show(result)
        if result.returncode != 0:
            return 1
        if f"(2, {DEFAULT_DIM})" not in result.stdout:
            print(f"FAIL: the example did not print (2, {DEFAULT_DIM})")
            return 1
    print(f"encoder-client {version} installed with pip into a fresh "
          "virtual environment; the documentation's example ran", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
