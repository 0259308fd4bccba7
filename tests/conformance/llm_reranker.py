"""Instruction-following LLM rerankers (Qwen3-Reranker) against transformers.

Models: a Qwen3 causal language model built by transformers with seeded
random weights (an untied lm_head, as Qwen3-Reranker-4B and -8B, and one
tied to the token embeddings, as Qwen3-Reranker-0.6B; the "yes" row set so
that scores spread about 0.5), with a Qwen byte-level BPE
tokenizer that adds no special tokens (as Qwen3-Reranker's) and has "yes"
and "no" as vocabulary entries; and its sequence-classification form
(Qwen3ForSequenceClassification whose one-row `score` is the language-model
head's yes row less its no row, as the published "-seq-cls" conversions
are made). Both served with --rerank-template NAME=qwen3-reranker.

The reference is the Qwen3-Reranker model card's own procedure written
out: the prefix and suffix tokenized without special tokens, the formatted
"<Instruct>: ...\\n<Query>: ...\\n<Document>: ..." tokenized with
truncation to the length less the prefix and suffix, the ids joined, the
causal LM's last-position logits of "yes" and "no" through a softmax
(the probability of "yes"); for the converted form, the sigmoid of
AutoModelForSequenceClassification's logit on the same ids. Each input
runs alone (no padding).

Checks: ListModels (rerank task, template and instruction); Rerank's
scores on 4 queries x 20 documents within 1e-5 of the reference and in the
same order but for ties within 1e-5, for both forms; a per-request
instruction; a document past the model's length with truncate; TEI's
/rerank and /v1/rerank with an instruction against gRPC; the explanation
(the attention of chosen layers from the last position, whose logits are
read, to the document's tokens) against transformers' attentions; the
refusals (an instruction to a model without a template, positional probes
on a templated model: INVALID_ARGUMENT).
"""
import json
import urllib.error
import urllib.request

import numpy as np
import torch
import transformers
from tokenizers import (Regex, Tokenizer, decoders, models, normalizers,
                        pre_tokenizers, trainers)

import corpus
import family_models

TOL = 1e-5
TEMPLATE = "qwen3-reranker"
# The model card's prompt (server/model/rerank_template.cc serves the same
# text; written out here from the card).
PREFIX = ("<|im_start|>system\nJudge whether the Document meets the "
          "requirements based on the Query and the Instruct provided. Note "
          "that the answer can only be \"yes\" or \"no\".<|im_end|>\n"
          "<|im_start|>user\n")
SUFFIX = "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
INSTRUCTION = ("Given a web search query, retrieve relevant passages that "
               "answer the query")
NAMES = ("qwen3-reranker-lm", "qwen3-reranker-seqcls", "qwen3-reranker-tied")


