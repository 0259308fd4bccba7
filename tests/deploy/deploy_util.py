"""Helpers shared by the deploy tests.

Every child process is started from the main thread with a parent-death
signal, so it dies with the test even when the test itself is killed; the
Harness context stops what is still running (on success, failure or the
test's own time limit) and prints the tail of each child's log on failure.
Everything listens on 127.0.0.1 ports picked at run time.
"""

import argparse
import contextlib
import ctypes
import importlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

_PR_SET_PDEATHSIG = 1


class TimeLimit(Exception):
    """The test ran past its own time limit."""


class CheckFailed(Exception):
    """One or more checks failed; the message lists them."""


def common_args(description):
    """Arguments every deploy test takes (paths come from CMake)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--source-dir", required=True)
    parser.add_argument("--time-limit", type=float, default=240.0,
                        help="seconds; the test fails and cleans up after")
    parser.add_argument("--keep-temp", action="store_true",
                        help="keep the temporary directory for inspection")
    return parser


def require_executable(path, what):
    """Fails the test when a program it starts is missing: the README's test
    command installs every one of them."""
    if not path or not (os.path.isfile(path) and os.access(path, os.X_OK)):
        print(f"FAILED: {what} not found at {path!r} "
              "(scripts/install_deps.sh test installs it)")
        sys.exit(1)


def free_port():
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _die_with_parent():
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


class Checks:
    """Collects failed checks so that one run reports all of them."""

    def __init__(self):
        self.failures = []

    def check(self, condition, message):
        if not condition:
            self.failures.append(message)
            print(f"FAIL: {message}", flush=True)
        return condition

    def equal(self, actual, expected, what):
        return self.check(actual == expected,
                          f"{what}: expected {expected!r}, got {actual!r}")

    def raise_if_failed(self):
        if self.failures:
            raise CheckFailed(f"{len(self.failures)} check(s) failed:\n  " +
                              "\n  ".join(self.failures))


class Child:
    def __init__(self, name, popen, log_path):
        self.name = name
        self.popen = popen
        self.log_path = log_path

    @property
    def pid(self):
        return self.popen.pid

    def running(self):
        return self.popen.poll() is None

    def log_tail(self, lines=40):
        try:
            with open(self.log_path, errors="replace") as f:
                return "".join(f.readlines()[-lines:])
        except OSError:
            return ""


class Harness(contextlib.AbstractContextManager):
    """A temporary directory, the children started in it and a deadline."""

    def __init__(self, args, name):
        self.args = args
        self.tmp = tempfile.mkdtemp(prefix=f"encoder-{name}-")
        self.children = []
        self.deadline = time.monotonic() + args.time_limit

    def __enter__(self):
        def on_alarm(signum, frame):
            raise TimeLimit(f"time limit of {self.args.time_limit:.0f} s")

        def on_term(signum, frame):
            raise KeyboardInterrupt(f"signal {signum}")

        signal.signal(signal.SIGALRM, on_alarm)
        signal.signal(signal.SIGTERM, on_term)
        signal.alarm(max(1, int(self.args.time_limit)))
        return self

    def __exit__(self, exc_type, exc, tb):
        signal.alarm(0)
        failed = exc_type is not None
        for child in reversed(self.children):
            if child.running():
                self.stop(child, timeout=10)
        if failed:
            for child in self.children:
                print(f"--- {child.name} (pid {child.pid}, exit "
                      f"{child.popen.returncode}) log tail ---\n"
                      f"{child.log_tail()}", flush=True)
        if self.args.keep_temp or failed:
            print(f"temporary files kept in {self.tmp}")
        else:
            shutil.rmtree(self.tmp, ignore_errors=True)
        return False

    def path(self, *parts):
        return os.path.join(self.tmp, *parts)

    def remaining(self):
        return self.deadline - time.monotonic()

    def start(self, name, argv, cwd=None, env=None):
        """Starts argv with stdout and stderr in <tmp>/<name>.log (env: the
        whole environment, default this process's)."""
        log_path = self.path(f"{name}.log")
        log = open(log_path, "wb")
        print(f"starting {name}: {' '.join(argv)}", flush=True)
        popen = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log,
                                 stderr=subprocess.STDOUT, cwd=cwd or self.tmp,
                                 env=env, preexec_fn=_die_with_parent)
        log.close()
        child = Child(name, popen, log_path)
        self.children.append(child)
        return child

    def stop(self, child, sig=signal.SIGTERM, timeout=30):
        """Sends sig, waits up to timeout, then SIGKILL. Returns the exit
        code and the seconds it took to exit after sig."""
        if not child.running():
            return child.popen.returncode, 0.0
        start = time.monotonic()
        child.popen.send_signal(sig)
        try:
            child.popen.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            child.popen.kill()
            child.popen.wait()
        return child.popen.returncode, time.monotonic() - start

    def wait_for(self, predicate, timeout, what, interval=0.2):
        """Polls predicate until it returns a truthy value, which is
        returned; fails after timeout seconds, or at once when predicate
        raises CheckFailed (other exceptions are retried)."""
        end = time.monotonic() + min(timeout, self.remaining())
        last_error = None
        while time.monotonic() < end:
            try:
                value = predicate()
                if value:
                    return value
            except CheckFailed:
                raise
            except Exception as e:  # Retried until the timeout.
                last_error = e
            time.sleep(interval)
        raise CheckFailed(f"timed out after {timeout:.0f} s waiting for "
                          f"{what}" + (f" (last error: {last_error})"
                                       if last_error else ""))

    def start_server(self, name, server_binary, extra_args=(), env=None):
        """Starts encoder-server with gRPC and metrics on port 0 and returns
        (child, ready_file) for wait_server_ready; starting several servers
        before waiting lets them load their models side by side. env: as
        for start."""
        ready = self.path(f"{name}.ready.json")
        child = self.start(name, [
            server_binary, "--listen=127.0.0.1:0",
            "--metrics-listen=127.0.0.1:0", f"--ready-file={ready}",
            *extra_args], env=env)
        return child, ready

    def wait_server_ready(self, child, ready, timeout=120):
        """Waits for the ready file; returns (grpc_port, metrics_port)."""
        info = self.wait_server_info(child, ready, timeout)
        return info["grpc_port"], info["metrics_port"]

    def wait_server_info(self, child, ready, timeout=120):
        """Waits for the ready file; returns all it holds (grpc_port,
        http_port, metrics_port, health_port)."""
        def is_ready():
            if not child.running():
                raise CheckFailed(f"{child.name} exited with "
                                  f"{child.popen.returncode} before ready")
            if not os.path.exists(ready):
                return None
            with open(ready) as f:
                return json.load(f)

        return self.wait_for(is_ready, timeout, f"{child.name} ready file")


