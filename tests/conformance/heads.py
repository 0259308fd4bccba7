"""Classification heads against transformers and sentence-transformers.

Models: transformers' *ForSequenceClassification built from the family
configs of family_models.py with seeded random weights (the classifier's
weights scaled up so that scores spread), saved with save_pretrained:

- ce-bert: BERT with one output and sentence-transformers' CrossEncoder
  activation (Sigmoid) in config.json: a reranker (pooler, classifier,
  token types of the pair);
- ce-deberta-v3: DeBERTa-v3's layout with one output (ContextPooler with
  GELU), no activation named: a sigmoid, as text-embeddings-inference;
- ce-electra: ELECTRA's head (dense, GELU, out_proj);
- nli-roberta: RoBERTa with three labels (id2label), RobertaProcessing's
  pair template, softmax over the labels;
- ce-qwen3: Qwen3 with `score` on the last token (causal, grouped
  key/value heads), one output;
- multi-modernbert: ModernBERT with two labels, mean pooling into the
  head (dense, GELU, LayerNorm) and problem_type multi_label (a sigmoid
  per label).

Checks, per model: ListModels' tasks, labels and activation; the pair
token ids against the model's AutoTokenizer; Classify's raw logits and
activated scores against AutoModelForSequenceClassification on the same
texts and pairs (tolerance 1e-5, label order identical but for ties
within it); for rerankers,
Rerank against CrossEncoder.predict (scores 1e-5, the same order but for
scores within 1e-5 of each other, a tie either way) and a
pair past the model's length with truncate against the tokenizer's
longest_first truncation; the explained attention (query tokens to
document tokens, chosen layers and heads) against transformers'
attentions of the pair; the positional probes (the pair swapped against
CrossEncoder on (document, query), the document's tokens reversed
against the model on those ids); encoder-client rerank --report's page
(a section per result with its probes, heatmap labels the explained
tokens); text-embeddings-inference's /rerank and
/predict and /v1/rerank against the same gRPC answers; the refusals
(rerank on a multi-label model or an embedding model, empty documents,
more documents than --max-inputs-per-request, a pair over the length
without truncate) with their codes. huggingface_hub's InferenceClient
(text_classification, feature_extraction, sentence_similarity) against
the TEI routes of a server whose default model is the classifier.
"""
import html.parser
import json
import urllib.error
import urllib.request

import numpy as np
import torch
import transformers

import corpus
import family_models

SCORE_TOL = 1e-5
SIGMOID = "torch.nn.modules.activation.Sigmoid"


def _modernbert_mean():
    c = family_models._modernbert()
    c.classifier_pooling = "mean"
    c.problem_type = "multi_label_classification"
    return c


def _qwen3_scored():
    c = family_models._qwen3()
    c.pad_token_id = 0  # <|endoftext|>: the last real token is scored
    return c


# name -> (config, class, tokenizer kind, labels, sentence-transformers
#          activation or None)
HEADS = {
    "ce-bert": (family_models._bert,
                transformers.BertForSequenceClassification, "wordpiece",
                ["LABEL_0"], SIGMOID),
    "ce-deberta-v3": (family_models._deberta_v3,
                      transformers.DebertaV2ForSequenceClassification,
                      "unigram", ["LABEL_0"], None),
    "ce-electra": (family_models._electra,
                   transformers.ElectraForSequenceClassification,
                   "wordpiece", ["relevant"], None),
    "nli-roberta": (family_models._roberta,
                    transformers.RobertaForSequenceClassification, "bpe",
                    ["contradiction", "entailment", "neutral"], None),
    "ce-qwen3": (_qwen3_scored,
                 transformers.Qwen3ForSequenceClassification, "qwen",
                 ["LABEL_0"], None),
    "multi-modernbert": (_modernbert_mean,
                         transformers.ModernBertForSequenceClassification,
                         "wordpiece", ["toxic", "formal"], None),
}


@torch.no_grad()
def _spread(model):
    """Noise on every bias and gain, and the classifier's weights x10, so
    that the scores of different texts differ well beyond 1e-5."""
    for name, p in model.named_parameters():
        if p.dim() == 1:
            p.add_(0.3 * torch.randn_like(p))
        elif any(k in name for k in ("classifier", "pooler", "head.")):
            p.mul_(10.0)


