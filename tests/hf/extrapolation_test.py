#!/usr/bin/env python3
"""Diagnose's extrapolation probe against exact math and a float64 reference.

Writes Hugging Face fixtures (make_fixtures.py) and native models with the
weights of tests/reference/make_reference.py, serves them from one
repository file, and calls Diagnose with `extrapolation` on a grid of
lengths that reaches past each model's trained length.

Exact expectations, each computed here from the published formula:
- learned tables (BERT: 64 rows; RoBERTa: 66 rows from padding_idx + 1,
  so 64; a native table of 24) run the lengths up to the table and report
  the longer ones as not run, naming the limit;
- ALiBi windows ln(1000) / m_h with the paper's slopes;
- T5 buckets: the first distance that falls in the last bucket, found by
  scanning the transformers bucket function (float32 logarithm);
- RoPE wavelengths 2 pi base^(2i/d) and how many exceed the trained length.

Measured curves (per layer: entropy, entropy / ln S, mean attention
distance, first-token mass; pooled and prefix drift) are compared with the
same quantities computed from hf_reference.py (checkpoints) and
make_reference.py's encoder (native models) in float64. Error measure:
|server - reference| / max(1, |reference|); tolerance 1e-5 (the server runs
float32 up to 1024 tokens).

Also: ListModels shows each model's extrapolation limit (the flag, or the
repository entry's override), and a length over it is INVALID_ARGUMENT.

Usage: extrapolation_test.py --binary PATH
"""
import argparse
import json
import math
import os
import pathlib
import sys
import tempfile
import time
import zlib

import numpy as np
import torch

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT / "tests" / "integration"))
sys.path.insert(0, str(ROOT / "tests" / "reference"))
import hf_reference as ref  # noqa: E402
import make_fixtures  # noqa: E402
import make_reference as native  # noqa: E402
from hf_parity_test import binary_has_model_dir  # noqa: E402
from hf_parity_test import load_client_module  # noqa: E402
from server_process import ServerProcess  # noqa: E402

SKIP_CODE = 77
TOLERANCE = 1e-5
FLAG_LIMIT = 1100      # --max-extrapolation-tokens
ROFORMER_LIMIT = 300   # the repository entry's override
SOURCE_LENGTH = 11     # the repeated source, co-prime to the grid

# name -> lengths; checkpoints by fixture name, native models "native-*".
GRIDS = {
    "bert-mlm": [8, 16, 32, 64, 96, 128],
    "roberta": [8, 64, 65, 80],
    "roformer": [8, 32, 128, 256],
    "t5-relu": [8, 64, 512, 1024],
    "jinabert": [8, 64, 256],
    "native-alibi": [4, 16, 128, 256],
    "native-learned": [4, 12, 24, 48],
}
REACH_ONLY = {"gtr-t5": [8, 16]}  # exact bucket saturation at 32 / 128
NATIVE_CASES = {"native-alibi": "alibi_post_relu",
                "native-learned": "learned_post_relu"}


# ----------------------------------------------------------------------------
# References
# ----------------------------------------------------------------------------

def curves(attentions, hidden, hidden0, prefix):
    """The probe's quantities from float64 attention [L, H, S, S] and
    outputs [S, D] (hidden0: at the reference length)."""
    a = attentions.double()
    size = a.shape[-1]
    index = torch.arange(size, dtype=torch.float64)
    distance = (index[:, None] - index[None, :]).abs()
    logs = torch.where(a > 0, a.log(), torch.zeros_like(a))
    entropy = (-(a * logs).sum(-1).mean(-1)).mean(-1)  # [L]
    ln_s = math.log(size)
    pooled, pooled0 = hidden.mean(0), hidden0.mean(0)
    h, h0 = hidden[:prefix], hidden0[:prefix]
    return {
        "entropy": entropy.tolist(),
        "relative_entropy": (entropy / ln_s if size > 1 else
                             torch.zeros_like(entropy)).tolist(),
        "mean_distance": (a * distance).sum(-1).mean(-1).mean(-1).tolist(),
        "first_mass": a[..., :, 0].mean(-1).mean(-1).tolist(),
        "pooled_drift": float((pooled - pooled0).norm() / pooled0.norm()),
        "prefix_drift": float(((h - h0).norm(dim=1) / h0.norm(dim=1)).mean()),
    }


class NativeModel:
    """A make_reference case with its seeded weights, in float64."""

    def __init__(self, case_name):
        self.case = next(c for c in native.all_cases()
                         if c["name"] == case_name)
        generator = torch.Generator().manual_seed(zlib.crc32(b"extrapolation"))
        self.model32 = native.ReferenceModel(self.case).eval()
        native.randomize(self.model32, self.case, generator)
        self.model = self.model32.double()

    def write(self, directory):
        os.makedirs(directory, exist_ok=True)
        with open(os.path.join(directory, "config.json"), "w") as f:
            json.dump(native.config_json(self.case), f)
        tensors = {k: v.detach().float()
                   for k, v in self.model.state_dict().items()}
        native.write_safetensors(os.path.join(directory, "weights.safetensors"),
                                 tensors)

    def forward(self, ids):
        with torch.no_grad():
            tokens, attention = native.run_alone(
                self.model, self.case, torch.tensor(ids, dtype=torch.long))
        return tokens, attention


