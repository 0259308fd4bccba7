#!/usr/bin/python3
"""The per-request path: how many requests a second the server answers
when the model costs next to nothing, what CPU each request costs the
server, and which of its threads spends it.

A model of one layer of width 32 (or --model-dir) is served under each
variant (--variant NAME=VAR=VALUE[,VAR=VALUE...]: environment the server
starts with; the first variant, "default" unless named, is the baseline),
round by round. Each run: `encoder-client bench` at --concurrency callers,
one input of --length token ids per request, for --seconds; meanwhile the
server's CPU time (utime + stime of /proc/PID/stat) and each thread's
(/proc/PID/task/*/stat, by the names the server gives its threads:
batch-plan, batch-run, batch-reply, intra-op-lane, http-io; gRPC's own
are nexting_thread and default-executor) over the middle of the run.
Prints lscpu's model name, then per variant the medians over rounds:
requests/s, p50 / p99, server CPU microseconds per request, the busiest
threads (percent of one core), and the ratio to the baseline.

--front http sends the same load to the HTTP front instead (POST
/v1/embeddings with token ids, one keep-alive connection per caller,
through http_load.py, a Python asyncio client: on shared cores it takes
more CPU than encoder-client, so compare the server's CPU per request
rather than requests/s across fronts).

--echo measures the transport's own ceiling the same way, round by round
beside the variants: encoder-bench-echo, gRPC's callback API answering one
unary method with its request (--payload-bytes each way), under the same
load shape (one thread per caller, blocking unary calls, one channel).
Each variant is then also given as a ratio to it. --server-cpus and
--client-cpus pin the two sides with taskset (e.g. 0 and 1: the server on
one core, the client on the other).

Usage: request_path_bench.py --build build
           [--variant spin3000=GOMP_SPINCOUNT=3000] [--rounds 3]
           [--echo] [--server-cpus 0] [--client-cpus 1] [--front http]
           [--json FILE]   (the medians and busiest threads per variant)
           [--baseline-binary OTHER/encoder-server]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run_bench  # noqa: E402  (wait_ready, stop_server, client_bench)

TICK = os.sysconf("SC_CLK_TCK")
TINY = {"models": [{"name": "tiny", "seed": 1, "config": {
    "vocab_size": 300, "d_model": 32, "num_heads": 4, "num_layers": 1,
    "d_ff": 64, "positional": {"type": "sinusoidal"}}}]}


def cpu_model():
    out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    for line in out.splitlines():
        if line.startswith("Model name:"):
            return line.split(":", 1)[1].strip()
    return "unknown"


def process_ticks(pid):
    fields = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def thread_ticks(pid):
    """{tid: (name, utime + stime)} of every thread of `pid`."""
    out = {}
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            stat = open("/proc/%d/task/%s/stat" % (pid, tid)).read()
        except OSError:
            continue  # the thread ended
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2:].split()
        out[tid] = (name, int(fields[11]) + int(fields[12]))
    return out


def busiest_threads(pid, seconds):
    """[(percent of a core, name)] of each thread over `seconds`, busiest
    first."""
    before = thread_ticks(pid)
    t0 = time.monotonic()
    time.sleep(seconds)
    after = thread_ticks(pid)
    elapsed = time.monotonic() - t0
    rows = []
    for tid, (name, ticks) in after.items():
        spent = ticks - before.get(tid, (name, 0))[1]
        rows.append((100.0 * spent / TICK / elapsed, name))
    return sorted(rows, reverse=True)


def pinned(cpus):
    """The taskset prefix that pins a command to `cpus` ("" : none)."""
    return ["taskset", "-c", cpus] if cpus else []


def start(a, command, env, port_key="grpc_port"):
    """Starts `command` (a server taking --ready-file) on --server-cpus;
    returns (process, the ready file's `port_key`)."""
    tmp = tempfile.mkdtemp(prefix="request-path-")
    ready = os.path.join(tmp, "ready.json")
    log = open(os.path.join(tmp, "server.log"), "w")
    proc = subprocess.Popen(
        pinned(a.server_cpus) + command + ["--ready-file=" + ready],
        stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **env})
    return proc, run_bench.wait_ready(proc, ready, log.name, command[0],
                                      port_key)


