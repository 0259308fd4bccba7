"""Every key the libraries write or read is classified by the server.

The server classifies each key of a model directory's JSON files as read,
of no effect (with the reason) or refused unless at a listed value
(server/model/hf/config_keys.h; encoder-config-keys prints the tables).
This test walks the pinned libraries and fails on any key the tables do
not classify:

- transformers, two generations: this environment's (5.x) and, with
  --older-python, the older environment's (4.x, torch-free; its config
  classes and modeling sources are enough). For each model_type the server
  imports: every attribute of the family's config class (to_dict() of its
  defaults), every attribute its modeling_<family>.py reads from a config
  (config.X, self.config.X, getattr(config, "X")), and under the rotary
  keys the server reads as nested objects, every field of transformers'
  RopeParameters.
- sentence-transformers (this environment's release): the config_keys of
  each module type the server serves, and every key of the files that
  SentenceTransformer, CrossEncoder, SparseEncoder and MultiVectorEncoder
  save for a small model (each saved directory classified by the tool
  itself: nothing unread, nothing refused).

It also checks that the walk can fail (a planted key is reported), and that
the tool refuses by name, in a saved directory, a key at a value the server
does not serve and reports an unknown key.

Usage: config_keys_test.py --tool BUILD/encoder-config-keys
       [--older-python .venv-transformers4/bin/python] [--work DIR]
"""
import argparse
import ast
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

# model_type -> the folder of its modeling file under transformers/models.
FAMILY_DIRS = {
    "bert": "bert", "roberta": "roberta", "xlm-roberta": "xlm_roberta",
    "camembert": "camembert", "electra": "electra",
    "deberta-v2": "deberta_v2", "mpnet": "mpnet", "distilbert": "distilbert",
    "roformer": "roformer", "modernbert": "modernbert", "qwen2": "qwen2",
    "qwen3": "qwen3", "llama": "llama", "mistral": "mistral",
    "gemma3_text": "gemma3", "t5": "t5",
    "marian": "marian",
}
PLANTED = "planted_key_nobody_classified"


def _config_reads(path):
    """Attributes a modeling source reads from a config object."""
    tree = ast.parse(pathlib.Path(path).read_text())

    def is_config(node):
        return ((isinstance(node, ast.Name) and node.id == "config") or
                (isinstance(node, ast.Attribute) and node.attr == "config"))

    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and is_config(node.value):
            names.add(node.attr)
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id in ("getattr", "hasattr")
                and len(node.args) >= 2 and is_config(node.args[0])
                and isinstance(node.args[1], ast.Constant)):
            names.add(node.args[1].value)
    # Methods of the config object, not keys.
    return {n for n in names if n not in {"to_dict", "get_text_config",
                                          "to_json_string", "update",
                                          "save_pretrained"}}


def walk_transformers(nested_keys):
    """{model_type: sorted keys} for this environment's transformers;
    `nested_keys` maps model_type to the keys the server reads as objects
    (their fields are walked as "key.field")."""
    import transformers
    from transformers import AutoConfig
    root = pathlib.Path(transformers.__file__).parent
    rope_fields = []
    try:
        from transformers.modeling_rope_utils import RopeParameters
        rope_fields = list(RopeParameters.__annotations__)
    except ImportError:
        pass
    out = {}
    for model_type, folder in FAMILY_DIRS.items():
        config = AutoConfig.for_model(model_type).to_dict()
        keys = set(config)
        modeling = root / "models" / folder / f"modeling_{folder}.py"
        keys |= _config_reads(modeling)
        for key in nested_keys.get(model_type, []):
            value = config
            for part in key.split("."):
                value = value.get(part) if isinstance(value, dict) else None
            if isinstance(value, dict):
                keys |= {f"{key}.{k}" for k in value}
            # A rotary parameter object: every field transformers defines.
            if key.split(".")[-1] in ("rope_parameters", "rope_scaling",
                                      "full_attention", "sliding_attention"):
                if not (isinstance(value, dict) and
                        set(value) <= {"full_attention", "sliding_attention"}
                        and value):
                    keys |= {f"{key}.{f}" for f in rope_fields}
        out[model_type] = sorted(keys)
    return {"version": transformers.__version__, "keys": out}


def unclassified(keys, table):
    return sorted(k for k in keys if k not in table)


