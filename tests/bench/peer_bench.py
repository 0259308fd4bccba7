#!/usr/bin/env python3
"""encoder-server against a small Python server on the same model, in one run.

Builds eager_bench.py's model (vocabulary 10000, width 512, 8 heads,
feed-forward 2048, sinusoidal positions, --layers layers; seed 0), writes it
as safetensors with a model repository, and starts
  - encoder-server on that repository (its defaults, float32), and
  - peer_server.py on the same file (grpcio + PyTorch eager with its own
    dynamic batcher: what a user would otherwise write).
First both must agree: the pooled embeddings of a few inputs of different
lengths, sent in one request, must have cosine similarity >= 0.9999 and the
same norms within 1e-3 relative (--min-cosine, --max-norm-difference: an
int8 or bfloat16 server against the float32 peer needs less); otherwise
the comparison is void and the script fails. Then, in --rounds interleaved rounds, encoder-client bench
drives each server at 1 and 32 callers with 16- and 128-token inputs, and
encoder-bench-forward times the same repository in-process at batch 1, 32
and the batch sizes the server formed most. Prints the CPU (lscpu) and the
load average, a Markdown table of medians, and the ratios
ours / peer and ours / best in-process forward. Each server's minor page
faults and CPU seconds (user, system) per sequence come from /proc.

Usage (the project's .venv: torch, grpcio; peer_server.py runs on the same
Python):
  .venv/bin/python tests/bench/peer_bench.py BUILD_DIR [--layers 4]
         [--duration 8] [--rounds 2]
         [--lengths 16,128,8-128] [--concurrency 1,32] [--check-only]
         [--server-arg FLAG]... [--forward-arg FLAG]... [--min-cosine C]
         [--max-norm-difference D] [--json OUT]
"""
import argparse
import json
import math
import os
import pathlib
import signal
import subprocess
import sys
import tempfile

import torch

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parents[1] / "client" / "python" /
                        "examples"))
import minimal_client as encoder_client  # noqa: E402
from eager_bench import EagerModel, load_writer  # noqa: E402
from precision_bench import (cpu_description, proc_counters,  # noqa: E402
                             user_seconds)
from run_bench import (client_bench, median, start_server,  # noqa: E402
                       stop_server, wait_ready)


def write_model(directory, layers):
    torch.manual_seed(0)
    model = EagerModel(layers).eval()
    weights = os.path.join(directory, "weights.safetensors")
    load_writer()(weights, {k: v.contiguous()
                            for k, v in model.state_dict().items()})
    repository = os.path.join(directory, "repository.json")
    with open(repository, "w") as f:
        json.dump({"models": [{"name": "ours", "weights":
                               "weights.safetensors",
                               "config": {"num_layers": layers,
                                          "max_input_tokens": 2048}}]}, f)
    return weights, repository


def start_peer(weights, layers, directory, threads):
    ready = os.path.join(directory, "peer-ready.json")
    log = open(os.path.join(directory, "peer.log"), "w")
    proc = subprocess.Popen(
        [sys.executable, str(HERE / "peer_server.py"), "--weights",
         weights, "--layers", str(layers), "--threads", str(threads),
         "--ready-file", ready], stdout=log, stderr=subprocess.STDOUT)
    return proc, wait_ready(proc, ready, log.name, "peer server")


def pooled_of(pb2, stub, model, sequences):
    request = pb2.EmbedRequest(model=model)
    for ids in sequences:
        request.inputs.add().token_ids.ids.extend(ids)
    response = stub.Embed(request, timeout=60)
    return [encoder_client.decode_tensor(pb2, r.pooled)
            for r in response.results]


def check_agreement(pb2, pb2_grpc, ports, min_cosine, max_norm):
    """Both servers' pooled embeddings of the same padded batch."""
    import grpc
    gen = torch.Generator().manual_seed(7)
    sequences = [torch.randint(0, 10000, (n,), generator=gen).tolist()
                 for n in (5, 16, 37, 128)]
    outputs = {}
    for name, port in ports.items():
        channel = grpc.insecure_channel("127.0.0.1:%d" % port)
        outputs[name] = pooled_of(pb2, pb2_grpc.EncoderServiceStub(channel),
                                  "", sequences)
        channel.close()
    worst_cos, worst_norm = 1.0, 0.0
    for a, b in zip(outputs["ours"], outputs["peer"]):
        dot = sum(x * y for x, y in zip(a, b))
        na = math.sqrt(sum(x * x for x in a))
        nb = math.sqrt(sum(x * x for x in b))
        cos, norm = dot / (na * nb), abs(na - nb) / nb
        # NaN must fail: min/max would skip it.
        worst_cos = cos if not cos >= worst_cos else worst_cos
        worst_norm = norm if not norm <= worst_norm else worst_norm
    print("agreement: worst cosine %.7f, worst norm difference %.2e "
          "(%d inputs of 5-128 tokens)" % (worst_cos, worst_norm,
                                           len(sequences)), flush=True)
    return bool(worst_cos >= min_cosine and worst_norm <= max_norm)


