#!/usr/bin/env python3
"""The older generation of the libraries: every family model saved by
transformers 4.x and wrapped by sentence-transformers 3.x, served, against
that generation's own encode.

Most checkpoints on the Hub were saved by these releases: transformers 4.x
writes config.json and tokenizer_config.json in its own spellings (rotary
bases as rope_theta, ModernBERT's global_rope_theta / local_rope_theta,
torch_dtype), and sentence-transformers 3.x writes its module files with
the pooling_mode_* booleans, Dense's activation as a torch class path,
sentence_bert_config.json's max_seq_length and do_lower_case, and its
prompts in config_sentence_transformers.json. conformance_test.py checks
the same families as the current releases save them.

Runs in .venv-transformers4 (scripts/python_env.sh: transformers 4.57.6,
sentence-transformers 3.4.1, tokenizers 0.22.2, huggingface_hub 0.36.2
installed there; torch, scipy and scikit-learn come from .venv through a
.pth file, after the venv's own packages, so that the older libraries
shadow the newer ones).

Per family model of family_models.py, built, trained (its tokenizer) and
saved by this generation: a sentence-transformers 3.x wrapper made with its
own classes (Transformer with max_seq_length and do_lower_case, Pooling in
every mode, Dense with a torch activation, Normalize, prompts), its module
files saved beside the weights transformers saved. Then:
- keys: encoder-config-keys check on each saved directory finds every key
  read or of no effect (none unknown, none refused);
and against one encoder-server hosting them all:
- token ids: /tokenize (TEI's route) against the saved tokenizer loaded by
  this generation's AutoTokenizer, with special tokens;
- pooled: /v1/embeddings (base64 floats, truncation on) against
  SentenceTransformer(dir).encode, max |a - b| / max(1, max |reference|)
  <= 1e-5 (max |a - b| wherever the reference stays within 1; the sums of
  mean_sqrt_len_tokens pooling reach 16); with each of the model's prompts
  where it has them;
- Marian (not a sentence-transformers backbone): the served vector against
  the mean of transformers' encoder states over the tokens;
- CrossEncoders that sentence-transformers 3 saved from the BERT and
  RoBERTa family models (its default Sigmoid, and Identity as
  config.json's sbert_ce_default_activation_function): TEI's /rerank against
  CrossEncoder.predict within 1e-5, on pairs with edge whitespace.

sentence-transformers up to 5.3 stripped each text's leading and trailing
whitespace before tokenizing (5.4 on do not): the server runs with
--strip-text, which conformance_test.py's server, against 6.x, does not.

Usage: older_generation.py --binary build/encoder-server [--work DIR]
       [--only NAME ...]
"""
import argparse
import base64
import inspect
import json
import pathlib
import shutil
import sys
import tempfile
import time
import urllib.request

import numpy as np
import torch
import transformers

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT / "tests" / "integration"))

from compare import scaled  # noqa: E402
import corpus  # noqa: E402
import family_models  # noqa: E402
from server_process import ServerProcess  # noqa: E402

POOLED_TOL = 1e-5
CHUNK = 32
MAX_TOKENS = 250  # texts checked: those within this many tokens

