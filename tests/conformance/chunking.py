"""Long inputs in windows (EmbedRequest.long_input chunking), on real
weights, against a computation of the same policy with transformers.

The policy: a text's own tokens (tokenized without special tokens) in
windows of the model's length less its special tokens, each window
repeating `overlap` tokens of the one before and the last ending at the
text's end; each window framed by the tokenizer's special tokens ([CLS]
... [SEP]) and embedded alone; the windows' pooled vectors (the model's
pooling, before normalization) averaged with weights equal to the text
tokens each window holds, or their element-wise max; then normalized as
the model does. The reference computes that with AutoTokenizer and
AutoModel (all-MiniLM-L6-v2: mean pooling, Normalize).

Late chunking (long_input late_chunk): the text runs whole once, framed
by its special tokens; each window of its own tokens (chunk_tokens wide,
repeating `overlap`) is the mean of the last hidden state over the
window's positions of that one run; the windows' vectors are aggregated
and normalized as above. Every window's vector (return_chunks) is checked
too, with the tokens it covers and the characters of the text they came
from (the tokenizer's offset mapping). A text past the model's length
late-chunks as far as its learned position table reaches, and is refused
(INVALID_ARGUMENT, "chunk it instead") beyond.

A retrieval check shows the policy matters: documents share a long opening
and differ only in a sentence past the first window; a query about that
sentence finds its document when the documents are chunked and not when
they are truncated.
"""
import base64

import numpy as np
import torch

TOL = 1e-5
FACTS = [
    ("The capital of Australia is Canberra, not Sydney.",
     "What is the capital city of Australia?"),
    ("Octopuses have three hearts and blue blood.",
     "How many hearts does an octopus have?"),
    ("Mount Everest is 8,849 metres above sea level.",
     "How tall is Mount Everest?"),
    ("The Great Fire of London broke out in a bakery in 1666.",
     "Where did the Great Fire of London start?"),
    ("Honey found in Egyptian tombs was still edible after 3,000 years.",
     "Does honey spoil over thousands of years?"),
    ("Venus rotates in the opposite direction to most planets.",
     "Which planet spins backwards?"),
    ("Bananas are botanically berries, while strawberries are not.",
     "Is a banana a berry?"),
    ("The Eiffel Tower grows about 15 centimetres taller in summer heat.",
     "Does the Eiffel Tower change height with temperature?"),
    ("Sharks existed before trees appeared on Earth.",
     "Which came first, sharks or trees?"),
    ("A day on Mercury lasts longer than its year.",
     "How long is a day on Mercury compared with its year?"),
]


def _max_abs(a, b):
    return float(np.max(np.abs(np.asarray(a) - np.asarray(b))))


class Policy:
    """The chunking policy computed with transformers."""

    def __init__(self, path, max_length):
        import transformers
        self.tok = transformers.AutoTokenizer.from_pretrained(path)
        self.model = transformers.AutoModel.from_pretrained(
            path, dtype=torch.float32).eval()
        self.max_length = max_length

    @torch.no_grad()
    def pooled(self, ids):
        """Mean over the window's tokens of the last hidden state."""
        out = self.model(input_ids=torch.tensor([ids]),
                         attention_mask=torch.ones(1, len(ids),
                                                   dtype=torch.long))
        return out.last_hidden_state[0].mean(0).double().numpy()

    def windows(self, text, overlap):
        body = self.tok(text, add_special_tokens=False)["input_ids"]
        whole = self.tok(text)["input_ids"]
        at = next(k for k in range(len(whole) - len(body) + 1)
                  if whole[k:k + len(body)] == body)
        head, tail = whole[:at], whole[at + len(body):]
        if len(whole) <= self.max_length:
            return [(whole, len(body))]
        width = self.max_length - len(head) - len(tail)
        step = width - overlap
        out, start = [], 0
        while True:
            end = min(start + width, len(body))
            out.append((head + body[start:end] + tail, end - start))
            if end == len(body):
                return out
            start += step

    def body(self, text):
        """The text's own ids, their character offsets, the whole encoding
        and where the own ids start in it."""
        enc = self.tok(text, add_special_tokens=False,
                       return_offsets_mapping=True)
        body = enc["input_ids"]
        whole = self.tok(text)["input_ids"]
        at = next(k for k in range(len(whole) - len(body) + 1)
                  if whole[k:k + len(body)] == body)
        return body, enc["offset_mapping"], whole, at

    @staticmethod
    def spans(n, width, overlap):
        out, start = [], 0
        while True:
            end = min(start + width, n)
            out.append((start, end))
            if end == n:
                return out
            start += width - overlap

    @torch.no_grad()
    def late(self, text, chunk_tokens, overlap):
        """Late chunking: (aggregate, [(vector, tokens, chars)])."""
        body, offsets, whole, at = self.body(text)
        hidden = self.model(
            input_ids=torch.tensor([whole]),
            attention_mask=torch.ones(1, len(whole), dtype=torch.long)
        ).last_hidden_state[0].double().numpy()
        width = min(chunk_tokens, len(body)) if chunk_tokens else len(body)
        chunks = []
        for b, e in self.spans(len(body), width, overlap):
            v = hidden[at + b:at + e].mean(0)
            chunks.append((v, (b, e), (offsets[b][0], offsets[e - 1][1])))
        weights = np.array([e - b for _, (b, e), _ in chunks], np.float64)
        agg = (np.stack([v for v, _, _ in chunks]) * weights[:, None]).sum(0)
        agg /= weights.sum()
        unit = lambda v: v / max(np.linalg.norm(v), 1e-12)  # noqa: E731
        return unit(agg), [(unit(v), t, c) for v, t, c in chunks]

    def chunk_spans(self, text, overlap):
        """The chunk policy's windows of a long text with their spans:
        [(vector, tokens, chars)], each vector normalized."""
        body, offsets, whole, at = self.body(text)
        head, tail = whole[:at], whole[at + len(body):]
        width = self.max_length - len(head) - len(tail)
        out = []
        for b, e in self.spans(len(body), width, overlap):
            v = self.pooled(head + body[b:e] + tail)
            out.append((v / max(np.linalg.norm(v), 1e-12), (b, e),
                        (offsets[b][0], offsets[e - 1][1])))
        return out

    def embed(self, text, overlap=0, aggregation="mean"):
        wins = self.windows(text, overlap)
        vecs = np.stack([self.pooled(ids) for ids, _ in wins])
        weights = np.array([n for _, n in wins], dtype=np.float64)
        v = (vecs.max(0) if aggregation == "max"
             else (vecs * weights[:, None]).sum(0) / weights.sum())
        return v / max(np.linalg.norm(v), 1e-12), len(wins)


