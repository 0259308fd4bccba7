#!/usr/bin/env python3
"""Checkpoints whose only tokenizer file is a SentencePiece .model, served.

Writes two tiny checkpoints of tests/hf/make_fixtures.py (gtr-t5, a
T5EncoderModel, and xlm-roberta), adds a SentencePiece model trained here
(sentencepiece, in .venv) as spiece.model / sentencepiece.bpe.model, and a
third copy of gtr-t5 whose spiece.model is not a model. Starts encoder-server
on them and checks through gRPC:
  - ListModels: tokenizer "sentencepiece", text accepted; the broken copy
    serves token ids only, and text is INVALID_ARGUMENT naming the file;
  - Tokenize gives the ids the sentencepiece library gives with the slow
    tokenizers' rules (T5: ids + </s>; XLM-R: <s> ids + 1 </s>, unknown
    pieces <unk> 3), computed here;
  - Embed on text equals Embed on those ids (token embeddings and pooled);
  - Decode of those ids gives the text back (for texts SentencePiece
    round-trips).
The server links protobuf; loading libsentencepiece into it is the point.
Usage: spm_serving_test.py --binary PATH
"""
import argparse
import importlib.util
import io
import os
import pathlib
import sys
import tempfile

import numpy as np
import sentencepiece as spm

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT / "tests" / "hf"))
sys.path.insert(0, str(ROOT / "tests" / "integration"))
import make_fixtures  # noqa: E402
from server_process import ServerProcess  # noqa: E402

CORPUS = [
    "the quick brown fox jumps over the lazy dog",
    "tokenizers split text into words and words into pieces",
    "a transformer encodes every token with its position",
    "sentence pieces treat whitespace as a normal symbol",
]
TEXTS = ["the lazy fox", "words into pieces and positions",
         "Unknown Capitals & symbols \u00e9\u00e8 \u65e5\u672c",
         "  spaces   between  ", ""]


def train(vocab_size, **ids):
    out = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(CORPUS * 4), model_writer=out,
        model_type="unigram", vocab_size=vocab_size, hard_vocab_limit=False,
        character_coverage=1.0, minloglevel=2, **ids)
    model = out.getvalue()
    sp = spm.SentencePieceProcessor()
    sp.LoadFromSerializedProto(model)
    return model, sp


def t5_ids(sp, text):
    return [sp.piece_to_id(p) for p in sp.encode(text, out_type=str)] + [
        sp.piece_to_id("</s>")]


def xlmr_ids(sp, text):
    ids = []
    for piece in sp.encode(text, out_type=str):
        i = sp.piece_to_id(piece)
        ids.append(i + 1 if i else 3)
    return [0] + ids + [2]