def echo_bench(a, port, seconds):
    """encoder-bench-echo bench's report (encoder-client bench's fields)."""
    out = subprocess.run(
        pinned(a.client_cpus) +
        [os.path.join(a.build, "encoder-bench-echo"), "bench",
         "--target", "127.0.0.1:%d" % port,
         "--concurrency", str(a.concurrency), "--duration-s", str(seconds),
         "--payload-bytes", str(a.payload_bytes),
         "--warmup-requests", str(2 * a.concurrency)],
        check=True, capture_output=True, text=True, timeout=seconds + 120)
    return json.loads(out.stdout)


def http_bench(a, port, model, seconds):
    """http_load.py's report (encoder-client bench's fields)."""
    out = subprocess.run(
        pinned(a.client_cpus) +
        [sys.executable, os.path.join(os.path.dirname(
            os.path.abspath(__file__)), "http_load.py"),
         "--port", str(port), "--model", model,
         "--concurrency", str(a.concurrency), "--length", str(a.length),
         "--duration-s", str(seconds),
         "--warmup-requests", str(2 * a.concurrency)],
        check=True, capture_output=True, text=True, timeout=seconds + 120)
    return json.loads(out.stdout)


def one_run(a, server, env):
    """One measured run of `server` ({"command": [...], "bench":
    f(port, seconds) -> report, "port": the ready file's key}) started
    with `env`."""
    proc, port = start(a, server["command"], env,
                       server.get("port", "grpc_port"))
    try:
        # Warm: the first batches of each size.
        server["bench"](port, 1)
        threads = {}
        sampler = threading.Timer(
            a.seconds / 4, lambda: threads.update(
                rows=busiest_threads(proc.pid, a.seconds / 2)))
        ticks0 = process_ticks(proc.pid)
        sampler.start()
        report = server["bench"](port, a.seconds)
        sampler.join()
        spent = (process_ticks(proc.pid) - ticks0) / TICK
    finally:
        run_bench.stop_server(proc)
    if report.get("failed_requests"):
        sys.exit("%d requests failed: %s" % (report["failed_requests"],
                                             json.dumps(report)[:400]))
    # The client's warm-up requests (2 x concurrency) count in the CPU.
    requests = report["requests"] + 2 * a.concurrency
    return {"requests/s": report["throughput"]["requests_per_s"],
            "p50 ms": report["latency_ms"]["p50"],
            "p99 ms": report["latency_ms"]["p99"],
            "server CPU us/request": 1e6 * spent / requests,
            "threads": threads.get("rows", [])}