def _tokenizer():
    """Qwen's byte-level BPE without a post-processor, trained on the
    corpus and on lines that make "yes" and "no" vocabulary entries."""
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(family_models.QWEN_SPLIT),
                             behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    texts = corpus.TEXTS * 2 + ["yes\nno\nyes\nno"] * 200
    tok.train_from_iterator(texts, trainers.BpeTrainer(
        vocab_size=family_models.VOCAB, special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    fast = transformers.PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token="<|im_end|>",
        pad_token="<|endoftext|>", unk_token="<|endoftext|>")
    fast.model_max_length = 300
    for word in ("yes", "no"):
        if word not in tok.get_vocab():
            raise RuntimeError(f"the reranker tokenizer has no {word!r}")
    return fast


def _config(tok):
    config = family_models.sized_config(family_models._qwen3, tok)
    config.pad_token_id = tok.pad_token_id
    return config


def _card_ids(tok, query, document, instruction=INSTRUCTION, max_length=300):
    """The model card's input: the prefix and suffix without special
    tokens around the formatted body, cut to fit `max_length`."""
    prefix = tok.encode(PREFIX, add_special_tokens=False)
    suffix = tok.encode(SUFFIX, add_special_tokens=False)
    body = (f"<Instruct>: {instruction}\n<Query>: {query}\n"
            f"<Document>: {document}")
    ids = tok(body, truncation="longest_first",
              max_length=max_length - len(prefix) - len(suffix))["input_ids"]
    return prefix + ids + suffix


def _texts():
    short = [t for t in corpus.SENTENCES if len(t) < 80]
    return short[:4], short[4:24]


@torch.no_grad()
def _calibrate(lm, tok, yes, no):
    """Sets the language-model head's yes row to its no row plus a
    direction along which the last position's states of the test's pairs
    vary most (orthogonal to their mean): with random weights those states
    differ little from pair to pair, so the answer logits' difference is
    centred on 0 and spread over a few units."""
    queries, documents = _texts()
    states = torch.stack([
        lm.model(input_ids=torch.tensor([_card_ids(tok, q, d)]))
        .last_hidden_state[0, -1] for q in queries for d in documents])
    mean = states.mean(0)
    v = torch.linalg.svd(states - mean, full_matrices=False).Vh[0]
    unit = mean / mean.norm()
    v = v - (v @ unit) * unit
    v = v * (2.0 / ((states - mean) @ v).std())
    head = lm.get_output_embeddings().weight
    head[yes] = head[no] + v


def build(out_dir, names=None):
    """Writes both forms; returns [(name, path)]."""
    if names and not set(names) & set(NAMES):
        return []
    tok = _tokenizer()
    yes, no = tok.convert_tokens_to_ids("yes"), tok.convert_tokens_to_ids("no")
    torch.manual_seed(4100)
    # Untied (lm_head.weight stored), as Qwen3-Reranker-4B and -8B.
    lm = transformers.Qwen3ForCausalLM(_config(tok)).eval()
    _calibrate(lm, tok, yes, no)
    built = []
    path = out_dir / NAMES[0]
    lm.save_pretrained(path, safe_serialization=True)
    tok.save_pretrained(path)
    built.append((NAMES[0], path))
    config = _config(tok)
    config.num_labels = 1
    config.id2label = {0: "yes"}
    config.label2id = {"yes": 0}
    seq = transformers.Qwen3ForSequenceClassification(config).eval()
    with torch.no_grad():
        seq.model.load_state_dict(lm.model.state_dict())
        head = lm.get_output_embeddings().weight
        seq.score.weight.copy_((head[yes] - head[no]).unsqueeze(0))
    path = out_dir / NAMES[1]
    seq.save_pretrained(path, safe_serialization=True)
    tok.save_pretrained(path)
    built.append((NAMES[1], path))
    # Tied (no lm_head.weight stored: the token embeddings answer), as
    # Qwen3-Reranker-0.6B.
    torch.manual_seed(4101)
    config = _config(tok)
    config.tie_word_embeddings = True
    tied = transformers.Qwen3ForCausalLM(config).eval()
    _calibrate(tied, tok, yes, no)
    path = out_dir / NAMES[2]
    tied.save_pretrained(path, safe_serialization=True)
    tok.save_pretrained(path)
    built.append((NAMES[2], path))
    return [b for b in built if not names or b[0] in names]


def server_flags(built):
    return [f"--rerank-template={name}={TEMPLATE}" for name, _ in built]


class _Reference:
    """The model card's procedure, one input at a time."""

    def __init__(self, path, seq_cls):
        self.tok = transformers.AutoTokenizer.from_pretrained(path)
        cls = (transformers.AutoModelForSequenceClassification if seq_cls
               else transformers.AutoModelForCausalLM)
        self.model = cls.from_pretrained(path, dtype=torch.float32,
                                         attn_implementation="eager").eval()
        self.seq_cls = seq_cls
        self.yes = self.tok.convert_tokens_to_ids("yes")
        self.no = self.tok.convert_tokens_to_ids("no")
        self.max_length = 300

    def ids(self, query, document, instruction=INSTRUCTION):
        return _card_ids(self.tok, query, document, instruction,
                         self.max_length)

    @torch.no_grad()
    def explanation(self, query, document, layers):
        """The attention of `layers` from the last position (the answer's)
        to the document's tokens, [layers, heads, 1, D]: the tokens whose
        characters overlap the document's in the body."""
        body = (f"<Instruct>: {INSTRUCTION}\n<Query>: {query}\n"
                f"<Document>: ")
        begin, end = len(body), len(body) + len(document)
        enc = self.tok(body + document, return_offsets_mapping=True)
        prefix = len(self.tok.encode(PREFIX, add_special_tokens=False))
        columns = [prefix + k for k, (a, b) in
                   enumerate(enc["offset_mapping"])
                   if b > begin and a < end and a != b]
        ids = torch.tensor([self.ids(query, document)])
        att = self.model(input_ids=ids, output_attentions=True).attentions
        return np.stack([att[l][0][:, -1:, columns].numpy() for l in layers])

    @torch.no_grad()
    def scores(self, query, documents, instruction=INSTRUCTION):
        out = []
        for d in documents:
            ids = torch.tensor([self.ids(query, d, instruction)])
            logits = self.model(input_ids=ids).logits
            if self.seq_cls:
                out.append(torch.sigmoid(logits[0, 0]).item())
                continue
            pair = torch.stack([logits[0, -1, self.no], logits[0, -1, self.yes]])
            out.append(torch.log_softmax(pair, 0)[1].exp().item())
        return np.asarray(out, np.float64)


def _post(served, route, body):
    request = urllib.request.Request(
        f"http://127.0.0.1:{served.http_port}{route}", json.dumps(body).encode(),
        {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            return response.status, json.load(response)
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def _served_scores(served, name, query, documents, **kw):
    results = served.client.rerank(query, documents, model=name,
                                   keep_order=True, **kw)
    return np.asarray([r["score"] for r in results], np.float64)


def _misordered(got, want):
    """Pairs ranked the other way round by more than the tolerance."""
    bad = 0
    for i in range(len(got)):
        for j in range(len(got)):
            if want[i] > want[j] + TOL and got[i] < got[j] - TOL:
                bad += 1
    return bad


def _check_model(name, path, served, report):
    info = served.models()[name]
    if ("rerank" not in list(info.tasks) or info.rerank_template != TEMPLATE
            or info.rerank_instruction != INSTRUCTION):
        report.fail(f"{name}: ListModels tasks {list(info.tasks)} template "
                    f"{info.rerank_template!r} instruction "
                    f"{info.rerank_instruction!r}")
    ref = _Reference(path, seq_cls=name.endswith("seqcls"))
    queries, documents = _texts()
    worst, bad, spread = 0.0, 0, []
    for q in queries:
        want = ref.scores(q, documents)
        got = _served_scores(served, name, q, documents)
        worst = max(worst, float(np.abs(got - want).max()))
        bad += _misordered(got, want)
        spread.append(float(want.max() - want.min()))
    report.add(name, "Rerank vs the model card's yes/no probability", worst,
               TOL, len(queries) * len(documents))
    report.add(name, "Rerank order differs", bad, 0, len(queries))
    if min(spread) < 100 * TOL:
        report.fail(f"{name}: the reference scores spread only "
                    f"{min(spread):.3g}: the order check is vacuous")
    instruction = "Find the passage that names a place"
    want = ref.scores(queries[0], documents[:8], instruction)
    got = _served_scores(served, name, queries[0], documents[:8],
                         instruction=instruction)
    report.add(name, "Rerank with a request's instruction",
               float(np.abs(got - want).max()), TOL, 8)
    if float(np.abs(want - ref.scores(queries[0], documents[:8])).max()) \
            < 100 * TOL:
        report.fail(f"{name}: the instruction does not change the scores")
    long_doc = " ".join(corpus.SENTENCES) * 3
    if len(ref.ids(queries[0], long_doc)) < ref.max_length:
        report.fail(f"{name}: the long document fits the model")
    want = ref.scores(queries[0], [long_doc])
    got = _served_scores(served, name, queries[0], [long_doc], truncate=True)
    report.add(name, "Rerank past the length with truncate",
               float(np.abs(got - want).max()), TOL, 1)
    _check_http(name, served, queries[0], documents[:5], instruction, report)
    layers = [0, 2]
    explained = served.client.rerank(queries[1], documents[:3], model=name,
                                     keep_order=True, attention_layers=layers)
    worst = 0.0
    for r, d in zip(explained, documents[:3]):
        want = ref.explanation(queries[1], d, layers)
        got = np.asarray(r["attention"], np.float64)
        if got.shape != want.shape or len(r["document_tokens"]) != \
                want.shape[-1] or len(r["query_tokens"]) != 1:
            report.fail(f"{name}: explanation shape {got.shape} tokens "
                        f"{len(r['query_tokens'])}x"
                        f"{len(r['document_tokens'])}; expected {want.shape}")
            return
        worst = max(worst, float(np.abs(got - want).max()))
    report.add(name, "explanation: the answer position's attention to the "
               "document", worst, TOL, 3)
    status, body = _post(served, "/v1/rerank", {
        "query": queries[1], "documents": documents[:3], "model": name,
        "attention": {"layers": layers}})
    if status != 200 or body.get("explanation") != "attention":
        report.fail(f"{name}: /v1/rerank with attention: {status} {body}")
        return
    worst = 0.0
    by_index = dict(enumerate(explained))
    for r in body["results"]:
        got = np.asarray(r["attention"]["values"], np.float64).reshape(
            r["attention"]["shape"])
        want = np.asarray(by_index[r["index"]]["attention"], np.float64)
        worst = max(worst, float(np.abs(got - want).max())
                    if got.shape == want.shape else float("inf"))
    report.add(name, "/v1/rerank explanation vs gRPC", worst, TOL, 3)


def _check_http(name, served, query, documents, instruction, report):
    grpc_scores = _served_scores(served, name, query, documents,
                                 instruction=instruction)
    status, tei = _post(served, "/rerank", {
        "query": query, "texts": documents, "model": name,
        "instruction": instruction})
    status2, v1 = _post(served, "/v1/rerank", {
        "query": query, "documents": documents, "model": name,
        "instruction": instruction})
    if (status, status2) != (200, 200):
        report.fail(f"{name}: /rerank {status} {tei}; /v1/rerank {status2} "
                    f"{v1}")
        return
    worst = max(max(abs(r["score"] - grpc_scores[r["index"]]) for r in tei),
                max(abs(r["relevance_score"] - grpc_scores[r["index"]])
                    for r in v1["results"]))
    report.add(name, "/rerank and /v1/rerank with instruction vs gRPC", worst,
               TOL, 2 * len(documents))


def _expect_invalid(report, label, call, text):
    import grpc
    try:
        call()
        report.fail(f"{label}: expected INVALID_ARGUMENT, got OK")
    except grpc.RpcError as e:
        if e.code() != grpc.StatusCode.INVALID_ARGUMENT or \
                text not in e.details():
            report.fail(f"{label}: expected INVALID_ARGUMENT with {text!r}, "
                        f"got {e.code()} {e.details()!r}")


def check(served, built, other_reranker, report):
    """built: [(name, path)]; other_reranker: a cross-encoder without a
    template (for the refusal), or None."""
    for name, path in built:
        try:
            _check_model(name, path, served, report)
            _expect_invalid(report, f"{name}: positional probes", lambda: (
                served.client.rerank("q", ["d"], model=name,
                                     positional_probes=True)),
                "rerank template")
        except Exception as e:  # one model's failure is reported
            report.fail(f"{name}: {type(e).__name__}: {e}")
    if other_reranker is not None:
        _expect_invalid(report, f"{other_reranker}: instruction", lambda: (
            served.client.rerank("q", ["d"], model=other_reranker,
                                 instruction="x")),
            "has no rerank template")
