#!/usr/bin/python3
"""Trains tiny SentencePiece Unigram models and writes their tokenizer.json.

SentencePiece itself builds the character map (precompiled_charsmap) of each
normalization rule; the tokenizer.json around it follows the Hugging Face
converter for SentencePiece Unigram checkpoints (T5, XLM-RoBERTa):
Precompiled + Replace normalizers, Metaspace, Unigram, "$A </s>".
Usage: make_spm_fixtures.py CORPUS_DIR OUT_DIR
"""
import base64
import io
import json
import os
import sys

import sentencepiece as spm
from sentencepiece import sentencepiece_model_pb2 as model_pb2

RULES = ["nmt_nfkc", "nfkc_cf"]
NORMAL, UNKNOWN, CONTROL = 1, 2, 3


def sentences(corpus_dir):
    with open(os.path.join(corpus_dir, "train.txt"), encoding="utf-8") as f:
        lines = [line.rstrip("\n") for line in f]
    for name in ("hostile.jsonl", "charsmap.jsonl"):
        with open(os.path.join(corpus_dir, name), encoding="utf-8") as f:
            lines += [json.loads(line) for line in f if line.strip()]
    return [line for line in lines if line.strip()]


def train(rule, lines):
    out = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(lines), model_writer=out, model_type="unigram",
        vocab_size=1000, hard_vocab_limit=False, character_coverage=1.0,
        normalization_rule_name=rule, max_sentence_length=1 << 16,
        minloglevel=2)
    proto = model_pb2.ModelProto()
    proto.ParseFromString(out.getvalue())
    return proto


def added(token_id, content):
    return {"id": token_id, "content": content, "single_word": False,
            "lstrip": False, "rstrip": False, "normalized": False,
            "special": True}


def tokenizer_json(proto):
    charsmap = proto.normalizer_spec.precompiled_charsmap
    if not charsmap:
        raise SystemExit("SentencePiece wrote no precompiled_charsmap")
    pieces = proto.pieces
    vocab = [[p.piece, p.score] for p in pieces]
    ids = {p.piece: i for i, p in enumerate(pieces)}
    specials = [i for i, p in enumerate(pieces) if p.type in (UNKNOWN, CONTROL)]
    eos = ids["</s>"]
    meta = {"replacement": "\u2581", "prepend_scheme": "always", "split": True}
    return {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [added(i, pieces[i].piece) for i in specials],
        "normalizer": {"type": "Sequence", "normalizers": [
            {"type": "Precompiled",
             "precompiled_charsmap": base64.b64encode(charsmap).decode()},
            {"type": "Replace", "pattern": {"Regex": " {2,}"},
             "content": " "}]},
        "pre_tokenizer": dict(type="Metaspace", **meta),
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [{"Sequence": {"id": "A", "type_id": 0}},
                       {"SpecialToken": {"id": "</s>", "type_id": 0}}],
            "pair": [{"Sequence": {"id": "A", "type_id": 0}},
                     {"SpecialToken": {"id": "</s>", "type_id": 0}},
                     {"Sequence": {"id": "B", "type_id": 0}},
                     {"SpecialToken": {"id": "</s>", "type_id": 0}}],
            "special_tokens": {"</s>": {"id": "</s>", "ids": [eos],
                                        "tokens": ["</s>"]}}},
        "decoder": dict(type="Metaspace", **meta),
        "model": {"type": "Unigram", "unk_id": proto.trainer_spec.unk_id,
                  "vocab": vocab, "byte_fallback": False},
    }


def main():
    corpus_dir, out_dir = sys.argv[1], sys.argv[2]
    os.makedirs(out_dir, exist_ok=True)
    lines = sentences(corpus_dir)
    for rule in RULES:
        proto = train(rule, lines)
        path = os.path.join(out_dir, f"spm_{rule}.json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(tokenizer_json(proto), f, ensure_ascii=False)
        print(f"spm_{rule}: {len(proto.pieces)} pieces, charsmap "
              f"{len(proto.normalizer_spec.precompiled_charsmap)} bytes")


if __name__ == "__main__":
    main()