def parse_variant(text):
    name, _, assignments = text.partition("=")
    env = {}
    for item in filter(None, assignments.split(",")):
        var, sep, value = item.partition("=")
        if not sep:
            sys.exit("--variant %r: want NAME=VAR=VALUE[,VAR=VALUE]" % text)
        env[var] = value
    return name, env


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build", default="build")
    p.add_argument("--model-dir", help="a checkpoint instead of the tiny "
                   "model (served as 'model')")
    p.add_argument("--variant", action="append", default=[],
                   help="NAME=VAR=VALUE[,VAR=VALUE]: the server's "
                   "environment; the first is the baseline")
    p.add_argument("--concurrency", type=int, default=32)
    p.add_argument("--length", type=int, default=1)
    p.add_argument("--seconds", type=float, default=5)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--echo", action="store_true",
                   help="measure encoder-bench-echo too, the transport's "
                   "ceiling, and give each variant as a ratio to it")
    p.add_argument("--payload-bytes", type=int, default=64,
                   help="the echo's request and reply size")
    p.add_argument("--server-cpus", default="",
                   help="taskset -c list for the server (and the echo)")
    p.add_argument("--client-cpus", default="",
                   help="taskset -c list for the load client")
    p.add_argument("--front", choices=("grpc", "http"), default="grpc",
                   help="the front the load goes to (the echo server is "
                        "gRPC's either way)")
    p.add_argument("--json", help="write the medians per variant here")
    p.add_argument("--baseline-binary",
                   help="another encoder-server, run first as the variant "
                        "\"baseline\" (the same flags, no environment)")
    a = p.parse_args()
    variants = [parse_variant(v) for v in a.variant]
    if not variants or variants[0][1]:
        variants.insert(0, ("default", {}))
    if a.model_dir:
        model_args, model = ["--model-dir", "model=" + a.model_dir], "model"
    else:
        path = os.path.join(tempfile.mkdtemp(prefix="request-path-"),
                            "tiny.json")
        with open(path, "w") as f:
            json.dump(TINY, f)
        model_args, model = ["--models", path], "tiny"

    http = a.front == "http"

    def encoder_bench(port, seconds):
        if http:
            return http_bench(a, port, model, seconds)
        return run_bench.client_bench(
            a.build, port, model, a.concurrency, a.length, seconds,
            prefix=pinned(a.client_cpus))
    ours = {"command": [os.path.join(a.build, "encoder-server"),
                        "--listen=127.0.0.1:0",
                        "--http-listen=" + ("127.0.0.1:0" if http else "off"),
                        "--log-level=warn"] + model_args,
            "bench": encoder_bench,
            "port": "http_port" if http else "grpc_port"}
    echo = {"command": [os.path.join(a.build, "encoder-bench-echo"), "serve",
                        "--listen=127.0.0.1:0"],
            "bench": lambda port, seconds: echo_bench(a, port, seconds)}
    print("CPU: %s, %d cores; %s over %s, %d callers, %d token(s), %g s x %d"
          " rounds; server on CPUs %s, client on %s"
          % (cpu_model(), os.cpu_count(), model, a.front, a.concurrency,
             a.length, a.seconds, a.rounds, a.server_cpus or "any",
             a.client_cpus or "any"), flush=True)
    servers = {name: ours for name, _ in variants}
    if a.baseline_binary:
        variants.insert(0, ("baseline", {}))
        servers["baseline"] = dict(
            ours, command=[a.baseline_binary] + ours["command"][1:])
    if a.echo:
        variants.append(("grpc-echo", {}))
        servers["grpc-echo"] = echo
    runs = {name: [] for name, _ in variants}
    for r in range(a.rounds):
        for name, env in variants:
            runs[name].append(one_run(a, servers[name], env))
            m = runs[name][-1]
            print("round %d %-12s %8.0f req/s  %6.1f us/request" %
                  (r + 1, name, m["requests/s"],
                   m["server CPU us/request"]), flush=True)
    base = None
    summary = {"cpu": cpu_model(), "cores": os.cpu_count(), "model": model,
               "front": a.front,
               "concurrency": a.concurrency, "length": a.length,
               "seconds": a.seconds, "rounds": a.rounds,
               "server_cpus": a.server_cpus, "client_cpus": a.client_cpus,
               "variants": []}
    keys = ("requests/s", "p50 ms", "p99 ms", "server CPU us/request")
    medians = {name: {k: run_bench.median([m[k] for m in runs[name]])
                      for k in keys} for name, _ in variants}
    for name, env in variants:
        med = medians[name]
        base = base or med
        print("\n%s %s" % (name, " ".join("%s=%s" % kv for kv in
                                          env.items()) or "(as started)"))
        for k, v in med.items():
            ceiling = ("" if not a.echo or name == "grpc-echo" else
                       ", %.2fx grpc-echo" % (v / medians["grpc-echo"][k]))
            print("  %-22s %10.2f  (%.2fx %s%s)" % (
                k, v, v / base[k], variants[0][0], ceiling))
        last = runs[name][-1]["threads"][:6]
        print("  busiest threads (last round, % of a core): " +
              ", ".join("%s %.0f%%" % (n, c) for c, n in last))
        summary["variants"].append(
            {"name": name, "env": env, **med,
             "busiest_threads": [{"name": n, "percent_of_core": round(c, 1)}
                                 for c, n in last]})
    if a.json:
        with open(a.json, "w") as f:
            json.dump(summary, f, indent=1)


if __name__ == "__main__":
    main()
