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
        from encoderclient import tensor_to_numpy
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
