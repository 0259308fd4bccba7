"""BGE-M3's three outputs from one Embed call, against FlagEmbedding.

Model: an XLM-RoBERTa of family_models.py's shape (seeded random weights,
sharpened) saved as BAAI/bge-m3 is on the Hub: the transformer with
sentence-transformers' CLS pooling and Normalize modules, and beside it
FlagEmbedding's two heads, colbert_linear.pt (a Linear(h, h), saved as
FlagEmbedding's save() writes it: a new OrderedDict without _metadata)
and sparse_linear.pt (a Linear(h, 1), saved as torch.save(state_dict())
writes it, with _metadata), random too.

Checks: ListModels (tasks embed, sparse, multi_vector; sparse_kind
token_weight; the projection skips the first token); one Embed call with
the pooled vector, the projected token vectors and the sparse vector
against BGEM3FlagModel.encode(return_dense, return_sparse,
return_colbert_vecs) on the corpus: dense and ColBERT vectors within 1e-5,
the sparse vector's token set equal and its weights within 1e-5; the
three scores of query-document pairs computed from the served outputs
against BGEM3FlagModel.compute_score on each pair alone (the dense,
sparse, ColBERT and weighted combined scores, 1e-5); a model without a
sparse head refusing return_sparse with FAILED_PRECONDITION. Rerank on
the server (late interaction: ListModels' late_interaction) by gRPC with
FlagEmbedding's default weights and with the call's, and by /v1/rerank,
against compute_score's colbert+sparse+dense on each pair alone (1e-5);
weights all 0 or negative, and positional probes asked of it,
INVALID_ARGUMENT; its explanation (attention asked of it) the products of
the query's and each document's ColBERT vectors (1e-5).
"""
import numpy as np
import torch
import transformers

import corpus
import family_models

TOL = 1e-5
NAME = "bge-m3-xlmr"
WEIGHTS = [0.4, 0.2, 0.4]  # dense, sparse, colbert (compute_score's order)


def build(out_dir, names=None):
    """Writes the model directory; returns [(name, path)]."""
    if names and NAME not in names:
        return []
    from sentence_transformers import SentenceTransformer, models
    tok = family_models.tokenizer("bpe")
    config = family_models.sized_config(
        lambda: family_models._roberta(transformers.XLMRobertaConfig), tok)
    torch.manual_seed(5100)
    raw = out_dir / (NAME + "-hf")
    model = transformers.XLMRobertaModel(config, add_pooling_layer=False)
    with torch.no_grad():
        family_models._sharpen(model)
        for name, p in model.named_parameters():
            if name.endswith(("self.query.weight", "self.key.weight")):
                p.mul_(10.0)
    model.eval().save_pretrained(raw, safe_serialization=True)
    tok.save_pretrained(raw)
    transformer = models.Transformer(str(raw))
    width = transformer.get_word_embedding_dimension()
    path = out_dir / NAME
    SentenceTransformer(
        modules=[transformer, models.Pooling(width, "cls"),
                 models.Normalize()], device="cpu").save(str(path))
    torch.manual_seed(5101)
    colbert = torch.nn.Linear(width, width)
    sparse = torch.nn.Linear(width, 1)
    state = colbert.state_dict()
    torch.save(type(state)({k: v.clone() for k, v in state.items()}),
               path / "colbert_linear.pt")
    torch.save(sparse.state_dict(), path / "sparse_linear.pt")
    return [(NAME, path)]


def _served_outputs(served, texts):
    """One Embed call: pooled, projected tokens and sparse per text."""
    from encoder_client import tensor_to_numpy
    response = served.client.embed_response(
        texts, model=NAME, tokens=True, project_tokens=True, sparse=True)
    out = []
    for r in response.results:
        out.append((tensor_to_numpy(r.pooled).astype(np.float64),
                    tensor_to_numpy(r.token_embeddings).astype(np.float64),
                    dict(zip(r.sparse.indices, r.sparse.values))))
    return out


