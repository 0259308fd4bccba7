#!/usr/bin/env python3
"""BGE-M3's three outputs: one call against three, and against FlagEmbedding.

Builds an XLM-RoBERTa shaped as BAAI/bge-m3's base size (12 layers, width
768, 12 heads, feed-forward 3072, vocabulary 250002, about 278M
parameters) with transformers (random weights, seeded), its
sentence-transformers CLS pooling and Normalize, and FlagEmbedding's two
heads (colbert_linear.pt 768 x 768, sparse_linear.pt 1 x 768), all
float32. Inputs are texts of 128 tokens (with the special tokens) from a
small tokenizer trained on the test corpus (the sparse vectors are still
250002 wide).

Measured, each at 1 caller (sequential calls of one text: sequences/s
and p50 latency) and 32 callers (one call each, at once; best of 3
rounds):
  - one Embed call returning the dense vector, the sparse vector and the
    ColBERT vectors (return_sparse, project_token_embeddings);
  - the same three outputs by three calls (Embed, EmbedSparse, Embed
    with projected tokens), as a server with one output per route needs;
  - FlagEmbedding's BGEM3FlagModel.encode in this process (float32, 2
    threads) with all three outputs, at batch 1 and batch 32 (the
    baseline of the ratios).
Prints `lscpu` first. Not part of ctest (minutes); run in the project
venv:

  .venv/bin/python tests/bench/bge_m3_bench.py --binary build/encoder-server
"""
import argparse
import concurrent.futures
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

import torch

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "integration"))
sys.path.insert(0, str(ROOT / "tests" / "conformance"))
sys.path.insert(0, str(ROOT / "client" / "python"))
from server_process import ServerProcess  # noqa: E402

SEQ = 128
THREADS = 2


def lscpu():
    out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    return "\n".join(l for l in out.splitlines()
                     if l.startswith(("Model name", "Flags", "CPU(s):")))


def build(path):
    """The model directory; returns the tokenizer."""
    import transformers
    from sentence_transformers import SentenceTransformer, models

    import family_models
    tok = family_models.tokenizer("bpe")
    config = transformers.XLMRobertaConfig(
        vocab_size=250002, hidden_size=768, num_hidden_layers=12,
        num_attention_heads=12, intermediate_size=3072,
        max_position_embeddings=514, type_vocab_size=1, pad_token_id=1,
        bos_token_id=0, eos_token_id=2)
    torch.manual_seed(0)
    raw = path.parent / (path.name + "-hf")
    transformers.XLMRobertaModel(config, add_pooling_layer=False).eval() \
        .save_pretrained(raw, safe_serialization=True)
    tok.save_pretrained(raw)
    transformer = models.Transformer(str(raw), max_seq_length=512)
    SentenceTransformer(modules=[transformer, models.Pooling(768, "cls"),
                                 models.Normalize()],
                        device="cpu").save(str(path))
    torch.save(torch.nn.Linear(768, 768).state_dict(),
               path / "colbert_linear.pt")
    torch.save(torch.nn.Linear(768, 1).state_dict(),
               path / "sparse_linear.pt")
    return tok


def texts_of(tok, count):
    """`count` texts of about SEQ tokens each (special tokens included):
    windows of the corpus's token stream, decoded."""
    import corpus
    ids = tok(" ".join(corpus.TEXTS), add_special_tokens=False)["input_ids"]
    step = max(1, (len(ids) - SEQ) // count)
    return [tok.decode(ids[k * step:k * step + SEQ - 2])
            for k in range(count)]


def timed(callers, texts, one):
    """`one(text)` over `texts` on `callers` threads: (sequences/s,
    latencies in ms)."""
    def run(text):
        t = time.monotonic()
        one(text)
        return (time.monotonic() - t) * 1e3
    t0 = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(callers) as pool:
        lat = list(pool.map(run, texts))
    return len(texts) / (time.monotonic() - t0), lat


def served(binary, path, texts, work, single_calls):
    from encoder_client import EncoderClient
    os.makedirs(work, exist_ok=True)
    server = ServerProcess(binary, work, [
        f"--model-dir={path}", f"--intra-op-threads={THREADS}",
        "--max-queue-delay=2ms"])
    server.wait_ready(900)
    name = path.name
    rows = {}
    try:
        client = EncoderClient(f"127.0.0.1:{server.port}", timeout=900)

        def together(text):
            r = client.embed_response([text], model=name, tokens=True,
                                      project_tokens=True, sparse=True)
            assert len(r.results[0].sparse.indices) > 0

        def apart(text):
            client.embed_response([text], model=name)
            client.embed_sparse([text], model=name)
            client.embed_response([text], model=name, tokens=True,
                                  project_tokens=True)

        for label, one in (("one call", together), ("three calls", apart)):
            one(texts[0])  # warm-up
            sps1, lat1 = timed(1, texts[:single_calls], one)
            best = max(timed(32, texts[:32], one)[0] for _ in range(3))
            rows[label] = (sps1, statistics.median(lat1), best)
        client.close()
    finally:
        server.stop()
    return rows


def flag_embedding(path, texts, single_calls):
    from FlagEmbedding import BGEM3FlagModel
    torch.set_num_threads(THREADS)
    model = BGEM3FlagModel(str(path), use_fp16=False, devices="cpu")
    kw = dict(return_dense=True, return_sparse=True, return_colbert_vecs=True,
              max_length=512)
    model.encode(texts[:1], batch_size=1, **kw)  # warm-up
    lat = []
    t0 = time.monotonic()
    for text in texts[:single_calls]:
        t = time.monotonic()
        model.encode([text], batch_size=1, **kw)
        lat.append((time.monotonic() - t) * 1e3)
    sps1 = single_calls / (time.monotonic() - t0)
    best = 0.0
    for _ in range(3):
        t0 = time.monotonic()
        model.encode(texts[:32], batch_size=32, **kw)
        best = max(best, 32 / (time.monotonic() - t0))
    return sps1, statistics.median(lat), best


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary", required=True)
    parser.add_argument("--single-calls", type=int, default=16)
    args = parser.parse_args()
    print(lscpu(), flush=True)
    with tempfile.TemporaryDirectory(prefix="bge-m3-bench-") as tmp:
        path = pathlib.Path(tmp) / "bge-m3-base"
        tok = build(path)
        texts = texts_of(tok, 32)
        lengths = [len(tok(t)["input_ids"]) for t in texts]
        print(f"tokens per text: {min(lengths)}-{max(lengths)}", flush=True)
        rows = served(args.binary, path, texts, pathlib.Path(tmp) / "server",
                      args.single_calls)
        rows["FlagEmbedding"] = flag_embedding(path, texts,
                                               args.single_calls)
    base1, _, base32 = rows["FlagEmbedding"]
    print(f"\nabout {SEQ}-token texts, float32, {THREADS} threads; dense + sparse "
          "+ ColBERT per text")
    print(f"{'':<16}{'1 caller seq/s':>16}{'p50 ms':>10}{'ratio':>8}"
          f"{'32 callers seq/s':>18}{'ratio':>8}")
    for label, (sps1, p50, sps32) in rows.items():
        print(f"{label:<16}{sps1:>16.2f}{p50:>10.1f}{sps1 / base1:>8.2f}"
              f"{sps32:>18.2f}{sps32 / base32:>8.2f}")


if __name__ == "__main__":
    main()