def run(main):
    """Runs a deploy test's main: a failed check, the time limit or a
    signal prints FAILED with the reason and exits 1."""
    try:
        main()
    except (CheckFailed, TimeLimit, KeyboardInterrupt) as e:
        print(f"FAILED: {e}")
        sys.exit(1)


def generate_stubs(protoc, plugin, proto_dir, out_dir):
    """Compiles encoder/v1/encoder.proto for Python into out_dir and returns
    the (messages, services) modules."""
    os.makedirs(out_dir, exist_ok=True)
    subprocess.run([
        protoc, f"-I{proto_dir}", f"--python_out={out_dir}",
        f"--grpc_python_out={out_dir}",
        f"--plugin=protoc-gen-grpc_python={plugin}",
        os.path.join(proto_dir, "encoder", "v1", "encoder.proto")],
        check=True, timeout=60)
    sys.path.insert(0, out_dir)
    return (importlib.import_module("encoder.v1.encoder_pb2"),
            importlib.import_module("encoder.v1.encoder_pb2_grpc"))


# Loopback only: proxies from the environment must not apply.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))

# Channel options for loopback gRPC: no proxy from the environment.
GRPC_OPTIONS = [("grpc.enable_http_proxy", 0)]


def http_get(url, timeout=5.0):
    """(status, body text) of a GET; HTTP errors return their status."""
    try:
        with _OPENER.open(url, timeout=timeout) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(errors="replace")


def parse_exposition(text):
    """Prometheus text format -> {(name, frozenset(labels)): value}. Label
    values are assumed free of escaped quotes and commas."""
    samples = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        series, _, value = line.rpartition(" ")
        labels = {}
        if "{" in series:
            name, _, body = series.partition("{")
            for pair in body.rstrip("}").split(","):
                if pair:
                    key, _, quoted = pair.partition("=")
                    labels[key] = quoted[1:-1]
        else:
            name = series
        samples[(name, frozenset(labels.items()))] = float(value)
    return samples


def sum_samples(samples, name, **labels):
    """Sum of every sample of `name` whose labels include `labels`."""
    want = set(labels.items())
    return sum(v for (n, ls), v in samples.items()
               if n == name and want <= set(ls))
