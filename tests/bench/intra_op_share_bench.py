"""--share-intra-op-threads=true against =false (fixed threads), one server measured
at a time (the other stopped with SIGSTOP), cells interleaved, medians of
--rounds rounds. encoder-client bench sends token-id inputs of exactly
--length tokens from N callers.

Usage: python3 tests/bench/intra_op_share_bench.py BUILD_DIR MODEL_DIR
           [--rounds 2] [--duration 4]
BUILD_DIR holds encoder-server and encoder-client; MODEL_DIR is any model
directory the server loads (e.g. a sentence-transformers checkpoint).
Prints lscpu and a Markdown table.
"""
import argparse
import json
import os
import signal
import statistics
import subprocess
import tempfile
import time

CELLS = [(1, 16), (1, 128), (1, 512), (32, 16), (32, 128), (32, 512)]
SETTINGS = (("shared", ["--share-intra-op-threads=true"]),
            ("fixed", ["--share-intra-op-threads=false"]))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("build")
    p.add_argument("model")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--duration", type=float, default=4)
    a = p.parse_args()
    print("```\n" + subprocess.run(["lscpu"], capture_output=True,
                                   text=True).stdout.rstrip() + "\n```\n")
    tmp = tempfile.mkdtemp(prefix="share-bench-")
    servers = {}
    try:
        for name, flags in SETTINGS:
            ready = os.path.join(tmp, name + ".ready")
            proc = subprocess.Popen(
                [os.path.join(a.build, "encoder-server"), "--model-dir",
                 "m=" + a.model, "--listen", "127.0.0.1:0", "--ready-file",
                 ready, "--warm-up", "--log-level", "info"] + flags,
                stdout=open(os.path.join(tmp, name + ".log"), "w"),
                stderr=subprocess.STDOUT, start_new_session=True)
            deadline = time.time() + 300
            while not os.path.exists(ready):
                if proc.poll() is not None or time.time() > deadline:
                    raise SystemExit("%s did not start (log in %s)" % (
                        name, tmp))
                time.sleep(0.3)
            time.sleep(0.5)  # the ready file is written whole by then
            servers[name] = (proc, json.load(open(ready))["grpc_port"])
        res = {}
        for _ in range(a.rounds):
            for callers, length in CELLS:
                for name, (proc, port) in servers.items():
                    for other, (q, _) in servers.items():
                        os.killpg(q.pid, signal.SIGCONT if other == name
                                  else signal.SIGSTOP)
                    time.sleep(0.3)
                    out = subprocess.run(
                        [os.path.join(a.build, "encoder-client"), "bench",
                         "--target", "127.0.0.1:%d" % port, "--model", "m",
                         "--concurrency", str(callers), "--length",
                         str(length), "--duration-s", str(a.duration),
                         "--warmup-requests", str(2 * callers), "--json"],
                        capture_output=True, text=True, check=True)
                    j = json.loads(out.stdout)
                    res.setdefault((callers, length, name), []).append(
                        (j["throughput"]["sequences_per_s"],
                         j["latency_ms"]["p50"]))
    finally:
        for proc, _ in servers.values():
            os.killpg(proc.pid, signal.SIGCONT)
            proc.terminate()
            proc.wait()
    print("| callers | tokens | shared seq/s | fixed seq/s | shared/fixed "
          "| shared p50 ms | fixed p50 ms |")
    print("|---|---|---|---|---|---|---|")
    for callers, length in CELLS:
        s = res[(callers, length, "shared")]
        f = res[(callers, length, "fixed")]
        ss = statistics.median(x[0] for x in s)
        fs = statistics.median(x[0] for x in f)
        print("| %d | %d | %.1f | %.1f | %.2f | %.2f | %.2f |" % (
            callers, length, ss, fs, ss / fs,
            statistics.median(x[1] for x in s),
            statistics.median(x[1] for x in f)))


if __name__ == "__main__":
    main()