def _check_listing(served, report):
    info = served.models()[NAME]
    tasks = list(info.tasks)
    ok = (tasks == ["embed", "rerank", "sparse", "multi_vector"] and
          info.late_interaction and
          info.sparse_kind == "token_weight" and
          info.token_embeddings_skip_first and
          info.normalize_token_embeddings and
          info.token_embedding_dim == info.d_model)
    report.add(NAME, "ListModels: tasks, sparse kind, token projection",
               0 if ok else 1, 0, 1)
    if not ok:
        report.fail(f"{NAME}: ListModels tasks {tasks} sparse_kind "
                    f"{info.sparse_kind!r} skip_first "
                    f"{info.token_embeddings_skip_first} token dim "
                    f"{info.token_embedding_dim} (hidden {info.hidden_size})")


def _compare_encode(served, reference, texts, report):
    ref = reference.encode(texts, batch_size=4, max_length=512,
                           return_dense=True, return_sparse=True,
                           return_colbert_vecs=True)
    got = _served_outputs(served, texts)
    dense = colbert = sparse = 0.0
    mismatched = []
    for i, (pooled, tokens, weights) in enumerate(got):
        dense = max(dense, float(np.abs(
            pooled - ref["dense_vecs"][i].astype(np.float64)).max()))
        want = ref["colbert_vecs"][i].astype(np.float64)
        if tokens.shape != want.shape:
            mismatched.append(f"text {i}: colbert {tokens.shape} vs "
                              f"{want.shape}")
        else:
            colbert = max(colbert, float(np.abs(tokens - want).max()))
        lexical = {int(k): float(v)
                   for k, v in ref["lexical_weights"][i].items()}
        if set(lexical) != set(int(k) for k in weights):
            mismatched.append(f"text {i}: sparse ids {sorted(weights)} vs "
                              f"{sorted(lexical)}")
        else:
            for k, v in lexical.items():
                sparse = max(sparse, abs(weights[k] - v))
    n = len(texts)
    kept = sum(len(g[2]) for g in got)
    if kept == 0:
        mismatched.append("no text kept a lexical weight")
    report.add(NAME, "dense vs BGEM3FlagModel.encode", dense, TOL, n)
    report.add(NAME, "ColBERT vectors vs BGEM3FlagModel.encode", colbert,
               TOL, n)
    report.add(NAME, "lexical weights vs BGEM3FlagModel.encode", sparse,
               TOL, n, f"{kept} weights" if not mismatched else "")
    if mismatched or max(dense, colbert, sparse) > TOL:
        report.fail(f"{NAME}: encode differs (dense {dense:.3g}, colbert "
                    f"{colbert:.3g}, sparse {sparse:.3g}); "
                    + "; ".join(mismatched[:4]))
    return got


def _compare_http(served, texts, got, report):
    """/v1/embeddings with "sparse" and "multi_vector": the gRPC call's
    three outputs (another call, so batched otherwise: within TOL)."""
    body = served.post_embeddings({"model": NAME, "input": texts,
                                   "sparse": True, "multi_vector": True})
    worst = 0.0
    for item in body["data"]:
        pooled, tokens, weights = got[item["index"]]
        mv = item["multi_vector"]
        http_tokens = np.asarray(mv["data"], np.float64).reshape(mv["shape"])
        http_sparse = dict(zip(item["sparse"]["indices"],
                               item["sparse"]["values"]))
        if http_tokens.shape != tokens.shape or \
                set(http_sparse) != set(int(k) for k in weights):
            worst = float("inf")
            continue
        worst = max(worst,
                    float(np.abs(np.asarray(item["embedding"]) - pooled).max()),
                    float(np.abs(http_tokens - tokens).max()),
                    max(abs(v - weights[k]) for k, v in http_sparse.items()))
    report.add(NAME, "/v1/embeddings sparse + multi_vector vs gRPC", worst,
               TOL, len(body["data"]))
    if worst > TOL:
        report.fail(f"{NAME}: /v1/embeddings differs from Embed by {worst}")