def build(out_dir, names=None):
    """Writes each model directory; returns [(name, path)]."""
    built = []
    for i, (name, (make_config, cls, kind, labels, act)) in enumerate(
            HEADS.items()):
        if names and name not in names:
            continue
        tok = family_models.tokenizer(kind)
        config = family_models.sized_config(make_config, tok)
        config.num_labels = len(labels)
        config.id2label = dict(enumerate(labels))
        config.label2id = {l: i for i, l in enumerate(labels)}
        if act:
            config.sentence_transformers = {"activation_fn": act}
        torch.manual_seed(2000 + i)
        model = cls(config).eval()
        _spread(model)
        path = out_dir / name
        model.save_pretrained(path, safe_serialization=True)
        tok.save_pretrained(path)
        if kind == "wordpiece":
            family_models.bert_token_types(path)
        built.append((name, path))
    return built


def _texts():
    short = [t for t in corpus.SENTENCES if len(t) < 80]
    queries = short[:4]
    documents = short[4:24]
    return queries, documents


def _post(served, route, body, timeout=120):
    """(status, parsed JSON) of a POST to the server's HTTP port."""
    request = urllib.request.Request(
        f"http://127.0.0.1:{served.http_port}{route}", json.dumps(body).encode(),
        {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, json.load(response)
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def _activate(logits, activation):
    logits = np.asarray(logits, np.float64)
    if activation == "sigmoid":
        return 1 / (1 + np.exp(-logits))
    if activation == "softmax":
        e = np.exp(logits - logits.max(-1, keepdims=True))
        return e / e.sum(-1, keepdims=True)
    return logits


class _Reference:
    def __init__(self, path):
        self.tok = transformers.AutoTokenizer.from_pretrained(path)
        self.model = transformers.AutoModelForSequenceClassification\
            .from_pretrained(path, attn_implementation="eager",
                             dtype=torch.float32).eval()

    @torch.no_grad()
    def logits(self, items, max_length=None):
        out = []
        for item in items:  # one at a time: no padding in the reference
            a, b = (item, None) if isinstance(item, str) else item
            enc = self.tok(a, b, return_tensors="pt",
                           truncation=max_length is not None,
                           max_length=max_length)
            out.append(self.model(**enc).logits[0].numpy())
        return np.stack(out)

    def ids(self, a, b, max_length=None):
        return self.tok(a, b, truncation=max_length is not None,
                        max_length=max_length)["input_ids"]


def _check_model(name, path, served, report):
    import grpc
    info = served.models()[name]
    labels = HEADS[name][3]
    expect_tasks = ["embed", "classify"] + (["rerank"] if len(labels) == 1
                                            else [])
    if list(info.tasks) != expect_tasks or list(info.labels) != labels:
        report.fail(f"{name}: ListModels tasks {list(info.tasks)} labels "
                    f"{list(info.labels)}; expected {expect_tasks} {labels}")
    activation = info.score_activation
    expected_activation = ("softmax" if len(labels) > 1 and
                           name != "multi-modernbert" else "sigmoid")
    if activation != expected_activation:
        report.fail(f"{name}: score_activation {activation!r}, expected "
                    f"{expected_activation!r}")
    ref = _Reference(path)
    queries, documents = _texts()
    # Pairs and single texts, as Classify takes them.
    items = [(q, d) for q in queries[:2] for d in documents[:8]]
    items += documents[8:14]
    # The pairs' lengths (their ids and type ids show in the scores).
    worst_ids = 0
    for q, d in items[:8]:
        got_tokens = served.client.classify_response(
            [(q, d)], model=name).results[0].tokens
        if got_tokens != len(ref.ids(q, d)):
            worst_ids += 1
    report.add(name, "pair lengths differ", worst_ids, 0, 8)

    want = ref.logits(items)
    raw = served.client.classify(items, model=name, raw_scores=True)
    got = np.stack([[dict(r)[l] for l in labels] for r in raw])
    report.add(name, "classify logits", float(np.abs(got - want).max()),
               SCORE_TOL, len(items))
    activated = served.client.classify(items, model=name)
    want_act = _activate(want, activation)
    got_act = np.stack([[dict(r)[l] for l in labels] for r in activated])
    report.add(name, "classify scores", float(np.abs(got_act - want_act)
                                              .max()), SCORE_TOL, len(items))
    position = {l: j for j, l in enumerate(labels)}
    order_bad = sum(
        _misordered([position[l] for l, _ in r], g, w)
        for r, g, w in zip(activated, got_act, want_act))
    report.add(name, "label order differs", order_bad, 0, len(items))

    # TEI's /predict: one text, one pair, a batch.
    status, one = _post(served, "/predict",
                        {"inputs": items[-1], "model": name})
    status2, pair = _post(served, "/predict",
                          {"inputs": list(items[0]), "model": name})
    status3, batch = _post(served, "/predict",
                           {"inputs": [list(items[0]), items[-1]],
                            "model": name, "raw_scores": True})
    if (status, status2, status3) != (200, 200, 200):
        report.fail(f"{name}: /predict statuses {status} {status2} "
                    f"{status3}: {one} {pair} {batch}")
    else:
        worst = max(
            abs(p["score"] - dict(activated[-1])[p["label"]]) for p in one)
        worst = max(worst, max(abs(p["score"] - dict(activated[0])[p["label"]])
                               for p in pair))
        worst = max(worst, max(abs(p["score"] - dict(raw[0])[p["label"]])
                               for p in batch[0]))
        report.add(name, "/predict vs Classify", worst, SCORE_TOL, 3)

    if len(labels) != 1:
        try:
            served.client.rerank(queries[0], documents[:2], model=name)
            report.fail(f"{name}: Rerank on a {len(labels)}-label model "
                        "succeeded")
        except grpc.RpcError as e:
            if (e.code() != grpc.StatusCode.FAILED_PRECONDITION or
                    "rerank" not in e.details()):
                report.fail(f"{name}: Rerank on a multi-label model: "
                            f"{e.code()} {e.details()}")
        status, body = _post(served, "/rerank", {
            "query": queries[0], "texts": documents[:2], "model": name})
        if status != 424 or body.get("error_type") != "Backend":
            report.fail(f"{name}: /rerank on a classifier: {status} {body}")
        return
    _check_reranker(name, path, ref, served, report, activation)


class _Page(html.parser.HTMLParser):
    """The sections, the text of each and its heatmaps' <text> labels."""

    def __init__(self):
        super().__init__()
        self.sections, self.labels = [], []
        self._in_text = False

    def handle_starttag(self, tag, attrs):
        if tag == "section":
            self.sections.append("")
            self.labels.append([])
        self._in_text = tag == "text"

    def handle_endtag(self, tag):
        self._in_text = False

    def handle_data(self, data):
        if self.sections:
            self.sections[-1] += data
            if self._in_text:
                self.labels[-1].append(data)


def _misordered(order, got, want):
    """Whether `order` (indices, best first) is not sorted by the served
    scores `got`, or puts one item before another whose reference score in
    `want` is higher by more than SCORE_TOL: scores within the tolerance
    of each other are a tie, which float rounding may break either way."""
    for a, b in zip(order, order[1:]):
        if got[a] < got[b] or want[b] - want[a] > SCORE_TOL:
            return True
    return False


def _check_rerank_page(name, path, results, report):
    """encoder-client rerank --report: a section per result with its
    score and probes, and a heatmap labelled with the explained tokens."""
    page = _Page()
    page.feed(path.read_text())
    bad = []
    if len(page.sections) != len(results):
        bad.append(f"{len(page.sections)} sections for {len(results)} "
                   "results")
    for text, labels, r in zip(page.sections, page.labels, results):
        if f"document {r.get('index', 0)}" not in text or \
                "swapped" not in text or "reversed" not in text:
            bad.append(f"section lacks its index or probes: {text[:120]}")
        missing = [t for t in r["query_tokens"] if t not in labels]
        if missing:
            bad.append(f"heatmap lacks query tokens {missing[:3]}")
    report.add(name, "rerank --report page", len(bad), 0, len(results))
    for b in bad:
        report.fail(f"{name}: rerank page: {b}")


def _check_reranker(name, path, ref, served, report, activation):
    import grpc
    from sentence_transformers import CrossEncoder
    queries, documents = _texts()
    ce = CrossEncoder(str(path), device="cpu")
    worst = 0.0
    order_bad = 0
    for q in queries:
        want = np.asarray(ce.predict([(q, d) for d in documents],
                                     batch_size=8, show_progress_bar=False),
                          np.float64).reshape(-1)
        got = served.client.rerank(q, documents, model=name)
        scores = np.zeros(len(documents))
        for r in got:
            scores[r["index"]] = r["score"]
        worst = max(worst, float(np.abs(scores - want).max()))
        order = [r["index"] for r in got]
        if sorted(order) != list(range(len(documents))) or _misordered(
                order, scores, want):
            order_bad += 1
    report.add(name, "rerank vs CrossEncoder", worst, SCORE_TOL,
               len(queries) * len(documents))
    report.add(name, "rerank order differs", order_bad, 0, len(queries))

    # A pair past the model's length: truncate cuts it as longest_first.
    limit = served.models()[name].max_input_tokens
    long_doc = " ".join(documents) * 4
    got = served.client.rerank(queries[0], [long_doc], model=name,
                               truncate=True, raw_scores=True)[0]
    want = ref.logits([(queries[0], long_doc)], max_length=limit)[0, 0]
    report.add(name, "rerank truncated pair", abs(got["score"] - want),
               SCORE_TOL, 1)
    if not got["truncated"] or got["tokens"] != len(
            ref.ids(queries[0], long_doc, limit)):
        report.fail(f"{name}: truncated pair {got}, reference "
                    f"{len(ref.ids(queries[0], long_doc, limit))} tokens")
    # The server's default (truncate unset) cuts it the same and counts the
    # tokens dropped (truncate=False refuses it: "Refusals" below).
    default = served.client.rerank(queries[0], [long_doc], model=name,
                                   raw_scores=True)[0]
    whole = len(ref.ids(queries[0], long_doc))
    if (abs(default["score"] - got["score"]) > SCORE_TOL or
            default["truncated_tokens"] != whole - got["tokens"]):
        report.fail(f"{name}: default truncation {default}, reference "
                    f"{whole} tokens whole, {got['tokens']} cut")

    # Explained: the query-to-document attention of layers 0 and 2 (heads
    # 1 and 0), against transformers' attentions of the same pair.
    q, d = queries[2], documents[3]
    got = served.client.rerank(q, [d], model=name, attention_layers=[0, 2],
                               attention_heads=[1, 0])[0]
    enc = ref.tok(q, d, return_tensors="pt")
    with torch.no_grad():
        attentions = ref.model(**enc, output_attentions=True).attentions
    seq = enc.sequence_ids(0)
    rows = [k for k, v in enumerate(seq) if v == 0]
    cols = [k for k, v in enumerate(seq) if v == 1]
    want = np.stack([attentions[l][0][[1, 0]][:, rows][:, :, cols].numpy()
                     for l in (0, 2)])
    report.add(name, "rerank attention q->d", float(np.abs(
        got["attention"] - want).max()) if got["attention"].shape ==
        want.shape else float("inf"), SCORE_TOL, 1)
    ids = enc["input_ids"][0].tolist()
    names = ref.tok.convert_ids_to_tokens(ids)
    if (got["query_tokens"] != [names[k] for k in rows] or
            got["document_tokens"] != [names[k] for k in cols]):
        report.fail(f"{name}: explained tokens {got['query_tokens']} "
                    f"{got['document_tokens']}")

    # Positional probes: the pair swapped, against CrossEncoder on
    # (document, query); the document's tokens reversed in place, against
    # the model on the reversed ids.
    probes_worst = 0.0
    for d in documents[:4]:
        got = served.client.rerank(q, [d], model=name,
                                   positional_probes=True)[0]
        swapped = float(ce.predict([(d, q)], show_progress_bar=False)[0])
        enc = ref.tok(q, d, return_tensors="pt")
        seq = enc.sequence_ids(0)
        cols = [k for k, v in enumerate(seq) if v == 1]
        ids = enc["input_ids"].clone()
        ids[0, cols] = enc["input_ids"][0, cols[::-1]]
        enc["input_ids"] = ids
        with torch.no_grad():
            logits = ref.model(**enc).logits[0].numpy()
        reversed_score = float(_activate(logits, activation)[0])
        probes_worst = max(probes_worst,
                           abs(got["probes"]["swapped"] - swapped),
                           abs(got["probes"]["reversed_document"] -
                               reversed_score))
    report.add(name, "rerank positional probes", probes_worst, SCORE_TOL, 8)

    # encoder-client rerank (beside the server binary) prints the same.
    cli = served.binary.parent / "encoder-client"
    if cli.is_file():
        import subprocess
        args = [str(cli), "rerank", f"--target=127.0.0.1:{served.process.port}",
                f"--model={name}", f"--query={queries[1]}", "--top-n=3",
                "--attention-layers=1", "--average-heads",
                "--positional-probes", f"--report={served.work}/rerank.html"]
        args += [f"--document={d}" for d in documents]
        printed = json.loads(subprocess.run(
            args, check=True, capture_output=True, text=True).stdout)
        want = served.client.rerank(queries[1], documents, model=name)[:3]
        results = printed["results"]
        same = [r.get("index", 0) for r in results] == [
            w["index"] for w in want]
        worst = max(abs(r["score"] - w["score"])
                    for r, w in zip(results, want))
        report.add(name, "encoder-client rerank", worst if same else
                   float("inf"), SCORE_TOL, 3)
        if "attention" not in results[0] or not results[0]["query_tokens"]:
            report.fail(f"{name}: encoder-client rerank printed no "
                        f"explanation: {results[0]}")
        _check_rerank_page(name, served.work / "rerank.html", results,
                           report)

    # TEI's /rerank and /v1/rerank give gRPC's scores and order.
    grpc_ranked = served.client.rerank(queries[1], documents, model=name)
    status, tei = _post(served, "/rerank", {
        "query": queries[1], "texts": documents, "model": name,
        "return_text": True})
    status2, v1 = _post(served, "/v1/rerank", {
        "query": queries[1], "documents": documents, "model": name,
        "top_n": 3, "return_documents": True})
    if status != 200 or status2 != 200:
        report.fail(f"{name}: /rerank {status} {tei}; /v1/rerank {status2} "
                    f"{v1}")
    else:
        # Scores by document against the gRPC call's; orders as its, ties
        # within SCORE_TOL either way.
        grpc_scores = np.zeros(len(documents))
        for b in grpc_ranked:
            grpc_scores[b["index"]] = b["score"]
        tei_scores = np.zeros(len(documents))
        for a in tei:
            tei_scores[a["index"]] = a["score"]
        tei_order = [a["index"] for a in tei]
        same = (sorted(tei_order) == sorted(b["index"] for b in grpc_ranked)
                and not _misordered(tei_order, tei_scores, grpc_scores)
                and all(a["text"] == documents[a["index"]] for a in tei))
        top = v1["results"]
        top_order = [r["index"] for r in top]
        top_scores = np.zeros(len(documents))
        for r in top:
            top_scores[r["index"]] = r["relevance_score"]
        # The top 3: their scores within SCORE_TOL of gRPC's third.
        same = same and len(top) == 3 and not _misordered(
            top_order, top_scores, grpc_scores) and all(
            grpc_scores[i] >= grpc_ranked[2]["score"] - SCORE_TOL
            for i in top_order) and all(
            r["document"]["text"] == documents[r["index"]] for r in top)
        worst = max([abs(a["score"] - grpc_scores[a["index"]]) for a in tei] +
                    [abs(r["relevance_score"] - grpc_scores[r["index"]])
                     for r in top])
        report.add(name, "/rerank, /v1/rerank vs gRPC", worst, SCORE_TOL, 2)
        if not same or v1["usage"]["total_tokens"] <= 0:
            report.fail(f"{name}: HTTP rerank order or text differs: {tei} "
                        f"{v1}")

    # Refusals.
    cases = [
        (lambda: served.client.rerank(queries[0], [], model=name),
         grpc.StatusCode.INVALID_ARGUMENT, "no documents"),
        (lambda: served.client.rerank(queries[0], ["a", ""], model=name),
         grpc.StatusCode.INVALID_ARGUMENT, "documents[1] has empty text"),
        (lambda: served.client.rerank(queries[0], ["x"] * 10000, model=name),
         grpc.StatusCode.INVALID_ARGUMENT, "--max-inputs-per-request"),
        (lambda: served.client.rerank(queries[0], [long_doc], model=name,
                                      truncate=False),
         grpc.StatusCode.INVALID_ARGUMENT, f"at most {limit}"),
        (lambda: served.client.rerank("", ["a"], model=name),
         grpc.StatusCode.INVALID_ARGUMENT, "query is empty"),
    ]
    for call, code, text in cases:
        try:
            call()
            report.fail(f"{name}: expected {code} ({text}), got OK")
        except grpc.RpcError as e:
            if e.code() != code or text not in e.details():
                report.fail(f"{name}: expected {code} with {text!r}, got "
                            f"{e.code()} {e.details()!r}")
    status, body = _post(served, "/rerank", {"query": "q", "texts": [],
                                             "model": name})
    if status != 400 or body.get("error_type") != "Empty":
        report.fail(f"{name}: /rerank with no texts: {status} {body}")
    status, body = _post(served, "/v1/rerank", {"query": "q",
                                                "documents": [],
                                                "model": name})
    if status != 400 or body.get("error", {}).get("param") != "documents":
        report.fail(f"{name}: /v1/rerank with no documents: {status} {body}")


def check_hub_client(binary, work, heads, report):
    """huggingface_hub's InferenceClient against the TEI routes of a server
    whose default model is the NLI classifier: text_classification posts
    to /, which routes a classifier to /predict; feature_extraction to
    /embed and sentence_similarity to /similarity. Answers against the
    server's own gRPC Classify and Embed."""
    from huggingface_hub import InferenceClient, constants
    from server_process import ServerProcess
    from encoder_client import EncoderClient
    path = dict(heads).get("nli-roberta")
    if path is None:
        return
    work.mkdir(parents=True, exist_ok=True)
    process = ServerProcess(str(binary), str(work), [
        f"--model-dir=nli={path}", "--http-listen=127.0.0.1:0"])
    # The suite runs with HF_HUB_OFFLINE=1 (no model hub); the client's
    # offline guard refuses every URL, the loopback server's too, so it is
    # lifted for these calls only.
    offline = constants.HF_HUB_OFFLINE
    constants.HF_HUB_OFFLINE = False
    try:
        process.wait_ready(120)
        with open(process.ready_file) as f:
            port = json.load(f)["http_port"]
        base = f"http://127.0.0.1:{port}"
        grpc_client = EncoderClient(f"127.0.0.1:{process.port}", timeout=60)
        text = corpus.SENTENCES[3]
        others = corpus.SENTENCES[4:9]
        got = InferenceClient(model=base + "/").text_classification(text)
        got = got if isinstance(got, list) else [got]
        want = dict(grpc_client.classify([text], model="nli")[0])
        worst = max(abs(e.score - want[e.label]) for e in got)
        report.add("nli-roberta", "hub text_classification", worst,
                   SCORE_TOL, len(got))
        vector = np.asarray(InferenceClient(model=base + "/embed")
                            .feature_extraction(text), np.float64).reshape(-1)
        ref = grpc_client.embed([text], model="nli", normalize=True)[0]
        report.add("nli-roberta", "hub feature_extraction",
                   float(np.abs(vector - ref).max()), SCORE_TOL, ref.size)
        sims = InferenceClient(model=base + "/similarity").sentence_similarity(
            text, other_sentences=others)
        vecs = grpc_client.embed([text] + others, model="nli",
                                 normalize=True).astype(np.float64)
        report.add("nli-roberta", "hub sentence_similarity",
                   float(np.abs(np.asarray(sims) - vecs[1:] @ vecs[0]).max()),
                   SCORE_TOL, len(others))
        grpc_client.close()
    except Exception as e:  # reported, not raised
        report.fail(f"huggingface_hub client: {type(e).__name__}: {e}")
    finally:
        constants.HF_HUB_OFFLINE = offline
        process.stop()


def check(served, heads, embedder, report):
    """heads: [(name, path)]; embedder: an embedding model's name (no
    head) for the refusal check, or None."""
    import grpc
    for name, path in heads:
        try:
            _check_model(name, path, served, report)
        except Exception as e:  # one model's failure is reported
            report.fail(f"{name}: {type(e).__name__}: {e}")
    if embedder is not None:
        try:
            served.client.classify(["a text"], model=embedder)
            report.fail(f"{embedder}: Classify on an embedding model "
                        "succeeded")
        except grpc.RpcError as e:
            if (e.code() != grpc.StatusCode.FAILED_PRECONDITION or
                    "no classification head" not in e.details()):
                report.fail(f"{embedder}: Classify: {e.code()} "
                            f"{e.details()}")
