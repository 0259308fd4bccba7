"""encoder-server against Infinity and in-process runtimes, same model,
same machine, one run. See README.md beside this file; run.sh makes the
environment and the models and calls this with its Python.

For each model (prepare.py's keys):
  1. Servers, all started at once; each is stopped (SIGSTOP) while
     another one is measured, so that its idle CPU counts nowhere:
       ours  float32, int8 (--quantize=int8) and, where the CPU has native
             bfloat16, bfloat16 (--dtype=bfloat16): gRPC and HTTP ports
       Infinity (infinity_emb v2, offline from the local directories):
             torch engine float32 / int8 (torch dynamic quantization) /
             bfloat16, optimum engine (ONNX Runtime) float32 / int8
             (model_quantized.onnx)
  2. Quality: every server embeds the fixed quality texts over HTTP; the
     in-process runtimes embed them too. Mean cosine and Spearman of the
     pairwise similarities against the same side's float32 and against
     sentence-transformers' float32.
  3. --rounds rounds, each: every (length, callers) cell on every server
     endpoint in turn (ours gRPC by encoder-client bench with token-id
     inputs of exactly that length; ours HTTP and Infinity by loadgen.py
     with texts of exactly that many tokens), in the first round the bulk
     job on every server (--bulk-models)
     (ours: encoder-client embed --input over EmbedStream; Infinity: its
     /embeddings with --bulk-batch texts a request, --bulk-in-flight at
     once), then every in-process runtime at every thread setting.
  Medians over rounds. Server CPU time (user + system, /proc) per sequence
  and resident set after the cell come from the server's process.
Prints lscpu, Markdown tables; --json writes every number.
"""
import argparse
import json
import os
import pathlib
import shutil
import signal
import socket
import statistics
import threading
import subprocess
import sys
import time
import urllib.request

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
PY = sys.executable
CLK = os.sysconf("SC_CLK_TCK")


def log(*a):
    print("[bench]", *a, file=sys.stderr, flush=True)