def _scores(q, d):
    """FlagEmbedding's three scores of one query-document pair, from the
    served outputs: dense dot, lexical overlap, ColBERT MaxSim mean."""
    dense = float(q[0] @ d[0])
    sparse = sum(w * d[2][k] for k, w in q[2].items() if k in d[2])
    colbert = float((q[1] @ d[1].T).max(axis=1).sum() / q[1].shape[0])
    return {"dense": dense, "sparse": sparse, "colbert": colbert,
            "sparse+dense": (WEIGHTS[1] * sparse + WEIGHTS[0] * dense) /
            (WEIGHTS[0] + WEIGHTS[1]),
            "colbert+sparse+dense": (WEIGHTS[2] * colbert +
                                     WEIGHTS[1] * sparse +
                                     WEIGHTS[0] * dense) / sum(WEIGHTS)}


def _compare_scores(served, reference, report):
    queries = corpus.SENTENCES[:4]
    documents = corpus.SENTENCES[4:10]
    got_q = _served_outputs(served, queries)
    got_d = _served_outputs(served, documents)
    worst = rerank = http = 0.0
    pairs = 0
    for qi, q in enumerate(queries):
        # Rerank on the server: FlagEmbedding's default weights (1, 1, 1)
        # and the call's own, by gRPC; the call's own by /v1/rerank.
        default = {r["index"]: r["score"] for r in served.client.rerank(
            q, documents, model=NAME, keep_order=True)}
        weighted = {r["index"]: r["score"] for r in served.client.rerank(
            q, documents, model=NAME, keep_order=True, weights=WEIGHTS)}
        over_http = {r["index"]: r["relevance_score"]
                     for r in _post_rerank(served, q, documents)}
        for di, d in enumerate(documents):
            # Each pair alone: compute_score pads a batch's documents with
            # zero vectors, which a MaxSim over negative products picks up.
            ref = reference.compute_score(
                [(q, d)], max_query_length=512, max_passage_length=512,
                weights_for_different_modes=WEIGHTS)
            plain = reference.compute_score(
                [(q, d)], max_query_length=512, max_passage_length=512)
            mine = _scores(got_q[qi], got_d[di])
            for key, value in mine.items():
                worst = max(worst, abs(value - _first(ref[key])))
            want = _first(ref["colbert+sparse+dense"])
            rerank = max(rerank, abs(weighted[di] - want),
                         abs(default[di] -
                             _first(plain["colbert+sparse+dense"])))
            http = max(http, abs(over_http[di] - want))
            pairs += 1
    report.add(NAME, "dense/sparse/ColBERT scores vs compute_score", worst,
               TOL, pairs, "weights 0.4/0.2/0.4")
    report.add(NAME, "Rerank (late interaction) vs compute_score", rerank,
               TOL, pairs, "default and 0.4/0.2/0.4")
    report.add(NAME, "/v1/rerank weights vs compute_score", http, TOL, pairs)
    if max(worst, rerank, http) > TOL:
        report.fail(f"{NAME}: scores differ from compute_score: from the "
                    f"outputs {worst:.3g}, Rerank {rerank:.3g}, /v1/rerank "
                    f"{http:.3g}")


def _first(value):
    return float(value[0] if isinstance(value, list) else value)


def _post_rerank(served, query, documents, whole=False, **extra):
    import json
    import urllib.request
    body = {"model": NAME, "query": query, "documents": documents,
            "weights": dict(zip(("dense", "sparse", "colbert"), WEIGHTS)),
            **extra}
    request = urllib.request.Request(
        f"http://127.0.0.1:{served.http_port}/v1/rerank",
        json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=120) as response:
        out = json.load(response)
    return out if whole else out["results"]