def check_families(tables, walk, failures):
    config_tables = tables["config.json"]
    for model_type, keys in sorted(walk["keys"].items()):
        table = config_tables.get(model_type)
        if table is None:
            failures.append(f"transformers {walk['version']}: no table for "
                            f"{model_type}")
            continue
        missing = unclassified(keys, table)
        if missing:
            failures.append(
                f"transformers {walk['version']} {model_type}: keys no table "
                f"classifies: {', '.join(missing)}")
        print(f"transformers {walk['version']} {model_type}: {len(keys)} keys, "
              f"{len(missing)} unclassified")


def nested_keys(tables):
    return {mt: sorted(k for k, r in t.items() if r.get("nested"))
            for mt, t in tables["config.json"].items()}


def run_tool(tool, *args):
    done = subprocess.run([tool, *args], capture_output=True, text=True)
    return done.returncode, done.stdout, done.stderr


def check_modules(tables, failures):
    import sentence_transformers
    from sentence_transformers.base.modules import Dense, Normalize
    from sentence_transformers.base.modules import Transformer
    from sentence_transformers.sentence_transformer.modules import (
        LayerNorm, Pooling)
    from sentence_transformers.sparse_encoder.modules import (MLMTransformer,
                                                             SpladePooling)
    version = sentence_transformers.__version__
    for what, cls in (("Pooling", Pooling), ("Dense", Dense),
                      ("LayerNorm", LayerNorm),
                      ("Normalize", Normalize), ("Transformer", Transformer),
                      ("MLMTransformer", MLMTransformer),
                      ("SpladePooling", SpladePooling)):
        table = tables["modules"]["Transformer" if what == "MLMTransformer"
                                  else what]
        missing = unclassified(cls.config_keys, table)
        if missing:
            failures.append(f"sentence-transformers {version} {what}: keys no "
                            f"table classifies: {', '.join(missing)}")
        print(f"sentence-transformers {version} {what}: "
              f"{len(cls.config_keys)} config keys, {len(missing)} "
              "unclassified")


def _tiny_bert(path, masked_lm=False, labels=0):
    """A small BERT saved by transformers with a trained WordPiece
    tokenizer (family_models)."""
    import torch
    import transformers
    import family_models
    tok = family_models.tokenizer("wordpiece")
    config = transformers.BertConfig(
        vocab_size=len(tok), hidden_size=32, num_hidden_layers=2,
        num_attention_heads=4, intermediate_size=48,
        max_position_embeddings=64)
    torch.manual_seed(7)
    if masked_lm:
        model = transformers.BertForMaskedLM(config)
    elif labels:
        config.num_labels = labels
        model = transformers.BertForSequenceClassification(config)
    else:
        model = transformers.BertModel(config)
    model.eval().save_pretrained(path, safe_serialization=True)
    tok.save_pretrained(path)
    return path


def saved_directories(work):
    """Directories the pinned sentence-transformers saves: a
    SentenceTransformer with Pooling (its 6.x keys), Dense, LayerNorm and
    Normalize and prompts; a CrossEncoder; a MultiVectorEncoder (a Dense and a Normalize
    of the tokens); a SparseEncoder (MLMTransformer, SpladePooling)."""
    from sentence_transformers import (CrossEncoder, SentenceTransformer,
                                       SparseEncoder)
    from sentence_transformers.base.modules import Dense, Normalize
    from sentence_transformers.base.modules import Transformer
    from sentence_transformers.sentence_transformer.modules import (
        LayerNorm, Pooling)
    from sentence_transformers.sparse_encoder.modules import (MLMTransformer,
                                                             SpladePooling)
    raw = _tiny_bert(work / "raw")
    t = Transformer(str(raw), max_seq_length=40)
    st = SentenceTransformer(
        modules=[t, Pooling(t.get_embedding_dimension(), pooling_mode="max"),
                 Dense(t.get_embedding_dimension(), 16), LayerNorm(16),
                 Normalize()],
        prompts={"query": "query: ", "document": ""},
        default_prompt_name="query")
    st.save(str(work / "sentence-transformer"))
    raw_ce = _tiny_bert(work / "raw-ce", labels=1)
    CrossEncoder(str(raw_ce), device="cpu").save(str(work / "cross-encoder"))
    from sentence_transformers import MultiVectorEncoder
    width = t.get_embedding_dimension()
    MultiVectorEncoder(modules=[
        Transformer(str(raw)),
        Dense(width, 16, bias=False, module_input_name="token_embeddings",
              module_output_name="token_embeddings"),
        Normalize(module_input_name="token_embeddings",
                  module_output_name="token_embeddings")],
        device="cpu").save(str(work / "multi-vector-encoder"))
    raw_mlm = _tiny_bert(work / "raw-mlm", masked_lm=True)
    m = MLMTransformer(str(raw_mlm))
    SparseEncoder(modules=[m, SpladePooling("max")]).save(
        str(work / "sparse-encoder"))
    return [raw, work / "sentence-transformer", work / "cross-encoder",
            work / "multi-vector-encoder", work / "sparse-encoder"]


