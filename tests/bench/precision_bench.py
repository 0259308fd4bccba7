#!/usr/bin/python3
"""CPU precision benchmark: encoder-server in float32 and int8 (and bfloat16
where the CPU has it natively) at 1 and 32 callers, 16- and 128-token inputs,
beside the in-process forward of the same model at batch 1 and 32, measured
in one run. Prints the CPU model and flags and the load average with each
row, since the host may be shared.

Usage: precision_bench.py BUILD_DIR [--model sinusoidal] [--duration S]
       [--precisions float32,int8] [--preload LIB] [--models REPO.json]
       [--lengths 16,128]
"""
import argparse
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run_bench import client_bench, start_server, stop_server  # noqa: E402


def cpu_description():
    out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    fields = dict(line.split(":", 1) for line in out.splitlines()
                  if ":" in line)
    flags = fields.get("Flags", "").split()
    wanted = [f for f in ["avx2", "fma", "avx512f", "avx512_vnni",
                          "avx512_bf16", "amx_bf16", "amx_int8"]
              if f in flags]
    return "%s, %s CPUs, flags: %s" % (
        fields.get("Model name", "?").strip(),
        fields.get("CPU(s)", "?").strip(), " ".join(wanted))


def proc_counters(pid):
    """Minor page faults and system CPU seconds of a process so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[7]), int(fields[12]) / os.sysconf("SC_CLK_TCK")


def user_seconds(pid):
    """User CPU seconds of a process so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) / os.sysconf("SC_CLK_TCK")


def load():
    return os.getloadavg()[0]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("build")
    p.add_argument("--model", default="sinusoidal")
    p.add_argument("--duration", type=float, default=8)
    p.add_argument("--json")
    p.add_argument("--preload", help="LD_PRELOAD for the server (e.g. an "
                   "allocator such as libjemalloc.so.2)")
    p.add_argument("--precisions", default="float32,int8")
    p.add_argument("--models", help="a model repository JSON for the server "
                   "and the in-process forward (e.g. one entry with \"path\" "
                   "to hf_bench.py --keep's BERT-base-sized checkpoint)")
    p.add_argument("--lengths", default="16,128")
    a = p.parse_args()
    print("CPU:", cpu_description())
    precisions = [(n, {"float32": [], "int8": ["--quantize=int8"]}[n])
                  for n in a.precisions.split(",")]
    cpu = open("/proc/cpuinfo").read()
    if "avx512_bf16" in cpu or "amx_bf16" in cpu:
        precisions.append(("bfloat16", ["--dtype=bfloat16"]))
    else:
        print("bfloat16: refused on this CPU (no avx512_bf16 or amx_bf16)")
    rows = []
    for name, flags in precisions:
        if a.preload:
            os.environ["LD_PRELOAD"] = a.preload
        repo = ["--models=" + a.models] if a.models else []
        proc, port = start_server(a.build, flags + repo)
        os.environ.pop("LD_PRELOAD", None)
        try:
            for length in [int(x) for x in a.lengths.split(",")]:
                fwd_flags = {"int8": "int8"}.get(name)
                forward = forward_bench_precision(a.build, a.model, length,
                                                  name, fwd_flags, a.models)
                for conc in (1, 32):
                    before = load()
                    faults0, sys0 = proc_counters(proc.pid)
                    r = client_bench(a.build, port, a.model, conc, length,
                                     a.duration)
                    faults1, sys1 = proc_counters(proc.pid)
                    # Warm-up requests count too: divide by all sent.
                    sent = r["throughput"]["sequences_per_s"] * \
                        r["elapsed_s"] + 2 * conc
                    rows.append({
                        "precision": name, "length": length,
                        "concurrency": conc,
                        "tokens_per_s":
                            r["throughput"]["sequences_per_s"] * length,
                        "p50_ms": r["latency_ms"]["p50"],
                        "p99_ms": r["latency_ms"]["p99"],
                        "forward_tokens_per_s":
                            forward[conc]["sequences_per_s"] * length,
                        "minor_faults_per_seq": (faults1 - faults0) / sent,
                        "sys_s": sys1 - sys0,
                        "load": (before + load()) / 2})
                    print(json.dumps(rows[-1]), flush=True)
        finally:
            stop_server(proc)
    base = {(r["length"], r["concurrency"]): r["tokens_per_s"]
            for r in rows if r["precision"] == "float32"}
    print("\n| precision | tokens | callers | tokens/s | p50 ms | p99 ms | "
          "vs float32 | vs in-process | faults/seq | sys s | load |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print("| %s | %d | %d | %.0f | %.2f | %.2f | %.2fx | %.2fx | %.0f "
              "| %.2f | %.1f |" % (
                  r["precision"], r["length"], r["concurrency"],
                  r["tokens_per_s"], r["p50_ms"], r["p99_ms"],
                  r["tokens_per_s"] / base[(r["length"], r["concurrency"])],
                  r["tokens_per_s"] / r["forward_tokens_per_s"],
                  r["minor_faults_per_seq"], r["sys_s"], r["load"]))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=2)


def forward_bench_precision(build, model, length, name, quantize,
                            models=None):
    """In-process forward at batch 1 and 32 in the same precision."""
    out = subprocess.run(
        [os.path.join(build, "encoder-bench-forward"), "--model", model,
         "--batch-sizes", "1,32", "--length", str(length), "--seconds", "2"] +
        (["--models", models] if models else []) +
        (["--quantize", quantize] if quantize else []) +
        (["--dtype", "bfloat16"] if name == "bfloat16" else []),
        check=True, capture_output=True, text=True, timeout=600)
    return {r["batch_size"]: r for r in json.loads(out.stdout)["results"]}


if __name__ == "__main__":
    main()