def _check_alignment(served, reference, report):
    """Rerank's explanation on a late-interaction model: each query token
    vector's product with each document token vector, against the
    products of BGEM3FlagModel.encode's ColBERT vectors."""
    query, documents = corpus.SENTENCES[0], corpus.SENTENCES[4:7]
    results = served.client.rerank(query, documents, model=NAME,
                                   keep_order=True, attention_layers=(0,))
    ref = reference.encode([query] + documents, return_dense=False,
                           return_colbert_vecs=True)["colbert_vecs"]
    worst = 0.0
    for r in results:
        want = (ref[0].astype(np.float64) @
                ref[1 + r["index"]].astype(np.float64).T)[None]
        got = r["attention"].astype(np.float64)
        if got.shape != want.shape or \
                len(r["query_tokens"]) != want.shape[1] or \
                len(r["document_tokens"]) != want.shape[2]:
            worst = float("inf")
            continue
        worst = max(worst, float(np.abs(got - want).max()))
    report.add(NAME, "Rerank alignment vs encode's ColBERT products", worst,
               TOL, len(results))
    if worst > TOL:
        report.fail(f"{NAME}: the alignment differs by {worst:.3g}")
    # /v1/rerank's explanation: the same alignment in JSON.
    body = _post_rerank(served, query, documents, whole=True,
                        attention={"layers": [0]})
    by_index = {r["index"]: r for r in results}
    http_worst = 0.0 if body.get("explanation") == "token_similarity" \
        else float("inf")
    for r in body["results"]:
        a = r.get("attention", {})
        got = np.asarray(a.get("values", []), np.float64).reshape(
            a.get("shape", [0]))
        want = by_index[r["index"]]["attention"].astype(np.float64)
        if got.shape != want.shape or r["document_tokens"] != \
                list(by_index[r["index"]]["document_tokens"]):
            http_worst = float("inf")
            continue
        http_worst = max(http_worst, float(np.abs(got - want).max()))
    report.add(NAME, "/v1/rerank alignment vs gRPC", http_worst, TOL,
               len(body["results"]))


def _check_refusals(served, report):
    """Weights that are all 0 or negative, and positional probes asked
    of late interaction: INVALID_ARGUMENT."""
    import grpc
    cases = [dict(weights=(0, 0, 0)), dict(weights=(1, -1, 1)),
             dict(positional_probes=True)]
    for options in cases:
        try:
            served.client.rerank("a query", ["a document"], model=NAME,
                                 **options)
            report.fail(f"{NAME}: rerank with {options} was accepted")
        except grpc.RpcError as e:
            if e.code() != grpc.StatusCode.INVALID_ARGUMENT:
                report.fail(f"{NAME}: rerank with {options} got {e.code()}")
    report.add(NAME, "late-interaction rerank refusals", 0, 0, len(cases))


def check(served, models, embedder, report):
    import grpc
    from FlagEmbedding import BGEM3FlagModel
    for name, path in models:
        try:
            _check_listing(served, report)
            reference = BGEM3FlagModel(str(path), use_fp16=False,
                                       devices="cpu",
                                       normalize_embeddings=True)
            texts = [t for t in corpus.SENTENCES if len(t) < 300][:24]
            got = _compare_encode(served, reference, texts, report)
            _compare_http(served, texts[:4], got[:4], report)
            _compare_scores(served, reference, report)
            _check_alignment(served, reference, report)
            _check_refusals(served, report)
        except Exception as e:  # one model's failure is reported
            report.fail(f"{name}: {type(e).__name__}: {e}")
    if embedder is None or not models:
        return
    try:
        served.client.embed_response(["a text"], model=embedder, sparse=True)
        report.fail(f"{embedder}: return_sparse without a sparse head was "
                    "accepted")
    except grpc.RpcError as e:
        if e.code() != grpc.StatusCode.FAILED_PRECONDITION:
            report.fail(f"{embedder}: return_sparse got {e.code()}, "
                        "expected FAILED_PRECONDITION")
    report.add("bge-m3", "return_sparse refused without a sparse head", 0, 0,
               1)
