#!/usr/bin/env python3
"""Hugging Face checkpoints through the gRPC service vs the float64 reference.

Writes the fixtures of make_fixtures.py into a temporary directory, starts
encoder-server on them (`--model-dir NAME=DIR`, one plain `--model-dir DIR`),
and for every fixture calls Embed with token ids of several lengths (one
longer than ModernBERT's local window; for RoBERTa-style models one with the
padding id inside) asking token embeddings and every layer's attention, then
all inputs at once as one padded batch. It compares token embeddings
(last_hidden_state), the pooled output, the attention probabilities and
every hidden state (the embedding output and each layer's, as
output_hidden_states returns them) with hf_reference.py, and the batched
results with the single ones. One more request per fixture asks pooled
hidden states by negative index (-1, -L-1) and compares them with the
reference's pooling of those states.

Error measure: max |server - reference| / max(1, max |reference|) over a
tensor, i.e. absolute for values up to 1 (probabilities, normalized or
LayerNorm-scale outputs), relative to the largest magnitude otherwise.
Tolerance 1e-5 (the server computes in float32).

It also checks ListModels (family, positional scheme, the directory's base
name and never an absolute path), that text input is refused with
INVALID_ARGUMENT naming the tokenizer, and that broken checkpoints (unknown
model_type, missing tensor, wrong shape, missing shard) stop the server at
start with a non-zero exit and an error naming the problem.

Usage: hf_parity_test.py --binary PATH [--family NAME ...] [--keep DIR]
       [--proto-root DIR] [--skip-broken]
--family takes a fixture name or a family tag (make_fixtures.py --help).
"""
import argparse
import importlib.util
import os
import pathlib
import sys
import tempfile

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT / "tests" / "integration"))
import broken_checkpoints  # noqa: E402
import hf_reference as ref  # noqa: E402
import hf_reference_checks  # noqa: E402
import make_fixtures  # noqa: E402
from server_process import ServerProcess  # noqa: E402

SKIP_CODE = 77  # CTest SKIP_RETURN_CODE
TOLERANCE = 1e-5
LENGTHS = (1, 5, 13, 40)  # 13 and 40 exceed ModernBERT's 4-token half window
SCHEME = {"bert": "learned", "roberta": "learned", "xlm-roberta": "learned",
          "roformer": "rope", "modernbert": "rope", "jinabert": "alibi",
          "t5": "relative", "marian": "sinusoidal",
          "mpnet": "learned_relative"}


def binary_has_model_dir(binary):
    import subprocess
    result = subprocess.run([binary, "--help"], capture_output=True,
                            text=True, timeout=60)
    return "--model-dir" in result.stdout + result.stderr