# The sentence-transformers 3.x wrapper of each family model: pooling mode
# (every one sentence-transformers 3 has, each on some family), Dense with
# its activation, Normalize, max_seq_length (short ones truncate most of
# the corpus), do_lower_case (on case-sensitive tokenizers), prompts.
WRAPPERS = {
    "tf-bert": dict(pooling="cls", dense="Tanh", normalize=True),
    "tf-bert-mlm-f16": dict(pooling="mean"),
    "tf-roberta": dict(pooling="max", lower=True),
    "tf-roberta-mlm-bin": dict(pooling="mean_sqrt_len_tokens"),
    "tf-xlm-roberta-sharded": dict(pooling="weightedmean",
                                   max_seq_length=48),
    "tf-camembert": dict(pooling="mean", normalize=True, lower=True),
    "tf-mpnet-mlm": dict(pooling="mean", dense="GELU"),
    "tf-distilbert": dict(pooling="cls", max_seq_length=40),
    "tf-electra-disc": dict(pooling="max", dense="Identity"),
    "tf-roformer": dict(pooling="mean"),
    "tf-modernbert-bf16": dict(pooling="mean", max_seq_length=64),
    "tf-modernbert-scaled": dict(pooling="mean"),
    # sentence-t5's layout: mean, a bias-free projection, normalize.
    "tf-t5-gated": dict(pooling="mean", dense="Identity", dense_bias=False,
                        normalize=True),
    "tf-t5-tied": dict(pooling="mean_sqrt_len_tokens"),
    "tf-deberta-v3": dict(pooling="mean"),
    "tf-deberta-v2-abs-mlm": dict(pooling="cls"),
    "tf-qwen2": dict(pooling="lasttoken"),
    "tf-qwen3": dict(pooling="lasttoken", normalize=True,
                     prompts=family_models.QWEN_PROMPTS),
    "tf-qwen3-lm-bf16": dict(pooling="lasttoken", normalize=True),
    "tf-qwen2-sliding": dict(pooling="lasttoken"),
    "tf-llama-llama3": dict(pooling="lasttoken", normalize=True),
    "tf-mistral-sliding-yarn": dict(pooling="lasttoken", normalize=True),
}
ST_FILES = ("modules.json", "sentence_bert_config.json",
            "config_sentence_transformers.json")


def wrap(path, spec, seed):
    """Saves a sentence-transformers 3.x wrapper's module files into the
    family model's directory `path` (its weights stay as transformers
    saved them)."""
    from sentence_transformers import SentenceTransformer, models
    for name in ST_FILES:  # family_models' own, written by hand
        (path / name).unlink(missing_ok=True)
    for sub in path.glob("[0-9]_*"):
        shutil.rmtree(sub)
    input_names(path)
    transformer = models.Transformer(
        str(path), max_seq_length=spec.get("max_seq_length", 256),
        do_lower_case=spec.get("lower", False),
        model_args={"torch_dtype": torch.float32})
    dim = transformer.get_word_embedding_dimension()
    modules = [transformer,
               models.Pooling(dim, pooling_mode=spec["pooling"])]
    if "dense" in spec:
        torch.manual_seed(seed)
        dense = models.Dense(
            dim, dim - 4, bias=spec.get("dense_bias", True),
            activation_function=getattr(torch.nn, spec["dense"])())
        with torch.no_grad():
            dense.linear.weight.mul_(4.0)
        modules.append(dense)
    if spec.get("normalize"):
        modules.append(models.Normalize())
    st = SentenceTransformer(modules=modules, device="cpu",
                             prompts=spec.get("prompts"))
    with tempfile.TemporaryDirectory() as saved:
        st.save(saved)
        saved = pathlib.Path(saved)
        for name in ST_FILES:
            if (saved / name).is_file():
                shutil.copy(saved / name, path / name)
        for sub in saved.glob("[0-9]_*"):
            shutil.copytree(sub, path / sub.name)


def input_names(path):
    """The tokenizer's model_input_names as the family's own tokenizer
    class has them in transformers 4 (whose generic fast tokenizer also
    returns token_type_ids, which sentence-transformers 3 passes on):
    token_type_ids only where the model's forward takes them."""
    config = transformers.AutoConfig.from_pretrained(path)
    model_cls = transformers.AutoModel._model_mapping[type(config)]
    takes = "token_type_ids" in inspect.signature(model_cls.forward).parameters
    file = path / "tokenizer_config.json"
    tok_config = json.loads(file.read_text())
    tok_config["model_input_names"] = (
        ["input_ids", "token_type_ids", "attention_mask"] if takes
        else ["input_ids", "attention_mask"])
    file.write_text(json.dumps(tok_config, indent=2))