def long_texts(sentences, count=6):
    """Texts of about 300 to 1,300 tokens from the corpus' sentences."""
    out = []
    for k in range(count):
        n = 20 + 20 * k
        out.append(" ".join(sentences[(k + j) % len(sentences)]
                            for j in range(n)))
    return out


def _http(served, model, texts, long_input):
    data = served.post_embeddings(
        {"model": model, "input": texts, "encoding_format": "base64",
         "long_input": long_input})["data"]
    return np.stack([np.frombuffer(base64.b64decode(d["embedding"]), "<f4")
                     for d in sorted(data, key=lambda d: d["index"])])


def check(served, name, path, sentences, report):
    info = served.models()[name]
    policy = Policy(path, info.max_input_tokens)
    texts = long_texts(sentences)
    for overlap, aggregation in ((0, "mean"), (32, "mean"), (16, "max")):
        want, counts = zip(*[policy.embed(t, overlap, aggregation)
                             for t in texts])
        response = served.client.embed_response(
            texts, model=name, chunk=True, chunk_overlap=overlap,
            chunk_aggregation=aggregation)
        from encoder_client import tensor_to_numpy
        got = np.stack([tensor_to_numpy(r.pooled) for r in response.results])
        label = f"chunk {aggregation} overlap {overlap}"
        report.add(name, label + " (grpc)", _max_abs(got, np.stack(want)),
                   TOL, len(texts))
        got_counts = [r.chunks for r in response.results]
        if list(got_counts) != list(counts):
            report.fail(f"{name}: {label}: windows {got_counts}, the policy "
                        f"gives {list(counts)}")
        http = _http(served, name, texts,
                     {"policy": "chunk", "overlap_tokens": overlap,
                      "aggregation": aggregation})
        report.add(name, label + " (http)", _max_abs(http, np.stack(want)),
                   TOL, len(texts))

    check_windows(served, name, policy, sentences, texts, report)

    # Retrieval: the fact sits past the first window of its document.
    opening = " ".join(sentences[j % len(sentences)] for j in range(24))
    documents = [opening + " " + fact for fact, _ in FACTS]
    queries = [q for _, q in FACTS]
    q = served.client.embed(queries, model=name)
    found = {}
    for label, kwargs in (("truncate", {"truncate": True}),
                          ("chunk mean", {"chunk": True}),
                          ("chunk max", {"chunk": True,
                                         "chunk_aggregation": "max"})):
        d = served.client.embed(documents, model=name, **kwargs)
        best = np.argmax(q @ d.T, axis=1)
        found[label] = int(np.sum(best == np.arange(len(FACTS))))
    print(f"{name}: retrieval past the first window, top-1 of "
          f"{len(FACTS)}: {found}", flush=True)
    for label in ("chunk mean", "chunk max"):
        report.add(name, f"retrieval misses ({label})",
                   len(FACTS) - found[label], 1, len(FACTS))
    if found["truncate"] > 3:
        report.fail(f"{name}: truncated documents found {found['truncate']} "
                    f"of {len(FACTS)}: the facts are not past the window")