def load_client_module(proto_root=None):
    """client/python/examples/minimal_client.py (its load_stubs compiles
    the proto at run time), optionally pointed at another proto
    directory."""
    path = ROOT / "client" / "python" / "examples" / "minimal_client.py"
    spec = importlib.util.spec_from_file_location("encoder_client", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if proto_root:
        module.PROTO_ROOT = pathlib.Path(proto_root)
    return module


def decode(pb2, tensor):
    dtypes = {pb2.DTYPE_FLOAT32: "<f4", pb2.DTYPE_FLOAT64: "<f8"}
    assert tensor.dtype in dtypes, f"unexpected dtype {tensor.dtype}"
    return np.frombuffer(tensor.data, dtype=dtypes[tensor.dtype]).reshape(
        list(tensor.shape)).astype(np.float64)


def rel_error(got, want):
    got, want = np.asarray(got), np.asarray(want, dtype=np.float64)
    if got.shape != want.shape:
        raise AssertionError(f"shape {list(got.shape)} != {list(want.shape)}")
    scale = max(1.0, float(np.abs(want).max()))
    return float(np.abs(got - want).max()) / scale


def test_inputs(fixture, config):
    """Named token-id inputs: LENGTHS drawn from a fixed seed avoiding the
    padding id, plus (RoBERTa, XLM-R) one with the padding id inside."""
    vocab = config["vocab_size"]
    pad = config.get("pad_token_id")
    rng = np.random.default_rng(fixture.seed)
    allowed = [t for t in range(3, vocab) if t != pad]
    inputs = [(f"len{n}", [int(t) for t in rng.choice(allowed, n)])
              for n in LENGTHS]
    if config["model_type"] in ("roberta", "xlm-roberta", "mpnet"):
        inputs.append(("pad-inside", [0, 17, 23, pad, 31, pad, 9, 2]))
    return inputs


class Stats:
    """Counts and worst errors of one fixture; failures as messages."""

    def __init__(self, name):
        self.name, self.values, self.failures = name, 0, []
        self.worst = {"hidden": 0.0, "pooled": 0.0, "attention": 0.0,
                      "states": 0.0, "batch": 0.0}

    def compare(self, kind, label, got, want):
        try:
            err = rel_error(got, want)
        except AssertionError as e:
            self.failures.append(f"{label} {kind}: {e}")
            return
        self.values += int(np.asarray(want).size)
        self.worst[kind] = max(self.worst[kind], err)
        if not err <= TOLERANCE:
            self.failures.append(f"{label} {kind}: error {err:.3g} > "
                                 f"{TOLERANCE:g}")


def embed(pb2, stub, model, inputs, layers):
    """Token embeddings, every layer's attention and every hidden state."""
    request = pb2.EmbedRequest(
        model=model, inputs=[pb2.Input(token_ids=pb2.TokenIds(ids=ids))
                             for ids in inputs],
        return_token_embeddings=True,
        attention=pb2.AttentionSelection(layers=list(range(layers))),
        hidden_states=pb2.HiddenStateSelection(
            layers=list(range(layers + 1))))
    return stub.Embed(request, timeout=120)


def check_pooled_states(pb2, stub, stats, fixture, ckpt, label, ids, want,
                        layers):
    """Hidden states by negative index, pooled with the model's pooling."""
    result = stub.Embed(pb2.EmbedRequest(
        model=fixture.name, inputs=[pb2.Input(token_ids=pb2.TokenIds(ids=ids))],
        hidden_states=pb2.HiddenStateSelection(layers=[-1, -layers - 1],
                                               pooled=True)),
        timeout=120).results[0]
    if list(result.hidden_state_layers) != [layers, 0]:
        stats.failures.append(f"{label}: hidden_state_layers "
                              f"{list(result.hidden_state_layers)} for [-1, "
                              f"{-layers - 1}]")
    states = want["states"]
    expected = np.stack([ckpt.pool_tokens(states[layers]).numpy(),
                         ckpt.pool_tokens(states[0]).numpy()])
    stats.compare("states", f"{label} pooled hidden states",
                  decode(pb2, result.hidden_states), expected)


def check_fixture(pb2, stub, fixture, directory):
    """Compares one fixture's model with the reference; returns Stats."""
    stats = Stats(fixture.name)
    ckpt = ref.Checkpoint(directory)
    inputs = test_inputs(fixture, ckpt.config)
    want = {label: ref.forward(ckpt, ids) for label, ids in inputs}
    layers = want[inputs[0][0]]["attentions"].shape[0]
    singles = {}
    for label, ids in inputs:
        result = embed(pb2, stub, fixture.name, [ids], layers).results[0]
        singles[label] = result
        compare_result(pb2, stats, label, result, want[label], len(ids))
    label, ids = inputs[1]
    check_pooled_states(pb2, stub, stats, fixture, ckpt, label, ids,
                        want[label], layers)
    batch = embed(pb2, stub, fixture.name, [ids for _, ids in inputs], layers)
    if max(r.batch.batch_size for r in batch.results) < 2:
        stats.failures.append("the multi-input request was never batched")
    for (label, ids), result in zip(inputs, batch.results):
        compare_result(pb2, stats, f"batched {label}", result, want[label],
                       len(ids))
        for field, kind in (("token_embeddings", "batch"),
                            ("pooled", "batch"), ("attention", "batch"),
                            ("hidden_states", "batch")):
            stats.compare(kind, f"batched {label} {field} vs single",
                          decode(pb2, getattr(result, field)),
                          decode(pb2, getattr(singles[label], field)))
    return stats


def compare_result(pb2, stats, label, result, want, length):
    if result.num_tokens != length:
        stats.failures.append(f"{label}: num_tokens {result.num_tokens}")
    stats.compare("hidden", label, decode(pb2, result.token_embeddings),
                  want["hidden"].numpy())
    stats.compare("pooled", label, decode(pb2, result.pooled),
                  want["pooled"].numpy())
    stats.compare("attention", label, decode(pb2, result.attention),
                  want["attentions"].numpy())
    stats.compare("states", f"{label} hidden states",
                  decode(pb2, result.hidden_states), want["states"].numpy())
    if list(result.hidden_state_layers) != list(range(len(want["states"]))):
        stats.failures.append(f"{label}: hidden_state_layers "
                              f"{list(result.hidden_state_layers)}")


def string_fields(message, skip=()):
    """Every string value in a message, nested messages and maps included,
    except the top-level fields named in skip."""
    out = []
    for field, value in message.ListFields():
        if field.name in skip:
            continue
        values = value if field.is_repeated else [value]
        for v in values:
            if isinstance(v, str):
                out.append(v)
            elif hasattr(v, "ListFields"):
                out.extend(string_fields(v))
    if hasattr(message, "params"):
        out.extend(list(message.params.keys()) + list(message.params.values()))
    return out


def check_list_models(pb2, stub, fixtures, root):
    """Failures (messages) of ListModels against the fixtures."""
    failures = []
    models = {m.name: m for m in stub.ListModels(pb2.ListModelsRequest(),
                                                 timeout=30).models}
    has_family = "family" in pb2.ModelInfo.DESCRIPTOR.fields_by_name
    for fixture in fixtures:
        info = models.get(fixture.name)
        if info is None:
            failures.append(f"ListModels lacks {fixture.name}: {list(models)}")
            continue
        strings = string_fields(info, skip=("name",))
        if not has_family:
            failures.append("ModelInfo has no family field")
        elif info.family not in (fixture.family, fixture.config()["model_type"]):
            failures.append(f"{fixture.name}: family {info.family!r}")
        if info.positional.scheme != SCHEME[fixture.family]:
            failures.append(f"{fixture.name}: scheme "
                            f"{info.positional.scheme!r}")
        if fixture.name not in strings:
            failures.append(f"{fixture.name}: no field holds the directory "
                            f"name: {strings}")
        leaked = [s for s in strings if root in s or s.startswith("/")]
        if leaked:
            failures.append(f"{fixture.name}: absolute path in {leaked}")
        print(f"  {fixture.name}: family={getattr(info, 'family', '?')} "
              f"scheme={info.positional.scheme} pooling={info.pooling} "
              f"params={info.parameter_count} weights={info.weights!r}")
    return failures


def check_text_refused(pb2, stub, grpc, fixture):
    try:
        stub.Embed(pb2.EmbedRequest(model=fixture.name,
                                    inputs=[pb2.Input(text="hello")]),
                   timeout=30)
    except grpc.RpcError as error:
        if error.code() == grpc.StatusCode.INVALID_ARGUMENT and \
                "tokenizer" in error.details().lower():
            return []
        return [f"text input: {error.code().name}: {error.details()}"]
    return ["text input on a checkpoint without a tokenizer was accepted"]


def model_dir_flags(fixtures, root):
    """NAME=DIR for each; the first one plain (its name is the base name)."""
    flags = []
    for i, fixture in enumerate(fixtures):
        path = os.path.join(root, fixture.name)
        flags.append(f"--model-dir={path}" if i == 0
                     else f"--model-dir={fixture.name}={path}")
    return flags


def serve_and_check(args, pb2, pb2_grpc, grpc, fixtures, root):
    """One server on the fixtures; returns ({fixture: Stats}, failures that
    belong to no single fixture), or (None, [why]) if it did not start."""
    server = ServerProcess(args.binary, extra_args=model_dir_flags(
        fixtures, root))
    try:
        server.wait_ready(args.timeout)
    except RuntimeError as error:
        server.stop()
        return None, [f"server did not start on {[f.name for f in fixtures]}"
                      f": {error}"]
    results, general = {}, []
    try:
        with grpc.insecure_channel(f"127.0.0.1:{server.port}") as channel:
            stub = pb2_grpc.EncoderServiceStub(channel)
            general += check_list_models(pb2, stub, fixtures, root)
            general += check_text_refused(pb2, stub, grpc, fixtures[0])
            for fixture in fixtures:
                try:
                    results[fixture.name] = check_fixture(
                        pb2, stub, fixture, os.path.join(root, fixture.name))
                except grpc.RpcError as error:
                    stats = Stats(fixture.name)
                    stats.failures.append(f"Embed failed: {error.code().name}"
                                          f": {error.details()}")
                    results[fixture.name] = stats
    finally:
        code = server.stop()
        if code != 0:
            general.append(f"server exited with {code} after SIGTERM")
    return results, general


def run_parity(args, pb2, pb2_grpc, grpc, fixtures, root):
    """All fixtures in one server; if that does not start, each fixture in a
    server of its own, to tell which ones load (the test still fails)."""
    results, general = serve_and_check(args, pb2, pb2_grpc, grpc, fixtures,
                                       root)
    if results is not None:
        return results, general
    results = {}
    for fixture in fixtures:
        one, failures = serve_and_check(args, pb2, pb2_grpc, grpc, [fixture],
                                        root)
        if one is None:
            stats = Stats(fixture.name)
            stats.failures.append(failures[0][-1500:])
            one, failures = {fixture.name: stats}, []
        results.update(one)
        general += failures
    return results, general


def report(results):
    print(f"{'fixture':13s} {'values':>8s} {'hidden':>9s} {'pooled':>9s} "
          f"{'attention':>9s} {'states':>9s} {'batch':>9s}  result")
    for name, s in results.items():
        w = s.worst
        print(f"{name:13s} {s.values:8d} {w['hidden']:9.2e} "
              f"{w['pooled']:9.2e} {w['attention']:9.2e} {w['states']:9.2e} "
              f"{w['batch']:9.2e}  {'FAIL' if s.failures else 'ok'}")
        for failure in s.failures[:8]:
            print(f"    {failure}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--binary", required=True)
    parser.add_argument("--family", action="append",
                        help="fixture name or family tag (repeatable)")
    parser.add_argument("--keep", help="write the fixtures here and keep them")
    parser.add_argument("--timeout", type=float, default=120)
    parser.add_argument("--proto-root", help="proto directory of the binary "
                        "(default: this tree's proto/)")
    parser.add_argument("--skip-broken", action="store_true",
                        help="leave out the broken-checkpoint checks")
    args = parser.parse_args()
    if not binary_has_model_dir(args.binary):
        print(f"SKIP: {args.binary} has no --model-dir flag (a build without "
              "the Hugging Face importers)")
        return SKIP_CODE
    hf_reference_checks.main()
    fixtures = make_fixtures.select(args.family)
    import grpc
    with tempfile.TemporaryDirectory(prefix="hf-parity-") as tmp:
        root = args.keep or os.path.join(tmp, "fixtures")
        stub_dir = os.path.join(tmp, "stubs")
        os.makedirs(stub_dir)
        pb2, pb2_grpc = load_client_module(
            args.proto_root).load_stubs(stub_dir)
        for fixture in fixtures:
            make_fixtures.write_fixture(root, fixture)
        results, general = run_parity(args, pb2, pb2_grpc, grpc, fixtures,
                                      root)
        report(results)
        if not args.skip_broken:
            general += broken_checkpoints.check_all(args.binary, tmp)
    for failure in general:
        print(f"FAIL: {failure}")
    failed = [n for n, s in results.items() if s.failures]
    passed = [n for n, s in results.items() if not s.failures]
    print(f"passed: {passed}\nfailed: {failed}")
    return 1 if failed or general or not results else 0


if __name__ == "__main__":
    sys.exit(main())
