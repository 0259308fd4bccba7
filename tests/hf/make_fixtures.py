#!/usr/bin/env python3
"""Writes tiny Hugging Face checkpoint directories, one per fixture.

Each directory has a config.json with the key set of a real checkpoint's
config, random weights (deterministic seeds) under the real tensor names in
model.safetensors (or shards + model.safetensors.index.json), and, where the
fixture says, sentence-transformers files (modules.json, 1_Pooling,
2_Dense, Normalize, sentence_bert_config.json).

Usage: make_fixtures.py --out DIR [--family NAME ...]
NAME is a fixture name (bert-mlm, bge, ...) or a family tag (bert, roberta,
xlm-roberta, roformer, modernbert, jinabert, t5, marian); repeatable or
comma-separated. Prints one line per fixture directory written.
"""
import argparse
import collections
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fixture_configs as configs  # noqa: E402
import fixture_weights as weights  # noqa: E402
import safetensors_io  # noqa: E402

# pooling: the sentence-transformers pooling mode, or None for no
# sentence-transformers files (the server's default: mean, no normalize).
# dense: (out_features, bias, activation class) of 2_Dense.
Fixture = collections.namedtuple(
    "Fixture", "name family config build seed dtype shards pooling dense "
               "normalize")


def _fx(name, family, config, build, seed, dtype=torch.float32, shards=1,
        pooling=None, dense=None, normalize=False):
    return Fixture(name, family, config, build, seed, dtype, shards, pooling,
                   dense, normalize)


FIXTURES = [
    # bert-base-uncased: `bert.` prefix, LayerNorm gamma/beta names, MLM +
    # NSP heads and pooler; sharded.
    _fx("bert-mlm", "bert", configs.bert_base_uncased,
        lambda c, r: weights.bert_like(c, r, "bert.", mlm_head="bert",
                                       gamma_beta=True), 11,
        shards=2),
    # bge-small-en-v1.5: no prefix, pooler, CLS pooling + Normalize.
    _fx("bge", "bert", configs.bge_small,
        lambda c, r: weights.bert_like(c, r, ""), 12, pooling="cls",
        normalize=True),
    # all-MiniLM-like: no prefix, no pooler, a stored position_ids buffer,
    # mean pooling then 2_Dense with tanh.
    _fx("minilm-dense", "bert", configs.all_minilm_l6,
        lambda c, r: weights.bert_like(c, r, "", pooler=False,
                                       position_ids_buffer=True), 13,
        pooling="mean", dense=(24, True, "torch.nn.modules.activation.Tanh")),
    # roberta-base, stored in bfloat16.
    _fx("roberta", "roberta", configs.roberta_base,
        lambda c, r: weights.bert_like(c, r, "roberta.", mlm_head="roberta"),
        14, dtype=torch.bfloat16),
    # all-mpnet-base-v2's family, with its MLM head and mean pooling.
    _fx("mpnet", "mpnet", configs.all_mpnet_base_v2, weights.mpnet, 23,
        pooling="mean", normalize=True),
    _fx("xlm-roberta", "xlm-roberta", configs.xlm_roberta_base,
        lambda c, r: weights.bert_like(c, r, "roberta.", mlm_head="roberta",
                                       pooler=False), 15, pooling="max"),
    _fx("roformer", "roformer", configs.roformer_chinese_base,
        lambda c, r: weights.bert_like(c, r, "roformer.", mlm_head="bert",
                                       pooler=False, rotary_table=True), 16,
        pooling="weightedmean"),
    _fx("modernbert", "modernbert", configs.modernbert_base,
        weights.modernbert, 17),
    # jina-embeddings-v2-small-en, stored in float16.
    _fx("jinabert", "jinabert", configs.jina_v2_small,
        lambda c, r: weights.bert_like(c, r, "", pooler=False), 18,
        dtype=torch.float16, pooling="mean"),
    _fx("t5-relu", "t5", configs.t5_small, weights.t5, 19),
    _fx("t5-gated", "t5", configs.t5_v1_1_small, weights.t5, 20),
    # gtr-t5-base: T5EncoderModel, mean, 2_Dense (no bias, identity), norm.
    _fx("gtr-t5", "t5", configs.gtr_t5_base,
        lambda c, r: weights.t5(c, r, decoder=False, lm_head=False,
                                embed_tokens_copy=True), 21,
        pooling="mean", dense=(32, False,
                               "torch.nn.modules.linear.Identity"),
        normalize=True),
    _fx("marian", "marian", configs.opus_mt_en_de, weights.marian, 22,
        pooling="lasttoken"),
]