# ---------------------------------------------------------------- /proc
def proc_cpu_s(pid):
    """user + system seconds of pid and its waited-for children."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return sum(int(x) for x in fields[11:15]) / CLK


def proc_rss_kib(pid, key="VmRSS"):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_json(url, body=None, timeout=600):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={
        "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read())


# -------------------------------------------------------------- servers
class Server:
    def __init__(self, name, side, precision, cmd, env, log_path,
                 http_path, ready_file=None, http_port=None, cwd=None):
        self.name, self.side, self.precision = name, side, precision
        self.cmd, self.http_path = cmd, http_path
        self.log = open(log_path, "w")
        self.proc = subprocess.Popen(cmd, stdout=self.log,
                                     stderr=subprocess.STDOUT, env=env,
                                     cwd=cwd, start_new_session=True)
        self.cwd = cwd
        self.ready_file, self.http_port = ready_file, http_port
        self.grpc_port = None
        self.t_start = time.time()

    def wait_ready(self, timeout=600):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("%s exited %s (log %s)" % (
                    self.name, self.proc.returncode, self.log.name))
            if self.ready_file:
                if os.path.isfile(self.ready_file):
                    r = json.load(open(self.ready_file))
                    self.grpc_port, self.http_port = (r["grpc_port"],
                                                      r["http_port"])
                    self.startup_s = time.time() - self.t_start
                    return
            else:
                try:
                    http_json("http://127.0.0.1:%d/models" % self.http_port,
                              timeout=2)
                    self.startup_s = time.time() - self.t_start
                    return
                except OSError:
                    pass
            time.sleep(0.5)
        raise RuntimeError("%s not ready in %d s" % (self.name, timeout))

    @property
    def url(self):
        return "http://127.0.0.1:%d%s" % (self.http_port, self.http_path)

    def pause(self, paused):
        """SIGSTOP / SIGCONT the server's process group: a server not being
        measured takes no CPU at all (Infinity's idle loops do, otherwise)."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid,
                      signal.SIGSTOP if paused else signal.SIGCONT)

    def stop(self):
        if self.proc.poll() is None:
            self.pause(False)
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def start_servers(a, key, work, tmp, bf16_ok, failed):
    base = work / "models" / key
    servers = []
    ours = [("fp32", []), ("int8", ["--quantize=int8"])]
    if bf16_ok:
        ours.append(("bf16", ["--dtype=bfloat16"]))
    for prec, flags in ours:
        ready = tmp / ("ours-%s-%s.ready" % (key, prec))
        if ready.exists():
            ready.unlink()
        cmd = [str(a.build / "encoder-server"),
               "--model-dir", "m=%s" % (base / "st"),
               "--listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0",
               "--ready-file", str(ready), "--warm-up",
               "--log-level", "warn"] + flags + a.server_arg
        servers.append(Server("ours-" + prec, "ours", prec, cmd,
                              os.environ.copy(),
                              tmp / ("ours-%s-%s.log" % (key, prec)),
                              "/v1/embeddings", ready_file=str(ready)))
    env = dict(os.environ, HF_HOME=str(work / "hf"), HF_HUB_OFFLINE="1",
               TRANSFORMERS_OFFLINE="1", INFINITY_ANONYMOUS_USAGE_STATS="0",
               DO_NOT_TRACK="1", TOKENIZERS_PARALLELISM="false")
    infinity = [("torch", "fp32", base / "st", ["--dtype", "float32"]),
                ("torch", "int8", base / "st", ["--dtype", "int8"]),
                ("torch", "bf16", base / "st", ["--dtype", "bfloat16"]),
                ("optimum", "fp32", base / "onnx-fused", []),
                ("optimum", "int8", base / "onnx-int8", [])]
    for engine, prec, model_dir, flags in infinity:
        if engine == "torch" and prec == "bf16" and not bf16_ok:
            continue
        port = free_port()
        sub_env, cwd, model_id = env, None, str(model_dir)
        if engine == "optimum":
            # Infinity 0.0.78 hands optimum the ONNX file's full path, which
            # optimum 2.x refuses ("only found: [model.onnx]"), and its
            # graph optimization passes an argument optimum 2.x no longer
            # takes. So: run in the directory with --model-id . (the file
            # name comes out bare), a cache of its own, the graph already
            # fused by prepare.py (what that step makes) and the step off.
            cwd, model_id = str(model_dir), "."
            sub_env = dict(env, HF_HOME=str(work / ("hf-" + prec)))
            flags = flags + ["--onnx-disable-optimize",
                             "--pooling-method", "mean"]
        cmd = [str(pathlib.Path(PY).parent / "infinity_emb"), "v2",
               "--model-id", model_id, "--served-model-name", "m",
               "--engine", engine, "--device", "cpu", "--port", str(port),
               "--host", "127.0.0.1", "--no-vector-disk-cache",
               "--batch-size", str(a.infinity_batch_size),
               "--log-level", "warning"] + flags
        servers.append(Server("infinity-%s-%s" % (engine, prec), "infinity-"
                              + engine, prec, cmd, sub_env,
                              tmp / ("infinity-%s-%s-%s.log" % (
                                  engine, prec, key)),
                              "/embeddings", http_port=port, cwd=cwd))
    started = []
    try:
        for s in servers:
            try:
                s.wait_ready()
            except RuntimeError as e:
                # Recorded and left out: the other servers still run.
                log("FAILED to start:", e)
                s.stop()
                failed[s.name] = {"cmd": " ".join(s.cmd), "cwd": s.cwd,
                                  "failed": str(e),
                                  "log_tail": open(s.log.name).read()[-3000:]}
                continue
            started.append(s)
            log("%s ready in %.1f s, RSS %d MiB" % (
                s.name, s.startup_s, proc_rss_kib(s.proc.pid) // 1024))
    except BaseException:
        for s in servers:
            s.stop()
        raise
    servers = started
    return servers


def only(servers, server):
    """Resumes server and stops every other one."""
    for s in servers:
        if s is not server:
            s.pause(True)
    server.pause(False)
    time.sleep(0.2)


def idle_cpu_pct(servers, seconds=3.0):
    """CPU each started server burns while no request is sent, all running."""
    for s in servers:
        s.pause(False)
    c0 = {s.name: proc_cpu_s(s.proc.pid) for s in servers}
    time.sleep(seconds)
    return {s.name: 100 * (proc_cpu_s(s.proc.pid) - c0[s.name]) / seconds
            for s in servers}


def measured(server, fn):
    pid = server.proc.pid
    c0 = proc_cpu_s(pid)
    r = fn()
    r["server_cpu_s"] = proc_cpu_s(pid) - c0
    r["server_rss_kib"] = proc_rss_kib(pid)
    sent = r.get("sequences_total")
    if sent:
        r["cpu_ms_per_seq"] = 1000 * r["server_cpu_s"] / sent
    return r


def grpc_cell(a, s, texts_dir, length, conc):
    out = subprocess.run(
        [str(a.build / "encoder-client"), "bench", "--target",
         "127.0.0.1:%d" % s.grpc_port, "--model", "m", "--concurrency",
         str(conc), "--length", str(length), "--duration-s",
         str(a.duration), "--warmup-requests", str(2 * conc), "--json"],
        capture_output=True, text=True, timeout=600 + 10 * a.duration)
    if out.returncode != 0:
        return {"error": out.stderr[-500:]}
    r = json.loads(out.stdout)
    return {"sequences_per_s": r["throughput"]["sequences_per_s"],
            "p50_ms": r["latency_ms"]["p50"], "p99_ms": r["latency_ms"]["p99"],
            "errors": r["failed_requests"],
            "mean_batch": r["batch_size"]["mean"],
            "sequences_total": r["requests"] + 2 * conc}


def http_cell(a, s, texts_dir, length, conc):
    out = subprocess.run(
        [PY, str(HERE / "loadgen.py"), "--url", s.url, "--model", "m",
         "--texts", str(texts_dir / ("len-%d.jsonl" % length)),
         "--concurrency", str(conc), "--duration", str(a.duration),
         "--warmup", "2"],
        capture_output=True, text=True, timeout=600 + 10 * a.duration)
    if out.returncode != 0:
        return {"error": out.stderr[-500:]}
    r = json.loads(out.stdout)
    r["sequences_total"] = r["requests"] + r["warmup_requests"]
    return r


def bulk_job(a, s, texts_dir, tmp):
    bulk = texts_dir / "bulk.txt"
    n = sum(1 for line in open(bulk) if line.strip())
    if s.side == "ours":
        t0 = time.perf_counter()
        out = subprocess.run(
            [str(a.build / "encoder-client"), "embed", "--target",
             "127.0.0.1:%d" % s.grpc_port, "--model", "m", "--input",
             str(bulk), "--output-format", "npy", "--out",
             str(tmp / "bulk.npy"), "--batch-size", str(a.bulk_batch),
             "--max-in-flight", str(a.bulk_in_flight), "--truncate"],
            capture_output=True, text=True, timeout=7200)
        wall = time.perf_counter() - t0
        if out.returncode != 0:
            return {"error": out.stderr[-500:]}
        rows = np.load(tmp / "bulk.npy").shape[0]
        return {"texts": rows, "elapsed_s": wall,
                "sequences_per_s": rows / wall, "sequences_total": rows,
                "client": "encoder-client embed --input (EmbedStream)"}
    out = subprocess.run(
        [PY, str(HERE / "loadgen.py"), "--url", s.url, "--model", "m",
         "--bulk", str(bulk), "--batch", str(a.bulk_batch), "--in-flight",
         str(a.bulk_in_flight)], capture_output=True, text=True,
        timeout=7200)
    if out.returncode != 0:
        return {"error": out.stderr[-500:]}
    r = json.loads(out.stdout)
    r["sequences_total"] = r["texts"]
    r["client"] = "loadgen.py --bulk (/embeddings batches)"
    if r["texts"] != n:
        r["error"] = "embedded %d of %d texts" % (r["texts"], n)
    return r


def server_quality_embeddings(s, texts):
    embs = []
    for i in range(0, len(texts), 32):
        r = http_json(s.url, {"model": "m", "input": texts[i:i + 32]})
        data = sorted(r["data"], key=lambda d: d["index"])
        embs += [d["embedding"] for d in data]
    e = np.asarray(embs, dtype=np.float32)
    return e / np.linalg.norm(e, axis=1, keepdims=True)


# ------------------------------------------------------------ in-process
def run_inproc(a, key, work, runtime, prec, threads, quality_out=None):
    cmd = [PY, str(HERE / "inproc.py"), "--runtime", runtime, "--precision",
           prec, "--threads", str(threads), "--model-root",
           str(work / "models" / key), "--texts", str(work / "texts" / key),
           "--batch-sizes", a.batch_sizes, "--lengths", a.lengths,
           "--seconds", str(a.inproc_seconds),
           "--min-runs", str(a.inproc_min_runs)]
    if quality_out:
        cmd += ["--quality-out", str(quality_out)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=7200,
                         env=dict(os.environ, OMP_NUM_THREADS=str(threads),
                                  TOKENIZERS_PARALLELISM="false"))
    if out.returncode != 0:
        return {"error": out.stderr[-1500:]}
    return json.loads(out.stdout)


def run_forward(a, key, work, tmp, prec, intra, executions):
    repo = tmp / ("repo-%s.json" % key)
    repo.write_text(json.dumps({"models": [
        {"name": "m", "path": str(work / "models" / key / "st")}]}))
    flags = {"fp32": [], "int8": ["--quantize", "int8"],
             "bf16": ["--dtype", "bfloat16"]}[prec]
    cells = []
    for length in a.lengths.split(","):
        cmd = [str(a.build / "encoder-bench-forward"), "--models", str(repo),
               "--model", "m", "--batch-sizes",
               *a.batch_sizes.split(","), "--length", length, "--seconds",
               str(a.inproc_seconds), "--intra-op-threads", str(intra),
               "--executions", str(executions)] + flags
        t0 = time.perf_counter()
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        peak, chunks = 0, []
        reader = threading.Thread(target=lambda: chunks.append(
            p.stdout.read()))
        reader.start()
        while p.poll() is None:  # sample the resident set while it runs
            try:
                peak = max(peak, proc_rss_kib(p.pid))
            except OSError:
                pass
            time.sleep(0.2)
        reader.join()
        err = p.stderr.read()
        if p.returncode != 0:
            return {"error": err[-1500:]}
        r = json.loads("".join(chunks))
        for c in r["results"]:
            cells.append({"batch": c["batch_size"], "length": int(length),
                          "runs": c["runs"],
                          "sequences_per_s": c["sequences_per_s"],
                          "p50_ms": c["p50_ms"], "rss_kib": peak,
                          "wall_s": time.perf_counter() - t0})
    return {"runtime": "ours-forward", "precision": prec,
            "threads": "%d intra-op x %d executions" % (intra, executions),
            "cells": cells}


# --------------------------------------------------------------- quality
def quality(a_emb, b_emb):
    from scipy.stats import spearmanr
    a_n = a_emb / np.linalg.norm(a_emb, axis=1, keepdims=True)
    b_n = b_emb / np.linalg.norm(b_emb, axis=1, keepdims=True)
    cos = float(np.mean(np.sum(a_n * b_n, axis=1)))
    iu = np.triu_indices(len(a_n), 1)
    rho = spearmanr((a_n @ a_n.T)[iu], (b_n @ b_n.T)[iu]).statistic
    return {"mean_cosine": cos, "spearman": float(rho)}


# ---------------------------------------------------------------- tables
def fmt(x, nd=1):
    if x is None or (isinstance(x, float) and x != x):
        return "-"
    return ("%%.%df" % nd) % x


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def main():
    p = argparse.ArgumentParser()
    p.add_argument("build", type=pathlib.Path)
    p.add_argument("--work", type=pathlib.Path, required=True)
    p.add_argument("--models", default="minilm,mpnet,bert-base")
    p.add_argument("--lengths", default="16,128,512")
    p.add_argument("--concurrency", default="1,32")
    p.add_argument("--batch-sizes", default="1,32")
    p.add_argument("--duration", type=float, default=15)
    p.add_argument("--inproc-seconds", type=float, default=5)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--threads", default="1,2",
                   help="in-process thread counts tried for each runtime")
    p.add_argument("--inproc-min-runs", type=int, default=3,
                   help="timed forwards at least, whatever the seconds")
    p.add_argument("--bulk-models", default="minilm",
                   help="models whose bulk job runs (on two cores 10,000 "
                        "texts take hours per server on the base-sized "
                        "ones); 'all' for every model")
    p.add_argument("--bulk-batch", type=int, default=32)
    p.add_argument("--bulk-in-flight", type=int, default=4)
    p.add_argument("--infinity-batch-size", type=int, default=32)
    p.add_argument("--server-arg", action="append", default=[])
    p.add_argument("--skip", default="",
                   help="comma list of parts to skip: servers, bulk, inproc")
    p.add_argument("--json", type=pathlib.Path)
    a = p.parse_args()
    a.build = a.build.resolve()
    work = a.work.resolve()
    skip = set(x for x in a.skip.split(",") if x)
    lscpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    print("## Machine\n\n```\n" + lscpu.rstrip() + "\n```\n")
    print("load average at start: %.2f\n" % os.getloadavg()[0])
    flags = next((l.split(":", 1)[1].split() for l in lscpu.splitlines()
                  if l.startswith("Flags:")), [])
    bf16_ok = "avx512_bf16" in flags or "amx_bf16" in flags
    if not bf16_ok:
        print("no native bfloat16 (avx512_bf16 / amx_bf16): bfloat16 rows "
              "skipped\n")
    results = {"lscpu": lscpu, "args": {k: str(v) for k, v in
                                        vars(a).items()}, "models": {}}
    lengths = [int(x) for x in a.lengths.split(",")]
    concs = [int(x) for x in a.concurrency.split(",")]
    threads = [int(x) for x in a.threads.split(",")]
    t_all = time.time()
    for key in a.models.split(","):
        tmp = work / "run" / key
        if tmp.exists():
            shutil.rmtree(tmp)
        tmp.mkdir(parents=True)
        texts_dir = work / "texts" / key
        qtexts = json.loads((texts_dir / "quality.json").read_text())
        res = {"servers": {}, "cells": [], "bulk": [], "inproc": [],
               "quality": {}, "failed_servers": {}}
        results["models"][key] = res
        log("model", key)

        # In-process quality embeddings (and the reference) first.
        inproc_specs = [("st", "fp32"), ("st", "bf16"), ("st", "int8"),
                        ("ort", "fp32"), ("ort", "int8"),
                        ("openvino", "fp32")]
        if bf16_ok:
            inproc_specs.append(("openvino", "bf16"))
        else:
            inproc_specs = [s for s in inproc_specs if s[1] != "bf16"]
        emb = {}
        servers = []
        try:
            if "servers" not in skip or "bulk" not in skip:
                servers = start_servers(a, key, work, tmp, bf16_ok,
                                        res["failed_servers"])
                idle = idle_cpu_pct(servers)
                for s in servers:
                    log("%s idle: %.1f%% CPU" % (s.name, idle[s.name]))
                    res["servers"][s.name] = {"cmd": " ".join(s.cmd),
                                              "cwd": s.cwd,
                                              "startup_s": s.startup_s,
                                              "idle_cpu_pct": idle[s.name]}
                    only(servers, s)
                    emb[s.name] = server_quality_embeddings(s, qtexts)
            for rnd in range(a.rounds):
                log("round", rnd + 1, "of", a.rounds)
                if "servers" not in skip:
                    for length in lengths:
                        for conc in concs:
                            for s in servers:
                                kinds = (["grpc", "http"] if s.side == "ours"
                                         else ["http"])
                                only(servers, s)
                                for kind in kinds:
                                    fn = grpc_cell if kind == "grpc" else \
                                        http_cell
                                    r = measured(s, lambda: fn(
                                        a, s, texts_dir, length, conc))
                                    r.update({"server": s.name, "side":
                                              s.side, "precision":
                                              s.precision, "api": kind,
                                              "length": length,
                                              "callers": conc,
                                              "round": rnd})
                                    res["cells"].append(r)
                                    log("%s %s n=%d c=%d: %s seq/s p99 %s"
                                        % (s.name, kind, length, conc,
                                           fmt(r.get("sequences_per_s")),
                                           fmt(r.get("p99_ms")))
                                        + (" ERROR " + r["error"]
                                           if "error" in r else ""))
                if "bulk" not in skip and rnd == 0 and (
                        a.bulk_models == "all"
                        or key in a.bulk_models.split(",")):
                    for s in servers:
                        only(servers, s)
                        r = measured(s, lambda: bulk_job(a, s, texts_dir,
                                                         tmp))
                        r.update({"server": s.name, "round": rnd})
                        res["bulk"].append(r)
                        log("bulk %s: %s seq/s%s" % (
                            s.name, fmt(r.get("sequences_per_s")),
                            " ERROR " + r["error"] if "error" in r else ""))
                if "inproc" not in skip:
                    for s in servers:  # nothing else runs beside them
                        s.pause(True)
                    for runtime, prec in inproc_specs:
                        for t in threads:
                            qo = (tmp / ("q-%s-%s.npy" % (runtime, prec))
                                  if rnd == 0 and t == max(threads) else None)
                            r = run_inproc(a, key, work, runtime, prec, t, qo)
                            r.update({"runtime": runtime, "precision": prec,
                                      "threads": t, "round": rnd})
                            res["inproc"].append(r)
                            if "error" in r:
                                log("inproc %s %s t=%d ERROR %s" % (
                                    runtime, prec, t, r["error"]))
                            if qo and qo.is_file():
                                emb["%s-%s" % (runtime, prec)] = np.load(qo)
                    precs = ["fp32", "int8"] + (["bf16"] if bf16_ok else [])
                    for prec in precs:
                        for intra, ex in ((2, 1), (1, 2)):
                            r = run_forward(a, key, work, tmp, prec, intra, ex)
                            r.update({"round": rnd, "runtime": "ours-forward",
                                      "precision": prec})
                            res["inproc"].append(r)
                            if "error" in r:
                                log("forward %s ERROR %s" % (prec,
                                                             r["error"]))
        finally:
            for s in servers:
                s.stop()
        # Quality against the side's float32 and sentence-transformers'.
        ref = emb.get("st-fp32")
        for name, e in emb.items():
            side, _, prec = name.rpartition("-")
            own = emb.get(side + "-fp32")
            res["quality"][name] = {
                "vs_own_fp32": quality(e, own) if own is not None else None,
                "vs_st_fp32": quality(e, ref) if ref is not None else None}
        print_model(key, res, lengths, concs, a)
    results["total_s"] = time.time() - t_all
    print("\ntotal time: %.0f s" % results["total_s"])
    if a.json:
        a.json.write_text(json.dumps(results, indent=1, default=str))
        print("JSON:", a.json)


def print_model(key, res, lengths, concs, a):
    print("\n## %s\n" % key)
    for name, s in res["servers"].items():
        print("- `%s`: `%s` (ready in %.0f s; idle %.1f%% CPU, paused "
              "with SIGSTOP while others are measured)" % (
                  name, s["cmd"], s["startup_s"], s["idle_cpu_pct"]))
    for name, f in res.get("failed_servers", {}).items():
        lines = [l for l in f["log_tail"].splitlines()
                 if "Error" in l or "Exception" in l] or [f["failed"]]
        print("- `%s` FAILED to start: `%s`\n  %s" % (
            name, f["cmd"], lines[-1].strip()[:300]))
    if res["cells"]:
        print("\n### Servers over the network (medians of %d rounds; "
              "%.0f s a cell)\n" % (a.rounds, a.duration))
        print("| server | precision | API | tokens | callers | seq/s | p50 ms "
              "| p99 ms | server CPU ms/seq | RSS MiB | errors |")
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        groups = {}
        for c in res["cells"]:
            groups.setdefault((c["length"], c["callers"], c["server"],
                               c["api"]), []).append(c)
        for (length, conc, server, api), cs in sorted(
                groups.items(), key=lambda kv: (kv[0][0], kv[0][1])):
            c0 = cs[0]
            print("| %s | %s | %s | %d | %d | %s | %s | %s | %s | %s | %s |" % (
                c0["side"], c0["precision"], api, length, conc,
                fmt(med([c.get("sequences_per_s") for c in cs])),
                fmt(med([c.get("p50_ms") for c in cs])),
                fmt(med([c.get("p99_ms") for c in cs])),
                fmt(med([c.get("cpu_ms_per_seq") for c in cs]), 2),
                fmt(med([c.get("server_rss_kib", 0) / 1024 for c in cs]), 0),
                sum(c.get("errors", 0) for c in cs) if all(
                    "error" not in c for c in cs) else "FAILED"))
    if res["bulk"]:
        print("\n### Bulk job (%s)\n" % "all texts of bulk.txt")
        print("| server | texts | client | seq/s | wall s | server CPU "
              "ms/seq | RSS MiB |")
        print("|---|---|---|---|---|---|---|")
        groups = {}
        for b in res["bulk"]:
            groups.setdefault(b["server"], []).append(b)
        for server, bs in groups.items():
            ok = [b for b in bs if "error" not in b]
            if not ok:
                print("| %s | - | - | FAILED | - | - | - |" % server)
                continue
            print("| %s | %d | %s | %s | %s | %s | %s |" % (
                server, ok[0]["texts"], ok[0]["client"],
                fmt(med([b["sequences_per_s"] for b in ok])),
                fmt(med([b["elapsed_s"] for b in ok])),
                fmt(med([b.get("cpu_ms_per_seq") for b in ok]), 2),
                fmt(med([b["server_rss_kib"] / 1024 for b in ok]), 0)))
    if res["inproc"]:
        print("\n### In-process forward limit (medians of rounds; best "
              "thread setting per runtime and precision, named)\n")
        print("| runtime | precision | batch | tokens | seq/s | p50 ms/batch "
              "| CPU ms/seq | RSS MiB | best threads | other setting seq/s |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        table = {}
        for r in res["inproc"]:
            if "error" in r:
                continue
            for c in r["cells"]:
                table.setdefault((r["runtime"], r["precision"], c["batch"],
                                  c["length"]), {}).setdefault(
                    str(r["threads"]), []).append(c)
        errors = [r for r in res["inproc"] if "error" in r]
        for (rt, prec, batch, length), by_t in sorted(table.items()):
            scored = sorted(by_t.items(), key=lambda kv: -med(
                [c["sequences_per_s"] for c in kv[1]]))
            best_t, best = scored[0]
            other = ", ".join("%s: %s" % (t, fmt(med(
                [c["sequences_per_s"] for c in cs]))) for t, cs in scored[1:])
            print("| %s | %s | %d | %d | %s | %s | %s | %s | %s | %s |" % (
                rt, prec, batch, length,
                fmt(med([c["sequences_per_s"] for c in best])),
                fmt(med([c["p50_ms"] for c in best])),
                fmt(med([c.get("cpu_ms_per_seq") for c in best]), 2),
                fmt(med([c["rss_kib"] / 1024 for c in best]), 0),
                best_t, other or "-"))
        for r in errors:
            print("\nFAILED: %s %s threads %s: %s" % (
                r["runtime"], r["precision"], r["threads"],
                r["error"][-300:]))
    if res["quality"]:
        print("\n### Quality on %s fixed texts (mean cosine, Spearman of "
              "pairwise similarities)\n" % "the")
        print("| side | precision | cos vs own fp32 | Spearman vs own fp32 "
              "| cos vs ST fp32 | Spearman vs ST fp32 |")
        print("|---|---|---|---|---|---|")
        for name, q in sorted(res["quality"].items()):
            side, _, prec = name.rpartition("-")
            own, st = q["vs_own_fp32"] or {}, q["vs_st_fp32"] or {}
            print("| %s | %s | %s | %s | %s | %s |" % (
                side, prec, fmt(own.get("mean_cosine"), 6),
                fmt(own.get("spearman"), 6), fmt(st.get("mean_cosine"), 6),
                fmt(st.get("spearman"), 6)))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