def load_stubs(tmp):
    path = ROOT / "client" / "python" / "examples" / "minimal_client.py"
    spec = importlib.util.spec_from_file_location("encoder_client", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    stub_dir = os.path.join(tmp, "stubs")
    os.makedirs(stub_dir)
    return module.load_stubs(stub_dir)


def array(pb2, tensor):
    assert tensor.dtype == pb2.DTYPE_FLOAT32, f"dtype {tensor.dtype}"
    return np.frombuffer(tensor.data, dtype="<f4").reshape(list(tensor.shape))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--binary", required=True)
    args = parser.parse_args()
    import grpc
    failures = []
    with tempfile.TemporaryDirectory(prefix="spm-serving-") as tmp:
        root = os.path.join(tmp, "models")
        fixtures = {f.name: f for f in make_fixtures.select(
            ["gtr-t5", "xlm-roberta"])}
        for fixture in fixtures.values():
            make_fixtures.write_fixture(root, fixture)
        broken = os.path.join(root, "gtr-t5-broken")
        os.rename(os.path.join(root, "gtr-t5"), broken)
        make_fixtures.write_fixture(root, fixtures["gtr-t5"])
        t5_model, t5 = train(80, pad_id=0, eos_id=1, unk_id=2, bos_id=-1)
        xlmr_model, xlmr = train(100)
        with open(os.path.join(root, "gtr-t5", "spiece.model"), "wb") as f:
            f.write(t5_model)
        with open(os.path.join(root, "xlm-roberta",
                               "sentencepiece.bpe.model"), "wb") as f:
            f.write(xlmr_model)
        with open(os.path.join(broken, "spiece.model"), "wb") as f:
            f.write(b"\x0a\xffnot a sentencepiece model")
        pb2, pb2_grpc = load_stubs(tmp)
        server = ServerProcess(args.binary, extra_args=[
            f"--model-dir=t5={root}/gtr-t5",
            f"--model-dir=xlmr={root}/xlm-roberta",
            f"--model-dir=broken={broken}"])
        try:
            server.wait_ready(180)
        except RuntimeError as error:
            server.stop()
            print(f"FAIL: server did not start: {error}")
            return 1
        compared = 0
        try:
            with grpc.insecure_channel(f"127.0.0.1:{server.port}") as channel:
                stub = pb2_grpc.EncoderServiceStub(channel)
                models = {m.name: m for m in stub.ListModels(
                    pb2.ListModelsRequest(), timeout=30).models}
                for name in ("t5", "xlmr"):
                    m = models[name]
                    if m.tokenizer != "sentencepiece" or not m.accepts_text:
                        failures.append(f"{name}: tokenizer {m.tokenizer!r}, "
                                        f"accepts_text {m.accepts_text}")
                if models["broken"].accepts_text:
                    failures.append("broken: accepts text")
                try:
                    stub.Embed(pb2.EmbedRequest(
                        model="broken", inputs=[pb2.Input(text="hello")]),
                        timeout=60)
                    failures.append("broken: text was accepted")
                except grpc.RpcError as error:
                    if (error.code() != grpc.StatusCode.INVALID_ARGUMENT or
                            "not a valid SentencePiece model" not in
                            error.details()):
                        failures.append(f"broken: {error.code().name}: "
                                        f"{error.details()}")
                for name, sp, rule in (("t5", t5, t5_ids),
                                       ("xlmr", xlmr, xlmr_ids)):
                    want = [rule(sp, t) for t in TEXTS]
                    got = stub.Tokenize(pb2.TokenizeRequest(
                        model=name, texts=TEXTS), timeout=60).encodings
                    for text, w, g in zip(TEXTS, want, got):
                        if list(g.ids) != w:
                            failures.append(f"{name} {text!r}: ids "
                                            f"{list(g.ids)} != {w}")
                    # Embed refuses empty text.
                    texts = [t for t in TEXTS if t]
                    by_text = stub.Embed(pb2.EmbedRequest(
                        model=name, inputs=[pb2.Input(text=t) for t in texts],
                        return_token_embeddings=True), timeout=120).results
                    by_ids = stub.Embed(pb2.EmbedRequest(
                        model=name, inputs=[pb2.Input(
                            token_ids=pb2.TokenIds(ids=rule(sp, t)))
                            for t in texts],
                        return_token_embeddings=True), timeout=120).results
                    for text, a, b in zip(texts, by_text, by_ids):
                        for field in ("token_embeddings", "pooled"):
                            x = array(pb2, getattr(a, field))
                            y = array(pb2, getattr(b, field))
                            if x.shape != y.shape or not np.array_equal(x, y):
                                failures.append(f"{name} {text!r}: {field} "
                                                "by text != by ids")
                            compared += x.size
                    decoded = stub.Decode(pb2.DecodeRequest(
                        model=name, skip_special_tokens=True,
                        inputs=[pb2.TokenIds(ids=w) for w in want]),
                        timeout=60).texts
                    for text, w, d in zip(TEXTS, want, decoded):
                        # Unknown pieces are special tokens, skipped; the
                        # ends are stripped (T5Tokenizer's decoding).
                        expected = sp.decode([i for i in sp.encode(text)
                                              if i != sp.unk_id()]).strip()
                        if d != expected:
                            failures.append(f"{name} {text!r}: decoded "
                                            f"{d!r} != {expected!r}")
        finally:
            code = server.stop()
            if code != 0:
                failures.append(f"server exited with {code}")
                print(server.log_tail())
    for failure in failures:
        print(f"FAIL: {failure}")
    print(f"{len(TEXTS)} texts on 2 models: ids, Tokenize; {compared} "
          "embedding values by text vs by ids; Decode")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