def forward_bench(build, repository, sizes, length, seconds, extra=()):
    lo, _, hi = length.partition("-")
    lengths = ["--length", hi, "--min-length", lo] if hi else [
        "--length", lo]
    out = subprocess.run(
        [os.path.join(build, "encoder-bench-forward"), "--models", repository,
         "--model", "ours", "--batch-sizes",
         ",".join(str(s) for s in sorted(sizes)), *lengths,
         "--seconds", str(seconds), *extra],
        check=True, capture_output=True, text=True, timeout=600)
    return {r["batch_size"]: r for r in json.loads(out.stdout)["results"]}


def measured(build, proc, port, model, conc, length, duration):
    faults0, sys0 = proc_counters(proc.pid)
    user0 = user_seconds(proc.pid)
    r = client_bench(build, port, model, conc, length, duration)
    faults1, sys1 = proc_counters(proc.pid)
    user1 = user_seconds(proc.pid)
    # The client's warm-up requests (2 per caller) count too.
    sent = r["throughput"]["sequences_per_s"] * r["elapsed_s"] + 2 * conc
    return {"sequences_per_s": r["throughput"]["sequences_per_s"],
            "tokens_per_s": r["throughput"]["tokens_per_s"],
            "p50_ms": r["latency_ms"]["p50"], "p99_ms": r["latency_ms"]["p99"],
            "errors": sum(r["errors"].values()),
            "histogram": r["batch_size"]["histogram"],
            "mean_batch": r["batch_size"]["mean"],
            "faults_per_seq": (faults1 - faults0) / sent,
            "cpu_ms_per_seq": 1000 * ((user1 - user0) + (sys1 - sys0)) / sent,
            "sys_share": (sys1 - sys0) / max(1e-9, (user1 - user0) +
                                             (sys1 - sys0))}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("build")
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--duration", type=float, default=8)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--lengths", default="16,128",
                   help="tokens per input, or MIN-MAX: lengths drawn "
                        "uniformly per input (the in-process batches too), "
                        "tokens/s counting real tokens")
    p.add_argument("--concurrency", default="1,32")
    p.add_argument("--peer-threads", type=int, default=1,
                   help="the peer's torch intra-op threads (encoder-server's "
                        "--intra-op-threads default is 1 on two cores: "
                        "the cores over its two executions)")
    p.add_argument("--server-arg", action="append", default=[])
    p.add_argument("--min-cosine", type=float, default=0.9999,
                   help="agreement needed before measuring (lower it, with "
                        "--max-norm-difference, when --server-arg picks int8 "
                        "or bfloat16: the peer stays float32)")
    p.add_argument("--max-norm-difference", type=float, default=1e-3)
    p.add_argument("--forward-arg", action="append", default=[],
                   help="one more encoder-bench-forward flag, to match "
                        "--server-arg (e.g. --quantize=int8)")
    p.add_argument("--check-only", action="store_true",
                   help="start both servers, check that they agree, stop")
    p.add_argument("--json")
    a = p.parse_args()
    lengths = a.lengths.split(",")
    concurrencies = [int(x) for x in a.concurrency.split(",")]
    print("CPU:", cpu_description())
    print("load average at start: %.2f" % os.getloadavg()[0], flush=True)

    with tempfile.TemporaryDirectory(prefix="peer-bench-") as tmp:
        weights, repository = write_model(tmp, a.layers)
        pb2, pb2_grpc = encoder_client.load_stubs(os.path.join(tmp))
        ours, ours_port = start_server(
            a.build, ["--models=" + repository] + a.server_arg)
        peer = None
        try:
            peer, peer_port = start_peer(weights, a.layers, tmp,
                                         a.peer_threads)
            if not check_agreement(pb2, pb2_grpc,
                                   {"ours": ours_port, "peer": peer_port},
                                   a.min_cosine, a.max_norm_difference):
                print("the two servers disagree: no comparison")
                return 1
            if a.check_only:
                return 0
            rows = run_rounds(a, lengths, concurrencies, repository,
                              {"ours": (ours, ours_port),
                               "peer": (peer, peer_port)})
        finally:
            stop_server(ours)
            if peer is not None:
                peer.send_signal(signal.SIGTERM)
                peer.wait(timeout=30)
    report(a, rows)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=2)
    return 1 if any(r["errors"] for r in rows if "errors" in r) else 0


