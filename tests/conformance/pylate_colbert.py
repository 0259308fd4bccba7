"""PyLate ColBERT models: server-side MaxSim against PyLate itself.

PyLate pins sentence-transformers 5.3 and transformers <= 5.3, which the
suite's .venv does not hold: scripts/python_env.sh makes .venv-pylate
(tests/conformance/requirements-pylate.txt), and this file runs there as
a script (`reference OUT_DIR`) to build the models and compute the
references, then in the suite to check the server against them.

Models: a transformers BertModel (family_models.py's config, seeded random
weights) made a ColBERT by pylate.models.ColBERT (its Dense projection to
24, its [Q] / [D] markers added to the tokenizer) and saved by it, under
three framings: PyLate's defaults with short lengths (query 20, document
40: the longer corpus texts are cut), attend_to_expansion_tokens true, and
no query expansion with a skiplist of its own; and a ModernBertModel
(local and global attention) with the defaults.

Reference, per model: ColBERT.encode(is_query=True) of each query and
encode(is_query=False) of the documents, and pylate.rank.rerank's scores
(the sum over the query's vectors of the largest product with a document
vector). Checks: ListModels (rerank, late_interaction, no multi_vector, the
framing as saved);
Rerank's scores against rank.rerank's within 1e-5 and the same order;
/v1/rerank's against gRPC's; the explanation's shape (query tokens by the
document's scored tokens) and its products against the encoded vectors'
within 1e-5; Embed's projected tokens with input_type query and document
against encode's vectors (the same rows: a document's skiplist tokens
left out) within 1e-5, and /v1/embeddings' against gRPC's; the refusals
(weights; projected tokens without input_type; input_type with chunking:
INVALID_ARGUMENT).
"""
import json
import os
import pathlib
import string
import subprocess
import sys

TOL = 1e-5
WIDTH = 24
REPO = pathlib.Path(__file__).resolve().parents[2]
VENV_PYTHON = REPO / ".venv-pylate" / "bin" / "python"

# name -> (base family, ColBERT keyword arguments)
MODELS = {
    "colbert-pylate": ("bert", dict(query_length=20, document_length=40)),
    "colbert-pylate-attend": ("bert", dict(
        query_length=24, document_length=64,
        attend_to_expansion_tokens=True)),
    "colbert-pylate-noexp": ("bert", dict(
        query_length=16, document_length=48, do_query_expansion=False,
        skiplist_words=[",", ".", "the", "zzz"])),
    "colbert-pylate-modernbert": ("modernbert", dict(
        query_length=20, document_length=40)),
}


def _texts():
    import corpus
    short = [t for t in corpus.SENTENCES if len(t) < 120]
    return short[:3], short[3:15] + [corpus.SENTENCES[-1]]


def _reference(out_dir):
    """Runs in .venv-pylate: builds each model, writes refs.json."""
    import numpy as np
    import torch
    import transformers
    from pylate import models, rank

    import family_models
    out_dir = pathlib.Path(out_dir)
    queries, documents = _texts()
    refs = {"queries": queries, "documents": documents, "models": {}}
    bases = {"bert": (family_models._bert, transformers.BertModel),
             "modernbert": (family_models._modernbert,
                            transformers.ModernBertModel)}
    for i, (name, (base, kwargs)) in enumerate(MODELS.items()):
        make_config, cls = bases[base]
        tok = family_models.tokenizer("wordpiece")
        config = family_models.sized_config(make_config, tok)
        torch.manual_seed(6100 + i)
        raw = out_dir / (name + "-hf")
        cls(config).eval().save_pretrained(raw, safe_serialization=True)
        tok.save_pretrained(raw)
        torch.manual_seed(6200 + i)
        model = models.ColBERT(model_name_or_path=str(raw), device="cpu",
                               embedding_size=WIDTH, **kwargs)
        path = out_dir / name
        model.save(str(path))
        model = models.ColBERT(model_name_or_path=str(path), device="cpu")
        q = model.encode(queries, is_query=True, batch_size=2)
        d = model.encode(documents, is_query=False, batch_size=3)
        scores = []
        for k in range(len(queries)):
            ranked = rank.rerank(
                documents_ids=[list(range(len(documents)))],
                queries_embeddings=[q[k]], documents_embeddings=[d])[0]
            by_id = {r["id"]: float(r["score"]) for r in ranked}
            scores.append([by_id[j] for j in range(len(documents))])
        refs["models"][name] = {
            "path": str(path), "scores": scores,
            "query_vectors": [np.asarray(v).tolist() for v in q],
            "document_vectors": [np.asarray(v).tolist() for v in d]}
    (out_dir / "refs.json").write_text(json.dumps(refs))


def build(out_dir, names=None):
    """Builds the models and references in .venv-pylate; returns
    [(name, path)] with the references kept for check()."""
    if names and not any(n in MODELS for n in names):
        return []
    if not VENV_PYTHON.exists():
        raise RuntimeError(f"{VENV_PYTHON} is missing: run "
                           "scripts/python_env.sh")
    out_dir = pathlib.Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, PYTHONPATH=str(pathlib.Path(__file__).parent),
               HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    subprocess.run([str(VENV_PYTHON), __file__, "reference", str(out_dir)],
                   check=True, env=env)
    refs = json.loads((out_dir / "refs.json").read_text())
    _REFS.update(refs)
    return [(n, refs["models"][n]["path"]) for n in MODELS
            if not names or n in names]


_REFS = {}