def check_saved(tool, dirs, failures):
    for d in dirs:
        rc, out, err = run_tool(tool, "check", str(d))
        if rc not in (0, 1):
            failures.append(f"{d.name}: encoder-config-keys check: {err}")
            continue
        reports = json.loads(out)
        if "config.json" not in reports:
            failures.append(f"{d.name}: config.json not classified")
        for file, r in sorted(reports.items()):
            if r["unread"] or r["refused"]:
                failures.append(f"{d.name}/{file}: unread {r['unread']}, "
                                f"refused {r['refused']}")
        print(f"saved {d.name}: " + ", ".join(
            f"{f} ({len(r['read'])} read, {len(r['no_effect'])} no effect)"
            for f, r in sorted(reports.items())))


def check_refusals(tool, saved, work, failures):
    """The tool refuses a key at a value the server does not serve and
    reports an unknown key, in a saved directory."""
    cases = [
        ("config.json", "is_decoder", True, "refused"),
        ("config.json", "pruned_heads", {"0": [1]}, "refused"),
        ("sentence_bert_config.json", "transformer_task", "text-generation",
         "refused"),
        ("config.json", PLANTED, 1, "unread"),
    ]
    for file, key, value, want in cases:
        d = work / f"mutant-{key}"
        shutil.copytree(saved, d)
        path = d / file
        data = json.loads(path.read_text())
        data[key] = value
        path.write_text(json.dumps(data))
        rc, out, err = run_tool(tool, "check", str(d))
        report = json.loads(out).get(file, {}) if out else {}
        if want == "refused":
            ok = rc == 1 and any(f'"{key}"' in r
                                 for r in report.get("refused", []))
        else:
            ok = rc == 0 and key in report.get("unread", [])
        print(f"{file} {key}={json.dumps(value)}: exit {rc}, "
              f"{want if ok else 'NOT ' + want}")
        if not ok:
            failures.append(f"{file} {key}={value!r}: expected {want}, got "
                            f"exit {rc}: {out or err}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tool", required=True)
    ap.add_argument("--older-python")
    ap.add_argument("--work")
    ap.add_argument("--walk-only", action="store_true",
                    help="print this environment's transformers walk (JSON)")
    ap.add_argument("--nested", help="with --walk-only: nested keys (JSON)")
    args = ap.parse_args()
    if args.walk_only:
        print(json.dumps(walk_transformers(json.loads(args.nested))))
        return 0

    rc, out, err = run_tool(args.tool)
    if rc != 0:
        print(f"FAILED: {args.tool}: {err}")
        return 1
    tables = json.loads(out)
    failures = []

    walks = [walk_transformers(nested_keys(tables))]
    if args.older_python:
        done = subprocess.run(
            [args.older_python, __file__, "--tool", args.tool, "--walk-only",
             "--nested", json.dumps(nested_keys(tables))],
            capture_output=True, text=True)
        if done.returncode != 0:
            print(f"FAILED: the older generation's walk: {done.stderr}")
            return 1
        walks.append(json.loads(done.stdout))
        if walks[1]["version"].split(".")[0] == walks[0]["version"].split(
                ".")[0]:
            failures.append("--older-python has the same transformers "
                            f"generation ({walks[1]['version']})")
    for walk in walks:
        check_families(tables, walk, failures)

    # The walk can fail: a planted key is reported.
    planted = list(walks[0]["keys"]["bert"]) + [PLANTED]
    if unclassified(planted, tables["config.json"]["bert"]) != [PLANTED]:
        failures.append("a planted key was not reported by the walk")
    else:
        print(f"planted key: reported ({PLANTED})")

    check_modules(tables, failures)
    work = pathlib.Path(args.work or tempfile.mkdtemp(prefix="config-keys-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        dirs = saved_directories(work)
        check_saved(args.tool, dirs, failures)
        check_refusals(args.tool, dirs[1], work, failures)
    finally:
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)

    for f in failures:
        print(f"FAILED: {f}")
    if failures:
        return 1
    print("config_keys: every key classified")
    return 0


if __name__ == "__main__":
    sys.exit(main())