def run_rounds(a, lengths, concurrencies, repository, servers):
    rows = []
    for round_index in range(a.rounds):
        for length in lengths:
            formed = set()
            for conc in concurrencies:
                # Alternate which server goes first, so drift hits both.
                order = ["ours", "peer"] if round_index % 2 == 0 else [
                    "peer", "ours"]
                for name in order:
                    proc, port = servers[name]
                    before = os.getloadavg()[0]
                    r = measured(a.build, proc, port, "", conc, length,
                                 a.duration)
                    r.update({"server": name, "round": round_index,
                              "length": length, "concurrency": conc,
                              "load": before})
                    rows.append(r)
                    print(json.dumps({k: v for k, v in r.items()
                                      if k != "histogram"}), flush=True)
                    if name == "ours":
                        h = r["histogram"]
                        formed |= {int(k) for k in
                                   sorted(h, key=lambda k: -h[k])[:2]}
            sizes = {1, max(concurrencies)} | formed
            forward = forward_bench(a.build, repository, sizes, length,
                                    max(1.5, a.duration / 4), a.forward_arg)
            for size, f in forward.items():
                rows.append({"server": "forward", "round": round_index,
                             "length": length, "batch": size,
                             "sequences_per_s": f["sequences_per_s"],
                             "tokens_per_s": f["real_tokens_per_s"],
                             "p50_ms": f["p50_ms"]})
    return rows


def report(a, rows):
    print("\nload average at end: %.2f" % os.getloadavg()[0])
    print("\n%d-layer model, float32, medians of %d rounds of %.0f s\n" %
          (a.layers, a.rounds, a.duration))
    print("| tokens | callers | server | seq/s | tokens/s | p50 ms | p99 ms "
          "| mean batch | CPU ms/seq | system share | faults/seq | "
          "ours / peer | ours / best in-process |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for length in sorted({r["length"] for r in rows},
                         key=lambda x: [int(n) for n in x.split("-")]):
        fwd = [r for r in rows if r["server"] == "forward" and
               r["length"] == length]
        best_by_round = {}
        for r in fwd:
            best_by_round[r["round"]] = max(
                best_by_round.get(r["round"], 0), r["sequences_per_s"])
        for conc in sorted({r["concurrency"] for r in rows
                            if "concurrency" in r}):
            cell = {}
            for name in ("ours", "peer"):
                cell[name] = [r for r in rows if r["server"] == name and
                              r["length"] == length and
                              r["concurrency"] == conc]
            per_round_peer = [o["sequences_per_s"] / p["sequences_per_s"]
                              for o, p in zip(cell["ours"], cell["peer"])]
            # One caller is held to the batch-1 forward, many callers to
            # the best batch.
            per_round_fwd = []
            for o in cell["ours"]:
                if conc == 1:
                    base = [f["sequences_per_s"] for f in fwd
                            if f["round"] == o["round"] and f["batch"] == 1]
                else:
                    base = [best_by_round[o["round"]]]
                per_round_fwd.append(o["sequences_per_s"] / base[0])
            for name in ("ours", "peer"):
                runs = cell[name]
                seq = median([r["sequences_per_s"] for r in runs])
                print("| %s | %d | %s | %.1f | %.0f | %.2f | %.2f | %.1f | "
                      "%.2f | %.0f%% | %.0f | %s | %s |" % (
                          length, conc, name, seq,
                          median([r["tokens_per_s"] for r in runs]),
                          median([r["p50_ms"] for r in runs]),
                          median([r["p99_ms"] for r in runs]),
                          median([r["mean_batch"] for r in runs]),
                          median([r["cpu_ms_per_seq"] for r in runs]),
                          100 * median([r["sys_share"] for r in runs]),
                          median([r["faults_per_seq"] for r in runs]),
                          "**%.2fx**" % median(per_round_peer)
                          if name == "ours" else "",
                          "%.2fx" % median(per_round_fwd)
                          if name == "ours" else ""))
        for size in sorted({r["batch"] for r in fwd}):
            seq = median([r["sequences_per_s"] for r in fwd
                          if r["batch"] == size])
            print("| %s | | in-process, batch %d | %.1f | %.0f | %.2f | | "
                  "| | | | | |" % (length, size, seq,
                                   median([r["tokens_per_s"] for r in fwd
                                           if r["batch"] == size]),
                                   median([r["p50_ms"] for r in fwd
                                           if r["batch"] == size])))


if __name__ == "__main__":
    sys.exit(main())
