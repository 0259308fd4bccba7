"""Prompts as sentence-transformers applies them, on real weights.

all-MiniLM-L6-v2 as published pools with its prompt (include_prompt true,
the default). Copies of its directory (the weights and tokenizer linked,
not copied) change two files: 1_Pooling/config.json pools without the
prompt (include_prompt false) in each of the five pooling modes, and
config_sentence_transformers.json declares two prompts. Against
sentence-transformers' encode on each copy:
- prompt_name="query" through gRPC (encoder_client) and prompt_name="passage"
  through /v1/embeddings;
- a caller's prompt= text through gRPC;
and on the original directory a prompt= text (pooled with the prompt).
The same text with and without the prompt in the pooling must differ, so
that a server ignoring include_prompt cannot pass.
"""
import base64
import json
import pathlib
import shutil

import numpy as np
import torch

MODES = {"mean": "pooling_mode_mean_tokens",
         "cls": "pooling_mode_cls_token",
         "max": "pooling_mode_max_tokens",
         "weightedmean": "pooling_mode_weightedmean_tokens",
         "lasttoken": "pooling_mode_lasttoken"}
PROMPTS = {"query": "query: ",
           "passage": "Represent this passage for retrieval: "}
OWN_PROMPT = "Find sentences about the same topic: "
TOL = 1e-5


def variants(source, root):
    """(name, path) of one copy of `source` per pooling mode, pooling
    without the prompt, with PROMPTS."""
    source = pathlib.Path(source)
    out = []
    for mode, key in MODES.items():
        target = pathlib.Path(root) / f"minilm-noprompt-{mode}"
        if target.exists():
            shutil.rmtree(target)
        target.mkdir(parents=True)
        for item in source.iterdir():
            if item.name in ("1_Pooling", "config_sentence_transformers.json"):
                continue
            (target / item.name).symlink_to(item.resolve())
        pooling = json.loads((source / "1_Pooling" / "config.json").read_text())
        for k in MODES.values():
            pooling[k] = k == key
        pooling["pooling_mode_mean_sqrt_len_tokens"] = False
        pooling["include_prompt"] = False
        (target / "1_Pooling").mkdir()
        (target / "1_Pooling" / "config.json").write_text(json.dumps(pooling))
        st_config = json.loads(
            (source / "config_sentence_transformers.json").read_text())
        st_config["prompts"] = PROMPTS
        st_config["default_prompt_name"] = None
        (target / "config_sentence_transformers.json").write_text(
            json.dumps(st_config))
        out.append((f"minilm-noprompt-{mode}", target))
    return out


def _st(path):
    from sentence_transformers import SentenceTransformer
    return SentenceTransformer(str(path), device="cpu",
                               model_kwargs={"dtype": torch.float32})


def _max_abs(a, b):
    return float(np.max(np.abs(np.asarray(a) - np.asarray(b))))


def _http(served, model, texts, **extra):
    data = served.post_embeddings(
        {"model": model, "input": texts, "encoding_format": "base64",
         "truncate": True, **extra})["data"]
    return np.stack([np.frombuffer(base64.b64decode(d["embedding"]), "<f4")
                     for d in sorted(data, key=lambda d: d["index"])])


def check(served, original, copies, texts, report, chunk=32):
    """Adds one row per (model, check) to `report`."""
    texts = [t for t in texts if t][:96]

    def grpc(model, **kwargs):
        return np.concatenate([
            served.client.embed(texts[i:i + chunk], model=model,
                                truncate=True, **kwargs)
            for i in range(0, len(texts), chunk)])

    def encode(st, **kwargs):
        return st.encode(texts, batch_size=chunk, convert_to_numpy=True,
                         show_progress_bar=False, **kwargs)

    name, path = original
    st = _st(path)
    with_prompt = encode(st, prompt=PROMPTS["query"])
    report.add(name, "prompt= (pooled with)",
               _max_abs(grpc(name, prompt=PROMPTS["query"]), with_prompt),
               TOL, len(texts))
    for name, path in copies:
        st = _st(path)
        query = encode(st, prompt_name="query")
        got = grpc(name, prompt_name="query")
        report.add(name, "prompt_name (grpc)", _max_abs(got, query), TOL,
                   len(texts))
        passage = encode(st, prompt_name="passage")
        report.add(name, "prompt_name (http)",
                   _max_abs(_http(served, name, texts,
                                  prompt_name="passage"), passage),
                   TOL, len(texts))
        own = encode(st, prompt=OWN_PROMPT)
        report.add(name, "prompt= (grpc)",
                   _max_abs(grpc(name, prompt=OWN_PROMPT), own), TOL,
                   len(texts))
        if name.endswith("-mean"):
            # Leaving the prompt out of the pooling must show: the same
            # texts pooled with the prompt differ by far more than TOL.
            gap = _max_abs(got, with_prompt)
            if gap < 1e-3:
                report.fail(f"{name}: pooled without the prompt equals "
                            f"pooled with it (max diff {gap:.2g})")