# CrossEncoders saved by sentence-transformers 3 from family models: the
# default activation (Sigmoid, not written), and Identity as
# sbert_ce_default_activation_function in config.json.
CROSS_ENCODERS = {
    "ce3-bert": ("tf-bert", None),
    "ce3-roberta": ("tf-roberta", "Identity"),
}


def cross_encoder(base, path, activation, seed):
    """A one-label CrossEncoder on the family model at `base`, saved by
    sentence-transformers 3 into `path`."""
    from sentence_transformers import CrossEncoder
    torch.manual_seed(seed)
    ce = CrossEncoder(str(base), num_labels=1, device="cpu",
                      automodel_args={"torch_dtype": torch.float32})
    if activation:
        # 3.4.1 keeps a given activation on a config of its own that save
        # does not write; the key in the model's config is what earlier
        # releases saved (cross-encoder/ms-marco-* carry it) and what 3.4.1
        # reads back.
        cls = getattr(torch.nn, activation)
        ce.model.config.sbert_ce_default_activation_function = \
            f"{cls.__module__}.{cls.__name__}"
    with torch.no_grad():  # a classifier that separates the pairs
        for p in ce.model.classifier.parameters():
            p.normal_(0.0, 0.5)
    ce.save(str(path))


# Family models this generation cannot be the reference for: transformers
# 4.57's AutoModel (Gemma3TextModel) does not map the "model." prefix of a
# Gemma3ForCausalLM save and starts every weight at random (5.x maps it;
# conformance_test.py checks the model there).
NO_REFERENCE = {"tf-gemma3-causal-linear"}


def build(work, only):
    """[(name, family, path)], each family model saved by this generation,
    wrapped where it is a sentence-transformers backbone, and the
    CrossEncoders ("cross-encoder" as their family)."""
    built = [b for b in family_models.build(work, only or None)
             if b[0] not in NO_REFERENCE]
    for i, (name, family, path) in enumerate(built):
        if name in WRAPPERS:
            wrap(path, WRAPPERS[name], 2000 + i)
    bases = {name: path for name, _, path in built}
    for i, (name, (base, activation)) in enumerate(CROSS_ENCODERS.items()):
        if base in bases and (not only or name in only or base in only):
            path = pathlib.Path(work) / name
            # The family model as transformers saved it, before the
            # wrapper's module files: a plain backbone.
            cross_encoder(bases[base], path, activation, 3000 + i)
            built.append((name, "cross-encoder", path))
    return built


