#!/usr/bin/env python3
"""The GPU check's reference rate and its goals (issue: the GPU path).

  goals.py matmul --device cuda --dtype bfloat16 --json OUT [--size 8192]
      times square matrix products on the device (after a warm-up) and
      writes {"device", "dtype", "size", "tflops"}: the product rate the
      forward is held against;
  goals.py evaluate CHECK_JSON [--matmul MATMUL_JSON] [--layers 4]
           [--d-model 512] [--d-ff 2048]
      reads check.sh's check.json (its "bench" rows), computes each goal
      and adds {"goals": [{"name", "value", "target", "met"}]} to it:
        - the server at 32 callers >= 0.9x its in-process forward at
          batch 32, per dtype and length;
        - the server at 32 callers >= 1.0x PyTorch eager at batch 32, and
          the forward >= 1.0x eager at every batch, per dtype and length;
        - bfloat16 at batch >= 32 and length >= 128: the forward's
          matrix-product FLOP rate >= 40% of the measured bf16 rate;
        - a 1-token call's p99 at 32 callers <= 20 ms.
      A goal without its numbers is listed with value null and met null.
The model's FLOPs per token, for the default bench model (4 layers, width
512, feed-forward 2048): per layer 2 x (4 d^2 + 2 d f) for the projections
and feed-forward, plus 4 L d for the attention products at length L.
"""
import argparse
import json
import sys
import time


def matmul(args):
    import torch
    device = torch.device(args.device)
    dtype = getattr(torch, args.dtype)
    n = args.size
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize()

    for _ in range(3):
        a @ b
    sync()
    runs = 0
    start = time.perf_counter()
    while True:
        a @ b
        runs += 1
        if runs % 5 == 0:
            sync()
            if time.perf_counter() - start > args.seconds:
                break
    elapsed = time.perf_counter() - start
    tflops = 2.0 * n ** 3 * runs / elapsed / 1e12
    out = {"device": args.device, "dtype": args.dtype, "size": n,
           "runs": runs, "tflops": tflops}
    print(f"   {args.dtype} {n}x{n} products: {tflops:.1f} TFLOP/s "
          f"({runs} in {elapsed:.2f} s)")
    with open(args.json, "w") as f:
        json.dump(out, f)


def flops_per_token(length, layers, d, f):
    return layers * (2 * (4 * d * d + 2 * d * f) + 4 * length * d)


def goal(goals, name, value, target, met):
    goals.append({"name": name, "value": value, "target": target,
                  "met": met})


def evaluate(args):
    with open(args.check_json) as f:
        doc = json.load(f)
    rows = doc.get("bench", [])
    server = {(r["dtype"], r["length"]): r for r in rows
              if r["kind"] == "server_32_callers"}
    forward = {(r["dtype"], r["length"], r["batch"]): r for r in rows
               if r["kind"] == "forward"}
    eager = {(r["dtype"], r["length"], r["batch"]): r for r in rows
             if r["kind"] == "eager"}
    goals = []
    for (dtype, length), s in sorted(server.items()):
        if length == 1:
            continue
        fw = forward.get((dtype, length, 32))
        ratio = s["tokens_per_s"] / fw["tokens_per_s"] if fw else None
        goal(goals, f"server/forward {dtype} L{length} batch 32", ratio,
             ">= 0.9", None if ratio is None else ratio >= 0.9)
        eg = eager.get((dtype, length, 32))
        ratio = s["tokens_per_s"] / eg["tokens_per_s"] if eg else None
        goal(goals, f"server/eager {dtype} L{length} batch 32", ratio,
             ">= 1.0", None if ratio is None else ratio >= 1.0)
    for (dtype, length, batch), e in sorted(eager.items()):
        fw = forward.get((dtype, length, batch))
        if fw is None:
            continue
        ratio = fw["tokens_per_s"] / e["tokens_per_s"]
        goal(goals, f"forward/eager {dtype} L{length} batch {batch}", ratio,
             ">= 1.0", ratio >= 1.0)
    peak = None
    if args.matmul:
        try:
            with open(args.matmul) as f:
                peak = json.load(f)["tflops"]
        except (OSError, KeyError, ValueError):
            peak = None
    for (dtype, length, batch), fw in sorted(forward.items()):
        if dtype != "bfloat16" or batch < 32 or length < 128:
            continue
        rate = fw["tokens_per_s"] * flops_per_token(
            length, args.layers, args.d_model, args.d_ff) / 1e12
        share = rate / peak if peak else None
        goal(goals, f"bf16 forward share of the product rate L{length} "
             f"batch {batch}", share, ">= 0.40",
             None if share is None else share >= 0.40)
    one = server.get(("float32", 1))
    goal(goals, "1-token p99 at 32 callers (ms)",
         one["p99_ms"] if one else None, "<= 20",
         None if one is None else one["p99_ms"] <= 20)
    doc["goals"] = goals
    doc["bf16_matmul_tflops"] = peak
    with open(args.check_json, "w") as f:
        json.dump(doc, f, indent=1)
    print("goals:")
    for g in goals:
        value = "-" if g["value"] is None else f"{g['value']:.3f}"
        state = {True: "met", False: "MISSED", None: "no data"}[g["met"]]
        print(f"  {g['name']:52} {value:>9} {g['target']:>8}  {state}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    m = sub.add_parser("matmul")
    m.add_argument("--device", default="cuda")
    m.add_argument("--dtype", default="bfloat16")
    m.add_argument("--size", type=int, default=8192)
    m.add_argument("--seconds", type=float, default=3.0)
    m.add_argument("--json", required=True)
    e = sub.add_parser("evaluate")
    e.add_argument("check_json")
    e.add_argument("--matmul")
    e.add_argument("--layers", type=int, default=4)
    e.add_argument("--d-model", type=int, default=512)
    e.add_argument("--d-ff", type=int, default=2048)
    args = parser.parse_args()
    if args.command == "matmul":
        matmul(args)
    else:
        evaluate(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