def _check_model(name, served, report):
    import numpy as np
    import llm_reranker
    ref = _REFS["models"][name]
    queries, documents = _REFS["queries"], _REFS["documents"]
    info = served.models()[name]
    tasks = list(info.tasks)
    if "rerank" not in tasks or "multi_vector" in tasks or \
            not info.late_interaction:
        report.fail(f"{name}: ListModels tasks {tasks} late_interaction "
                    f"{info.late_interaction}")
    framing = MODELS[name][1]
    got = (info.colbert.query_length, info.colbert.document_length,
           info.colbert.query_expansion, info.colbert.attend_to_expansion,
           info.colbert.query_prefix, list(info.colbert.skiplist_words))
    want = (framing["query_length"], framing["document_length"],
            framing.get("do_query_expansion", True),
            framing.get("attend_to_expansion_tokens", False), "[Q] ",
            framing.get("skiplist_words", list(string.punctuation)))
    if got != want:
        report.fail(f"{name}: ListModels colbert {got}, PyLate saved {want}")
    import urllib.request
    with urllib.request.urlopen(
            f"http://127.0.0.1:{served.http_port}/info", timeout=60) as r:
        entry = {m["name"]: m for m in json.load(r)["models"]}[name]
    info_colbert = entry["colbert"] or {}
    http_got = tuple(info_colbert.get(k) for k in (
        "query_length", "document_length", "query_expansion",
        "attend_to_expansion", "query_prefix", "skiplist_words"))
    if http_got != want:
        report.fail(f"{name}: /info colbert {http_got}, PyLate saved {want}")
    worst, bad = 0.0, 0
    for k, query in enumerate(queries):
        got = llm_reranker._served_scores(served, name, query, documents)
        want = np.asarray(ref["scores"][k])
        worst = max(worst, float(np.max(np.abs(got - want))))
        bad += llm_reranker._misordered(got, want)
    report.add(name, "Rerank vs pylate rank.rerank", worst, TOL,
               len(queries) * len(documents))
    if bad:
        report.fail(f"{name}: {bad} document pairs ranked the other way "
                    "round than pylate's")
    status, v1 = llm_reranker._post(served, "/v1/rerank", {
        "query": queries[0], "documents": documents, "model": name,
        "attention": {"layers": [0]}})
    if status != 200:
        report.fail(f"{name}: /v1/rerank {status} {v1}")
        return
    grpc_scores = llm_reranker._served_scores(served, name, queries[0],
                                              documents)
    report.add(name, "/v1/rerank vs gRPC",
               max(abs(r["relevance_score"] - grpc_scores[r["index"]])
                   for r in v1["results"]), TOL, len(documents))
    q = np.asarray(ref["query_vectors"][0])
    worst, shapes = 0.0, []
    for r in v1["results"]:
        d = np.asarray(ref["document_vectors"][r["index"]])
        att = r["attention"]
        shapes.append(att["shape"] == [1, len(q), len(d)] and
                      len(r["query_tokens"]) == len(q) and
                      len(r["document_tokens"]) == len(d))
        if shapes[-1]:
            got = np.asarray(att["values"]).reshape(len(q), len(d))
            worst = max(worst, float(np.max(np.abs(got - q @ d.T))))
    if not all(shapes):
        report.fail(f"{name}: explanation shapes do not follow the encoded "
                    "query and documents (query tokens x scored document "
                    "tokens)")
    report.add(name, "alignment vs encoded vectors", worst, TOL,
               len(v1["results"]))


def _check_embed(name, served, report):
    """Embed's projected tokens with input_type against encode(is_query),
    and /v1/embeddings' against gRPC's."""
    import numpy as np
    from encoder_client import tensor_to_numpy
    ref = _REFS["models"][name]
    worst, n, shapes = 0.0, 0, True
    http_worst = 0.0
    for kind, texts, want_all in (
            ("query", _REFS["queries"], ref["query_vectors"]),
            ("document", _REFS["documents"], ref["document_vectors"])):
        response = served.client.embed_response(
            texts, model=name, tokens=True, project_tokens=True,
            input_type=kind)
        got_all = [tensor_to_numpy(r.token_embeddings).astype(np.float64)
                   for r in response.results]
        for got, want in zip(got_all, want_all):
            want = np.asarray(want)
            n += 1
            if got.shape != want.shape:
                shapes = False
                continue
            worst = max(worst, float(np.max(np.abs(got - want))))
        body = served.post_embeddings({"model": name, "input": texts,
                                       "multi_vector": True,
                                       "input_type": kind})
        for item in body["data"]:
            mv = item["multi_vector"]
            http = np.asarray(mv["data"], np.float64).reshape(mv["shape"])
            got = got_all[item["index"]]
            http_worst = max(http_worst, float("inf") if http.shape !=
                             got.shape else float(np.max(np.abs(http - got))))
    if not shapes:
        report.fail(f"{name}: Embed's token rows differ from "
                    "encode(is_query)'s")
    report.add(name, "Embed input_type vs encode", worst, TOL, n)
    report.add(name, "/v1/embeddings input_type vs gRPC", http_worst, TOL, n)


def check(served, built, report):
    from llm_reranker import _expect_invalid
    for name, _ in built:
        try:
            _check_model(name, served, report)
            _expect_invalid(report, f"{name}: weights", lambda: (
                served.client.rerank("q", ["d"], model=name,
                                     weights=[1, 0, 1])),
                "weights are for BGE-M3")
            _check_embed(name, served, report)
            _expect_invalid(report, f"{name}: Embed without input_type",
                            lambda: served.client.embed_response(
                                ["q"], model=name, tokens=True,
                                project_tokens=True),
                            "set input_type")
            _expect_invalid(report, f"{name}: input_type chunked",
                            lambda: served.client.embed_response(
                                ["q"], model=name, input_type="query",
                                chunk=True),
                            "not chunked")
        except Exception as e:  # one model's failure is reported
            report.fail(f"{name}: {type(e).__name__}: {e}")


if __name__ == "__main__" and sys.argv[1:2] == ["reference"]:
    _reference(sys.argv[2])