class Served:
    """One encoder-server with every model, from a repository file.
    sentence-transformers 3 strips every text (up to 5.3): --strip-text;
    Marian, checked against transformers alone, keeps its texts whole
    through its entry's strip_text false."""

    def __init__(self, binary, entries, work):
        pathlib.Path(work).mkdir(parents=True, exist_ok=True)
        repository = pathlib.Path(work) / "models.json"
        repository.write_text(json.dumps({"models": [
            {"name": name, "path": str(path),
             **({"strip_text": False} if family == "marian" else {})}
            for name, family, path in entries]}))
        args = [f"--models={repository}", "--http-listen=127.0.0.1:0",
                "--strip-text"]
        self.process = ServerProcess(binary, str(work), args)
        self.process.wait_ready(600)
        with open(self.process.ready_file) as f:
            self.http_port = json.load(f)["http_port"]

    def post(self, route, body):
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.http_port}{route}",
            json.dumps(body).encode(), {"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=600) as response:
            return json.load(response)

    def embed(self, model, texts, prompt_name=None):
        out = []
        for i in range(0, len(texts), CHUNK):
            body = {"model": model, "input": texts[i:i + CHUNK],
                    "encoding_format": "base64", "truncate": True}
            if prompt_name:
                body["prompt_name"] = prompt_name
            data = self.post("/v1/embeddings", body)["data"]
            out += [np.frombuffer(base64.b64decode(d["embedding"]), "<f4")
                    for d in sorted(data, key=lambda d: d["index"])]
        return np.stack(out)

    def tokenize(self, model, texts):
        out = self.post("/tokenize", {"model": model, "inputs": texts,
                                      "add_special_tokens": True})
        return [[t["id"] for t in tokens] for tokens in out]


@torch.no_grad()
def marian_mean(path, texts):
    """Mean of MarianMTModel's encoder states over each text's tokens."""
    tok = transformers.AutoTokenizer.from_pretrained(path)
    encoder = transformers.MarianMTModel.from_pretrained(
        path, torch_dtype=torch.float32,
        attn_implementation="eager").get_encoder().eval()
    out = []
    for text in texts:
        ids = tok(text, return_tensors="pt")["input_ids"]
        out.append(encoder(input_ids=ids).last_hidden_state[0].mean(0))
    return torch.stack(out).numpy()


def classify_keys(tool, name, path, rows, failures):
    """encoder-config-keys check on the saved directory: every key this
    generation wrote is read or of no effect (none unknown, none
    refused)."""
    import subprocess
    out = subprocess.run([str(tool), "check", str(path)], text=True,
                         capture_output=True, timeout=60)
    try:
        files = json.loads(out.stdout)
    except json.JSONDecodeError:
        failures.append(f"{name}: encoder-config-keys check exited "
                        f"{out.returncode}: {out.stderr.strip()}")
        return
    bad = [f"{file}: {kind} {key}" for file, keys in sorted(files.items())
           for kind in ("unread", "refused") for key in keys.get(kind, [])]
    rows.append((name, "keys unread or refused", len(bad), 0, len(files)))
    if bad:
        failures.append(f"{name}: " + "; ".join(bad))


def check_cross_encoder(name, path, served, rows, failures):
    """TEI's /rerank (scores after the model's activation) against
    CrossEncoder.predict, on queries and documents some of which carry
    edge whitespace (which sentence-transformers 3 strips)."""
    from sentence_transformers import CrossEncoder
    ce = CrossEncoder(str(path), device="cpu",
                      automodel_args={"torch_dtype": torch.float32})
    config = json.loads((path / "config.json").read_text())
    want_act = config.get("sbert_ce_default_activation_function",
                          "torch.nn.modules.activation.Sigmoid")
    got_act = type(ce.default_activation_function)
    if f"{got_act.__module__}.{got_act.__name__}" != want_act:
        failures.append(f"{name}: CrossEncoder's activation {got_act}, the "
                        f"file says {want_act}")
    short = [t for t in corpus.SENTENCES if len(t) < 80]
    queries = short[:3] + [" " + short[3] + "\n"]
    documents = short[4:16] + ["  " + t + " " for t in short[16:20]]
    worst = 0.0
    for q in queries:
        want = ce.predict([(q, d) for d in documents],
                          show_progress_bar=False)
        got = np.zeros(len(documents))
        for r in served.post("/rerank", {"model": name, "query": q,
                                         "texts": documents}):
            got[r["index"]] = r["score"]
        worst = max(worst, float(np.abs(got - want).max()))
    what = "rerank vs CrossEncoder.predict"
    rows.append((name, what, worst, POOLED_TOL, len(queries) * len(documents)))
    if not worst <= POOLED_TOL:
        failures.append(f"{name}: {what} {worst:.3g} > {POOLED_TOL:g}")


def check(name, family, path, served, rows, failures):
    from sentence_transformers import SentenceTransformer
    if family == "cross-encoder":
        check_cross_encoder(name, path, served, rows, failures)
        return
    tok = transformers.AutoTokenizer.from_pretrained(path)
    texts = [t for t in corpus.NONEMPTY
             if len(tok(t)["input_ids"]) <= MAX_TOKENS]
    st = None
    if family != "marian":
        pickled = (path / "pytorch_model.bin").is_file()
        st = SentenceTransformer(
            str(path), device="cpu",
            model_kwargs={"torch_dtype": torch.float32,
                          **({"use_safetensors": False} if pickled else {})})

    def add(what, worst, tol, n):
        rows.append((name, what, worst, tol, n))
        if not worst <= tol:
            failures.append(f"{name}: {what} {worst:.3g} > {tol:g}")

    # sentence-transformers 3's preprocessing: strip, then do_lower_case
    # (Marian's texts stay whole).
    def prepared(t):
        if st is None:
            return t
        return t.strip().lower() if st[0].do_lower_case else t.strip()
    want = [tok(prepared(t))["input_ids"] for t in texts]
    got = served.tokenize(name, texts)
    add("token ids", sum(g != w for g, w in zip(got, want)), 0, len(texts))
    if family == "marian":
        add("pooled vs transformers encoder mean",
            scaled(served.embed(name, texts), marian_mean(path, texts)),
            POOLED_TOL, len(texts))
        return
    # dynamic and longrope: transformers takes the padded batch's length,
    # the server each text's; the reference runs each text alone.
    config = json.loads((path / "config.json").read_text())
    scaling = config.get("rope_scaling") or {}
    batch = 1 if scaling.get("rope_type", scaling.get("type")) in (
        "dynamic", "longrope") else CHUNK
    want = st.encode(texts, batch_size=batch, convert_to_numpy=True,
                     show_progress_bar=False)
    add("pooled", scaled(served.embed(name, texts), want), POOLED_TOL,
        len(texts))
    for prompt_name in st.prompts:
        want = st.encode(texts, batch_size=batch, prompt_name=prompt_name,
                         convert_to_numpy=True, show_progress_bar=False)
        add(f"pooled, prompt {prompt_name!r}",
            scaled(served.embed(name, texts, prompt_name), want),
            POOLED_TOL, len(texts))


def main():
    import sentence_transformers
    import tokenizers
    transformers.logging.set_verbosity_error()
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary", required=True)
    parser.add_argument("--tool", help="encoder-config-keys (default: "
                        "beside --binary)")
    parser.add_argument("--work", help="keep models and logs here")
    parser.add_argument("--only", nargs="*", default=[])
    args = parser.parse_args()
    versions = (f"transformers {transformers.__version__}, "
                f"sentence-transformers {sentence_transformers.__version__}, "
                f"tokenizers {tokenizers.__version__}, torch "
                f"{torch.__version__}")
    print(f"older generation: {versions}", flush=True)
    if int(transformers.__version__.split(".")[0]) >= 5 or \
            int(sentence_transformers.__version__.split(".")[0]) >= 4:
        sys.exit(f"not the older generation: {versions}")
    temp = None
    if args.work:
        work = pathlib.Path(args.work)
    else:
        temp = tempfile.TemporaryDirectory(prefix="older-generation-")
        work = pathlib.Path(temp.name)
    t0 = time.monotonic()
    entries = build(work / "models", args.only)
    if not entries:
        sys.exit("no models selected")
    print(f"built {len(entries)} models in {time.monotonic() - t0:.1f} s",
          flush=True)
    served = Served(args.binary, entries, work / "server")
    rows, failures = [], []
    try:
        tool = pathlib.Path(args.tool or pathlib.Path(args.binary).parent /
                            "encoder-config-keys")
        for name, family, path in entries:
            try:
                classify_keys(tool, name, path, rows, failures)
                check(name, family, path, served, rows, failures)
            except Exception as e:  # noqa: BLE001 - reported, then failed
                failures.append(f"{name}: {type(e).__name__}: {e}")
    finally:
        code = served.process.stop()
    if code:
        failures.append(f"server exited with {code}")
    print(f"{'model':26} {'check':36} {'worst':>10} {'tol':>8} {'n':>5}")
    for name, what, worst, tol, n in rows:
        print(f"{name:26} {what:36} {worst:10.3g} {tol:8.0e} {n:5}")
    print(f"checked in {time.monotonic() - t0:.1f} s")
    if failures:
        print("\n".join(["FAILED:", *failures]))
        if not args.work:
            print(f"server log:\n{served.process.log_tail()}")
        sys.exit(1)
    print("ok")


if __name__ == "__main__":
    main()