class Checkpoint:
    def __init__(self, directory):
        self.ckpt = ref.Checkpoint(directory)

    def forward(self, ids):
        out = ref.forward(self.ckpt, ids)
        return out["hidden"], out["attentions"]


# ----------------------------------------------------------------------------
# Exact expectations
# ----------------------------------------------------------------------------

def saturation_distance(num_buckets, max_distance):
    """First d > 0 whose buckets (both directions) are those of distance
    10 * max_distance, by transformers' bucket function."""
    far = torch.tensor([-10 * max_distance, 10 * max_distance])
    last = ref.t5_bucket(far, num_buckets, max_distance).tolist()
    for d in range(1, 10 * max_distance):
        got = ref.t5_bucket(torch.tensor([-d, d]), num_buckets,
                            max_distance).tolist()
        if got == last:
            return d
    raise AssertionError("buckets never saturate")


def expected_reach(name, config):
    """{field: value} of ExtrapolationProbe that the math fixes."""
    if name == "native-alibi" or config.get("position_embedding_type") == \
            "alibi":
        heads = config.get("num_attention_heads", config.get("num_heads"))
        return {"alibi_windows": [math.log(1000) / m
                                  for m in ref.alibi_slopes(heads)],
                "max_length": 0}
    if name == "native-learned":
        return {"trained_length": 24, "max_length": 24}
    kind = config.get("model_type")
    if kind in ("bert", "roberta"):
        table = config["max_position_embeddings"]
        first = config["pad_token_id"] + 1 if kind == "roberta" else 0
        return {"trained_length": table - first, "max_length": table - first}
    if kind == "t5":
        nb = config["relative_attention_num_buckets"]
        md = config.get("relative_attention_max_distance", 128)
        return {"bucket_saturation_distance": saturation_distance(nb, md),
                "num_buckets": nb, "max_distance": md,
                "trained_length": config["n_positions"], "max_length": 0}
    if kind == "roformer":
        d = config["hidden_size"] // config["num_attention_heads"]
        waves = sorted(2 * math.pi * 10000.0 ** (2 * i / d)
                       for i in range(d // 2))
        trained = config["max_position_embeddings"]
        return {"wavelengths": waves, "trained_length": trained,
                "pairs_beyond_trained": sum(w > trained for w in waves),
                "max_length": 0}
    raise AssertionError(f"no exact expectation for {name}")


def check_reach(name, config, probe, failures):
    for field, want in expected_reach(name, config).items():
        got = getattr(probe, field)
        if isinstance(want, list):
            got = list(got)
            ok = len(got) == len(want) and all(
                abs(g - w) <= 1e-9 * max(1.0, abs(w)) for g, w in zip(got, want))
        else:
            ok = got == want
        if not ok:
            failures.append(f"{name}: {field} = {got}, expected {want}")
    limit = probe.max_length
    for p in probe.points:
        if limit and p.length > limit:
            if p.ran or str(limit) not in p.skipped_reason:
                failures.append(f"{name}: length {p.length} past the table "
                                f"of {limit}: ran={p.ran} "
                                f"{p.skipped_reason!r}")
        elif not p.ran:
            failures.append(f"{name}: length {p.length} did not run: "
                            f"{p.skipped_reason}")
    if name in GRIDS and sum(p.ran for p in probe.points) < 2:
        failures.append(f"{name}: fewer than two lengths ran")


# ----------------------------------------------------------------------------
# Measured curves
# ----------------------------------------------------------------------------

def check_curves(name, model, probe, stats, failures):
    """Compares every point that ran with the float64 reference."""
    source = list(probe.source_ids)
    ran = [p for p in probe.points if p.ran]
    outputs = {}
    for p in ran:
        ids = [source[i % len(source)] for i in range(p.length)]
        outputs[p.length] = model.forward(ids)
    hidden0 = outputs[probe.reference_length][0]
    for p in ran:
        hidden, attention = outputs[p.length]
        want = curves(attention, hidden, hidden0, probe.prefix_length)
        for field, value in want.items():
            got = getattr(p, field)
            got = list(got) if isinstance(value, list) else [got]
            value = value if isinstance(value, list) else [value]
            if len(got) != len(value):
                failures.append(f"{name} L={p.length} {field}: {len(got)} "
                                f"values, expected {len(value)}")
                continue
            for g, w in zip(got, value):
                err = abs(g - w) / max(1.0, abs(w))
                stats["values"] += 1
                stats["worst"][field] = max(stats["worst"].get(field, 0), err)
                if not err <= TOLERANCE:
                    failures.append(f"{name} L={p.length} {field}: {g} vs "
                                    f"{w} (error {err:.2e})")


# ----------------------------------------------------------------------------
# Server
# ----------------------------------------------------------------------------

def write_models(root):
    """Writes every model; returns ({name: (config, model)}, repo path)."""
    models, entries = {}, []
    fixtures = {f.name: f for f in make_fixtures.FIXTURES}
    for name in list(GRIDS) + list(REACH_ONLY):
        if name in NATIVE_CASES:
            m = NativeModel(NATIVE_CASES[name])
            m.write(os.path.join(root, name))
            models[name] = (native.config_json(m.case), m)
            entries.append({"name": name,
                            "config_file": f"{name}/config.json",
                            "weights": f"{name}/weights.safetensors"})
            continue
        directory = make_fixtures.write_fixture(root, fixtures[name])
        models[name] = (fixtures[name].config(), Checkpoint(directory))
        entry = {"name": name, "path": name}
        if name == "roformer":
            entry["max_extrapolation_tokens"] = ROFORMER_LIMIT
        entries.append(entry)
    path = os.path.join(root, "repository.json")
    with open(path, "w") as f:
        json.dump({"models": entries}, f)
    return models, path


def source_ids(config, seed):
    vocab = config["vocab_size"]
    pad = config.get("pad_token_id")
    allowed = [t for t in range(3, vocab) if t != pad]
    rng = np.random.default_rng(seed)
    return [int(t) for t in rng.choice(allowed, SOURCE_LENGTH)]


def diagnose(pb2, stub, name, ids, lengths):
    request = pb2.DiagnoseRequest(
        model=name, token_ids=pb2.TokenIds(ids=ids), extrapolation=True,
        extrapolation_options=pb2.ExtrapolationOptions(lengths=lengths))
    return stub.Diagnose(request, timeout=300).extrapolation


def check_limits(pb2, stub, grpc, failures):
    infos = {m.name: m for m in stub.ListModels(pb2.ListModelsRequest(),
                                                timeout=30).models}
    for name, info in infos.items():
        want = ROFORMER_LIMIT if name == "roformer" else FLAG_LIMIT
        if info.max_extrapolation_tokens != want:
            failures.append(f"ListModels {name}: max_extrapolation_tokens "
                            f"{info.max_extrapolation_tokens}, expected {want}")
    try:
        diagnose(pb2, stub, "roformer", [5, 6, 7], [8, ROFORMER_LIMIT + 1])
        failures.append("a length over the model's limit was accepted")
    except grpc.RpcError as error:
        if error.code() != grpc.StatusCode.INVALID_ARGUMENT or \
                str(ROFORMER_LIMIT) not in error.details():
            failures.append(f"over the limit: {error.code().name}: "
                            f"{error.details()}")


def run(args, pb2, pb2_grpc, grpc, root):
    models, repository = write_models(root)
    server = ServerProcess(args.binary, extra_args=[
        f"--models={repository}", f"--max-extrapolation-tokens={FLAG_LIMIT}"])
    failures, stats = [], {"values": 0, "worst": {}}
    try:
        server.wait_ready(args.timeout)
        with grpc.insecure_channel(f"127.0.0.1:{server.port}") as channel:
            stub = pb2_grpc.EncoderServiceStub(channel)
            check_limits(pb2, stub, grpc, failures)
            for seed, (name, lengths) in enumerate(
                    list(GRIDS.items()) + list(REACH_ONLY.items())):
                config, model = models[name]
                start = time.monotonic()
                probe = diagnose(pb2, stub, name, source_ids(config, seed),
                                 lengths)
                took = time.monotonic() - start
                check_reach(name, config, probe, failures)
                if name in GRIDS:
                    check_curves(name, model, probe, stats, failures)
                print(f"  {name:15s} lengths {lengths} ran "
                      f"{[p.length for p in probe.points if p.ran]} "
                      f"server {took:.2f} s")
    finally:
        code = server.stop()
        if code != 0:
            failures.append(f"server exited with {code}: {server.log_tail()}")
    return failures, stats


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--binary", required=True)
    parser.add_argument("--timeout", type=float, default=120)
    args = parser.parse_args()
    if not binary_has_model_dir(args.binary):
        print(f"SKIP: {args.binary} has no --model-dir flag (a build without "
              "the Hugging Face importers)")
        return SKIP_CODE
    import grpc
    with tempfile.TemporaryDirectory(prefix="extrapolation-") as tmp:
        stub_dir = os.path.join(tmp, "stubs")
        os.makedirs(stub_dir)
        pb2, pb2_grpc = load_client_module().load_stubs(stub_dir)
        failures, stats = run(args, pb2, pb2_grpc, grpc,
                              os.path.join(tmp, "models"))
    worst = ", ".join(f"{k} {v:.2e}" for k, v in stats["worst"].items())
    print(f"compared {stats['values']} values with the float64 reference; "
          f"worst relative errors: {worst}")
    for failure in failures[:40]:
        print(f"FAIL: {failure}")
    return 1 if failures or stats["values"] == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