POOLING_MODES = ["cls_token", "mean_tokens", "max_tokens",
                 "mean_sqrt_len_tokens", "weightedmean_tokens", "lasttoken"]
_MODE_KEY = {"cls": "cls_token", "mean": "mean_tokens", "max": "max_tokens",
             "weightedmean": "weightedmean_tokens", "lasttoken": "lasttoken"}


def hidden_size(config):
    return config.get("hidden_size", config.get("d_model"))


def select(names):
    """Fixtures whose name or family is in names (all when names is empty);
    exits on an unknown name."""
    wanted = [n for arg in names or [] for n in arg.split(",") if n]
    known = {f.name for f in FIXTURES} | {f.family for f in FIXTURES}
    unknown = [n for n in wanted if n not in known]
    if unknown:
        sys.exit(f"unknown fixture or family {unknown}; known: "
                 f"{sorted(known)}")
    return [f for f in FIXTURES
            if not wanted or f.name in wanted or f.family in wanted]


def _write_json(path, value):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump(value, f, indent=2)
        f.write("\n")


def write_sentence_transformers(directory, fixture, config, gen):
    """modules.json, 1_Pooling/config.json, optional 2_Dense and Normalize,
    sentence_bert_config.json, config_sentence_transformers.json."""
    dim = hidden_size(config)
    modules = [{"idx": 0, "name": "0", "path": "",
                "type": "sentence_transformers.models.Transformer"},
               {"idx": 1, "name": "1", "path": "1_Pooling",
                "type": "sentence_transformers.models.Pooling"}]
    pooling = {"word_embedding_dimension": dim}
    for mode in POOLING_MODES:
        pooling[f"pooling_mode_{mode}"] = mode == _MODE_KEY[fixture.pooling]
    pooling["include_prompt"] = True
    _write_json(os.path.join(directory, "1_Pooling", "config.json"), pooling)
    if fixture.dense:
        out_dim, bias, activation = fixture.dense
        idx = len(modules)
        path = f"{idx}_Dense"
        modules.append({"idx": idx, "name": str(idx), "path": path,
                        "type": "sentence_transformers.models.Dense"})
        _write_json(os.path.join(directory, path, "config.json"),
                    {"in_features": dim, "out_features": out_dim,
                     "bias": bias, "activation_function": activation})
        tensors = {"linear.weight": gen.linear(out_dim, dim, gain=1.5)}
        if bias:
            tensors["linear.bias"] = gen.bias(out_dim)
        safetensors_io.write_file(
            os.path.join(directory, path, "model.safetensors"), tensors,
            metadata={"format": "pt"})
    if fixture.normalize:
        idx = len(modules)
        modules.append({"idx": idx, "name": str(idx),
                        "path": f"{idx}_Normalize",
                        "type": "sentence_transformers.models.Normalize"})
    _write_json(os.path.join(directory, "modules.json"), modules)
    _write_json(os.path.join(directory, "sentence_bert_config.json"),
                {"max_seq_length": 64, "do_lower_case": False})
    _write_json(os.path.join(directory, "config_sentence_transformers.json"),
                {"__version__": {"sentence_transformers": "2.2.2",
                                 "transformers": "4.28.1",
                                 "pytorch": "1.13.0+cu117"},
                 "prompts": {}, "default_prompt_name": None})


def write_fixture(root, fixture):
    """Writes one fixture directory under root; returns its path."""
    directory = os.path.join(root, fixture.name)
    os.makedirs(directory, exist_ok=True)
    config = fixture.config()
    _write_json(os.path.join(directory, "config.json"), config)
    gen = weights.Rand(fixture.seed)
    tensors = fixture.build(config, gen)
    tensors = {k: (v.to(fixture.dtype) if v.is_floating_point() else v)
               for k, v in tensors.items()}
    if fixture.shards > 1:
        safetensors_io.write_sharded(directory, tensors, fixture.shards)
    else:
        safetensors_io.write_file(os.path.join(directory, "model.safetensors"),
                                  tensors, metadata={"format": "pt"})
    if fixture.pooling:
        write_sentence_transformers(directory, fixture, config, gen)
    return directory


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="output directory")
    parser.add_argument("--family", action="append",
                        help="fixture name or family tag (repeatable)")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    for fixture in select(args.family):
        path = write_fixture(args.out, fixture)
        size = sum(os.path.getsize(os.path.join(d, f))
                   for d, _, files in os.walk(path) for f in files)
        print(f"{fixture.name:13s} family={fixture.family:11s} "
              f"{size / 1024:7.1f} KiB  {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
