#!/usr/bin/python3
"""encoder-server start-up errors: each bad flag or file exits non-zero at
once with a message that says what is wrong; --help documents every flag;
every flag can come from an ENCODER_* environment variable; --version
reports the build.

Usage: server_flags_test.py --server BIN [--build-type TYPE]
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import unittest

ARGS = None


def run(*flags, env=None):
    return subprocess.run([ARGS.server, "--listen=127.0.0.1:0", *flags],
                          capture_output=True, text=True, timeout=60,
                          env=env)


def with_env(**variables):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("ENCODER_")}
    env.update(variables)
    return env


SOURCE_DIR = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))


class ServerFlagsTest(unittest.TestCase):
    def assertFails(self, flags, needle):
        result = run(*flags)
        self.assertNotEqual(result.returncode, 0, flags)
        self.assertIn(needle, result.stdout + result.stderr)

    def test_half_precision_needs_cuda(self):
        self.assertFails(["--device=cpu", "--dtype=float16"],
                         "--dtype=float16 needs a CUDA device")
        self.assertFails(["--dtype=float64"], "--dtype must be float32")

    def test_bfloat16_needs_native_support_unless_forced(self):
        # The kernel's reading of cpuid, independent of the server's.
        with open("/proc/cpuinfo") as f:
            flags = next((line.split(":", 1)[1].split() for line in f
                          if line.startswith("flags")), [])
        if "avx512_bf16" in flags or "amx_bf16" in flags:
            self.skipTest("this CPU has native bfloat16")
        self.assertFails(["--device=cpu", "--dtype=bfloat16"],
                         "lacks avx512_bf16 and amx_bf16")
        # Forced, it gets past the check (and fails later on a bad flag).
        self.assertFails(["--device=cpu", "--dtype=bfloat16",
                          "--force-dtype", "--models=/nonexistent/r.json"],
                         "cannot open /nonexistent/r.json")

    def test_quantize_is_checked(self):
        self.assertFails(["--quantize=int4"],
                         "--quantize must be none or int8, got int4")
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "repo.json")
            with open(path, "w") as f:
                f.write('{"models": [{"name": "m", "quantize": "fp8"}]}')
            self.assertFails(["--models=" + path],
                             'model "m": quantize must be "int8" or "none"')

    def test_device_is_checked(self):
        self.assertFails(["--device=tpu"], "--device must be auto, cpu")
        # This build has no CUDA (Debian's LibTorch is CPU only).
        self.assertFails(["--device=cuda:0"], "no CUDA")

    def test_repository_errors_name_the_problem(self):
        self.assertFails(["--models=/nonexistent/repo.json"],
                         "cannot open /nonexistent/repo.json")
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "repo.json")
            with open(path, "w") as f:
                f.write('{"models": [{"name": "m", "weights": "w.st"}]}')
            self.assertFails(["--models=" + path], "w.st")
            with open(path, "w") as f:
                f.write('{"models": [{"name": "m", "config": '
                        '{"d_model": 10, "num_heads": 3}}]}')
            self.assertFails(["--models=" + path],
                             'model "m": model config: d_model 10 is not '
                             'divisible by num_heads 3')

    def test_unknown_log_level_is_refused(self):
        self.assertFails(["--log-level=verbose"], "--log-level")
        self.assertFails(["--log-format=xml"], "--log-format")
        self.assertFails(["--log-rate-limit=-1"], "--log-rate-limit")

    def assertEnvFails(self, env, needle, flags=()):
        result = run(*flags, env=with_env(**env))
        self.assertNotEqual(result.returncode, 0, env)
        self.assertIn(needle, result.stdout + result.stderr)

    def test_environment_variables_set_flags(self):
        # Checked like the flags themselves.
        self.assertEnvFails({"ENCODER_LOG_LEVEL": "verbose"}, "--log-level")
        self.assertEnvFails({"ENCODER_MAX_CONCURRENT_STREAMS": "0"},
                            "--max-concurrent-streams")
        self.assertEnvFails({"ENCODER_DEVICE": "tpu"},
                            "--device must be auto, cpu")
        # A flag with an alias, and a value that reaches the model loader.
        self.assertEnvFails({"ENCODER_MODELS": "/nonexistent/env.json"},
                            "cannot open /nonexistent/env.json")
        # The command line wins over the environment.
        self.assertEnvFails({"ENCODER_MODELS": "/nonexistent/env.json"},
                            "cannot open /nonexistent/cli.json",
                            flags=["--models=/nonexistent/cli.json"])
        # Security and precision flags are covered too.
        self.assertEnvFails({"ENCODER_QUANTIZE": "int4"},
                            "--quantize must be none or int8, got int4")
        self.assertEnvFails({"ENCODER_AUTH_HEALTH": "true"},
                            "--auth-health needs --auth-token-file")

    def test_environment_configures_a_serving_server(self):
        # Address, ready file, log format and a boolean flag (a bad boolean
        # would stop the server) from the environment alone; the JSON lines
        # prove ENCODER_LOG_FORMAT took effect.
        with tempfile.TemporaryDirectory() as tmp:
            ready = os.path.join(tmp, "ready.json")
            log = os.path.join(tmp, "log")
            env = with_env(ENCODER_READY_FILE=ready,
                           ENCODER_LOG_FORMAT="json",
                           ENCODER_WARM_UP="false",
                           ENCODER_LISTEN="127.0.0.1:0")
            with open(log, "w") as out:
                proc = subprocess.Popen([ARGS.server], env=env, stdout=out,
                                        stderr=subprocess.STDOUT)
            try:
                deadline = time.monotonic() + 120
                while not os.path.exists(ready):
                    self.assertIsNone(proc.poll(), "server exited")
                    self.assertLess(time.monotonic(), deadline)
                    time.sleep(0.1)
                with open(ready) as f:
                    self.assertGreater(json.load(f)["grpc_port"], 0)
            finally:
                proc.terminate()
                proc.wait(timeout=60)
            with open(log) as f:
                lines = [json.loads(l) for l in f if l.startswith("{")]
            messages = [l["msg"] for l in lines]
            self.assertTrue(any(m.startswith("serving ") for m in messages),
                            messages)
            for line in lines:
                self.assertLessEqual({"ts", "level", "msg"}, set(line))

    def test_version(self):
        result = subprocess.run([ARGS.server, "--version"],
                                capture_output=True, text=True, timeout=60)
        self.assertEqual(result.returncode, 0, result.stderr)
        lines = result.stdout.strip().splitlines()
        with open(os.path.join(SOURCE_DIR, "CMakeLists.txt")) as f:
            version = re.search(r"project\([^)]*VERSION ([0-9.]+)",
                                f.read()).group(1)
        self.assertEqual(lines[0], f"encoder-server {version}")
        fields = dict(line.split(": ", 1) for line in lines[1:])
        self.assertEqual(set(fields),
                         {"commit", "build type", "compiler", "LibTorch"})
        git = subprocess.run(["git", "-C", SOURCE_DIR, "rev-parse",
                              "--short", "HEAD"], capture_output=True,
                             text=True)
        if git.returncode != 0:
            self.assertEqual(fields["commit"], "unknown")
        else:
            # The commit the binary was built at: HEAD, or one before it
            # when commits were made since the build.
            self.assertRegex(fields["commit"], r"^[0-9a-f]{7,}$")
            ancestor = subprocess.run(
                ["git", "-C", SOURCE_DIR, "merge-base", "--is-ancestor",
                 fields["commit"], "HEAD"], capture_output=True)
            self.assertEqual(ancestor.returncode, 0,
                             f"{fields['commit']} is not HEAD or before it")
        if ARGS.build_type:
            self.assertEqual(fields["build type"], ARGS.build_type)
        self.assertRegex(fields["compiler"], r"^(gcc|clang) \d+\.\d+")
        # The LibTorch whose headers CMake read (MAJOR.MINOR).
        self.assertRegex(fields["LibTorch"], r"^\d+\.\d+\.\d+")
        self.assertTrue(
            fields["LibTorch"].startswith(ARGS.libtorch_version + "."),
            (fields["LibTorch"], ARGS.libtorch_version))

    def test_transport_limits_are_range_checked(self):
        self.assertFails(["--max-concurrent-streams=0"],
                         "--max-concurrent-streams")
        self.assertFails(["--http-threads=0"], "--http-threads")
        self.assertFails(["--http-request-timeout=-1"],
                         "--http-request-timeout")
        self.assertFails(["--max-health-watchers=-1"],
                         "--max-health-watchers")
        self.assertFails(["--grpc-memory-quota-bytes=-5"],
                         "--grpc-memory-quota-bytes")

    def test_open_file_soft_limit_is_raised_to_the_hard_limit(self):
        # Started with a low soft limit, the server serves with the hard one.
        with tempfile.TemporaryDirectory() as tmp:
            ready = os.path.join(tmp, "ready.json")
            proc = subprocess.Popen(
                ["prlimit", "--nofile=64:2048", ARGS.server,
                 "--listen=127.0.0.1:0", "--no-warm-up",
                 f"--ready-file={ready}"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                deadline = time.monotonic() + 120
                while not os.path.exists(ready):
                    self.assertIsNone(proc.poll(), "server exited")
                    self.assertLess(time.monotonic(), deadline)
                    time.sleep(0.1)
                with open(f"/proc/{proc.pid}/limits") as f:
                    line = [l for l in f if l.startswith("Max open files")][0]
                self.assertEqual(line.split()[3:5], ["2048", "2048"], line)
            finally:
                proc.terminate()
                proc.wait(timeout=60)

    def test_security_flags_are_checked(self):
        with tempfile.TemporaryDirectory() as tmp:
            pem = os.path.join(tmp, "x.pem")
            with open(pem, "w") as f:
                f.write("not a certificate\n")
            empty = os.path.join(tmp, "tokens")
            with open(empty, "w") as f:
                f.write("# no token yet\n")
            self.assertFails(["--tls-cert=" + pem],
                             "TLS needs both --tls-cert and --tls-key")
            self.assertFails(["--tls-cert=/nonexistent", "--tls-key=" + pem],
                             "--tls-cert: cannot open /nonexistent")
            self.assertFails(["--tls-cert=" + pem, "--tls-key=" + pem],
                             "is not PEM")
            self.assertFails(["--tls-client-ca=" + pem],
                             "client certificates need TLS")
            self.assertFails(["--auth-health"],
                             "--auth-health needs --auth-token-file")
            self.assertFails(["--auth-token-file=/nonexistent/tokens"],
                             "cannot open token file /nonexistent/tokens")
            self.assertFails(["--auth-token-file=" + empty], "no token")
            self.assertFails(["--metrics-listen=:0",
                              "--metrics-basic-auth-file=/nonexistent"],
                             "cannot open metrics basic auth file")

    def test_help_lists_every_flag(self):
        # --help: the groups, without the advanced flags.
        short = subprocess.run([ARGS.server, "--help"], capture_output=True,
                               text=True, timeout=60)
        self.assertEqual(short.returncode, 0)
        for group in ("Models:", "gRPC:", "HTTP:", "Batching and limits:",
                      "Precision and threads:", "Security:",
                      "Observability:", "text-embeddings-inference:"):
            self.assertIn(f"\n{group}\n", short.stdout)
        for flag in ("--model-id", "--max-batch-tokens", "--dtype",
                     "--help-all", "--config"):
            self.assertIn(flag, short.stdout)
        for flag in ("Advanced:", "--force-dtype", "--max-concurrent-streams",
                     "--http-threads"):
            self.assertNotIn(flag, short.stdout)
        # --help-all: every flag.
        result = subprocess.run([ARGS.server, "--help-all"],
                                capture_output=True, text=True, timeout=60)
        self.assertEqual(result.returncode, 0)
        self.assertIn("\nAdvanced:\n", result.stdout)
        for flag in ["--listen", "--metrics-listen", "--models", "--device",
                     "--dtype", "--quantize", "--force-dtype",
                     "--intra-op-threads",
                     "--max-receive-message-bytes", "--max-send-message-bytes",
                     "--max-batch-sequences", "--max-batch-tokens",
                     "--max-queue-delay", "--max-queued-sequences",
                     "--drain-grace", "--ready-file",
                     "--grpc-memory-quota-bytes", "--max-concurrent-streams",
                     "--tls-cert",
                     "--tls-key", "--tls-client-ca", "--tls-client-auth",
                     "--auth-token-file", "--auth-health", "--reflection",
                     "--health-listen", "--metrics-address",
                     "--metrics-tls-cert", "--metrics-basic-auth-file",
                     "--log-level", "--log-format", "--log-rate-limit",
                     "--max-health-watchers", "--http-request-timeout",
                     "--http-max-header-bytes", "--http-keep-alive",
                     "--http-max-pipelined-requests", "--http-threads",
                     "--version"]:
            self.assertIn(flag, result.stdout)
        # Every option but --help and --version names its environment
        # variable: its first long name upper-cased, '-' as '_'.
        options = [line.split()[0] for line in result.stdout.splitlines()
                   if line.startswith("  --")]
        self.assertGreater(len(options), 40)
        for line in result.stdout.splitlines():
            if not line.startswith("  --") or line.startswith(
                    ("  --version", "  --config", "  --help-all")):
                continue
            name = re.match(r"  --([a-z0-9-]+)", line).group(1)
            env = "ENCODER_" + name.upper().replace("-", "_")
            self.assertIn(f"(Env:{env})", line)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--server", required=True)
    parser.add_argument("--build-type", default="")
    parser.add_argument("--libtorch-version", required=True)
    ARGS, rest = parser.parse_known_args()
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)