def _compare_chunks(report, name, label, got, want):
    """got: the client's embed_chunks rows of one input; want: the
    reference's (vector, tokens, chars)."""
    spans_got = [(t, c) for _, t, c in got]
    spans_want = [(tuple(t), tuple(c)) for _, t, c in want]
    if spans_got != spans_want:
        report.fail(f"{name}: {label}: spans {spans_got[:3]}..., the "
                    f"reference gives {spans_want[:3]}...")
        return 0.0
    return _max_abs(np.stack([v for v, _, _ in got]),
                    np.stack([v for v, _, _ in want]))


def check_windows(served, name, policy, sentences, long_ones, report):
    """Late chunking and every window's vector, against transformers."""
    import grpc
    from encoder_client import tensor_to_numpy
    # Texts within the model's length, late-chunked in small windows.
    short = [" ".join(sentences[(k + j) % len(sentences)] for j in range(6))
             for k in range(4)]
    for chunk_tokens, overlap in ((32, 0), (48, 8)):
        want = [policy.late(t, chunk_tokens, overlap) for t in short]
        response = served.client.embed_response(
            short, model=name, late_chunk=True, chunk_tokens=chunk_tokens,
            chunk_overlap=overlap, return_chunks=True)
        got = np.stack([tensor_to_numpy(r.pooled) for r in response.results])
        label = f"late chunk {chunk_tokens} overlap {overlap}"
        report.add(name, label, _max_abs(got, np.stack([w[0] for w in want])),
                   TOL, len(short))
        worst = 0.0
        rows = served.client.embed_chunks(
            short, model=name, late_chunk=True, chunk_tokens=chunk_tokens,
            chunk_overlap=overlap)
        for g, w in zip(rows, want):
            worst = max(worst, _compare_chunks(report, name, label, g, w[1]))
        report.add(name, label + ", every window", worst, TOL,
                   sum(len(w[1]) for w in want))
        http = served.post_embeddings(
            {"model": name, "input": short, "long_input": {
                "policy": "late_chunk", "chunk_tokens": chunk_tokens,
                "overlap_tokens": overlap, "return_chunks": True}})["data"]
        http_spans = [[(tuple(c["tokens"]), tuple(c["chars"]))
                       for c in d["chunks"]] for d in http]
        want_spans = [[(t, c) for _, t, c in w[1]] for w in want]
        if http_spans != want_spans:
            report.fail(f"{name}: {label} (http): spans differ")
        report.add(name, label + " (http)",
                   _max_abs(np.stack([d["embedding"] for d in http]),
                            np.stack([w[0] for w in want])), TOL, len(short))
    # Every window of the chunk policy on long texts.
    rows = served.client.embed_chunks(long_ones[:3], model=name,
                                      chunk_overlap=16)
    worst = 0.0
    for text, got in zip(long_ones[:3], rows):
        worst = max(worst, _compare_chunks(report, name, "chunk windows", got,
                                           policy.chunk_spans(text, 16)))
    report.add(name, "chunk overlap 16, every window", worst, TOL,
               sum(len(r) for r in rows))
    # Past the model's length, as far as its learned table reaches (512
    # positions for a 256-token model), late chunking runs the text whole.
    table = policy.model.config.max_position_embeddings
    text, n = "", 0
    for k in range(4 * len(sentences)):
        if n > (policy.max_length + table) // 2:
            break
        text = (text + " " + sentences[k % len(sentences)]).strip()
        n = len(policy.tok(text)["input_ids"])
    if policy.max_length < n <= table:
        agg, chunks = policy.late(text, 64, 0)
        rows = served.client.embed_chunks([text], model=name,
                                          late_chunk=True, chunk_tokens=64)
        report.add(name, f"late chunk 64 of {n} tokens, every window",
                   _compare_chunks(report, name, "late past the length",
                                   rows[0], chunks), TOL, len(chunks))
    else:
        report.fail(f"{name}: the text past the length has {n} tokens, "
                    f"not between {policy.max_length} and {table}")
    # Beyond the table: refused, naming the way out.
    try:
        served.client.embed_response(long_ones[-1:], model=name,
                                     late_chunk=True, chunk_tokens=64)
        report.fail(f"{name}: a late-chunked text past the learned table "
                    "was accepted")
    except grpc.RpcError as e:
        if (e.code() != grpc.StatusCode.INVALID_ARGUMENT
                or "chunk it instead" not in e.details()):
            report.fail(f"{name}: late chunk past the table: {e.code()} "
                        f"{e.details()}")
