"""A real encoder-server for integration tests: started on 127.0.0.1 with
port 0 and a ready file, ready once `port` is set, stopped with SIGTERM (and
killed if it does not exit)."""
import json
import os
import signal
import subprocess
import tempfile
import time


def rss_bytes(pid):
    """Resident memory of process `pid` in bytes (VmRSS), 0 if unknown."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def run(command, timeout):
    """Runs command (a list); returns the CompletedProcess, text mode."""
    return subprocess.run(command, capture_output=True, text=True,
                          timeout=timeout, check=False)


class ServerProcess:
    """encoder-server on 127.0.0.1:<free port>, ready when port is set.

    Files (ready file, log) go to `directory`, or to a temporary directory
    of its own that stop() removes."""

    def __init__(self, binary, directory=None, extra_args=(), env=None,
                 listen="127.0.0.1:0"):
        self._own_dir = None
        if directory is None:
            self._own_dir = tempfile.TemporaryDirectory(prefix="encoder-it-")
            directory = self._own_dir.name
        self.ready_file = os.path.join(directory, "ready.json")
        self.log_path = os.path.join(directory, "server.log")
        if os.path.exists(self.ready_file):  # a previous run's
            os.remove(self.ready_file)
        self.log = open(self.log_path, "w")
        self.process = subprocess.Popen(
            [binary, f"--listen={listen}",
             f"--ready-file={self.ready_file}", *extra_args],
            stdout=self.log, stderr=subprocess.STDOUT, env=env)
        self.port = None
        self.ports = None  # the ready file: grpc_port, http_port, ...

    def wait_ready(self, timeout_s):
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"server exited with {self.process.returncode} before "
                    f"it was ready:\n{self.log_tail()}")
            if os.path.exists(self.ready_file):
                with open(self.ready_file) as f:
                    self.ports = json.load(f)
                self.port = self.ports["grpc_port"]
                return
            time.sleep(0.2)
        raise RuntimeError(f"server not ready after {timeout_s} s:\n"
                           f"{self.log_tail()}")

    def log_tail(self, lines=40):
        self.log.flush()
        with open(self.log_path) as f:
            return "".join(f.readlines()[-lines:])

    def stop(self, timeout_s=30):
        """SIGTERM, then SIGKILL after timeout_s; returns the exit code."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=30)
        if not self.log.closed:
            self.log.close()
        if self._own_dir is not None:
            self._own_dir.cleanup()
            self._own_dir = None
        return self.process.returncode
