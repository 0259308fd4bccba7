"""What the pinned libraries write into a saved model, read as they read it.

Every model here is built and saved by transformers or sentence-transformers
themselves (seeded random weights on family_models.py's configs and
tokenizers), then served and compared with the same library loading the
same directory:

- pooling: sentence-transformers 6.x's Pooling module in each of its modes
  (cls, max, mean, mean_sqrt_len_tokens, weightedmean, lasttoken), saved
  with its 6.x keys ("pooling_mode": "max", "embedding_dimension");
  Embed against SentenceTransformer.encode, tolerance 1e-5.
- ModernBERT rotary bases: a ModernBertConfig with global / local bases
  40000 / 5000, which transformers 5 saves as rope_parameters per layer
  type (no global_rope_theta / local_rope_theta); the token states against
  transformers' last hidden state, tolerance 1e-4 (scaled). The same model
  with the default bases must differ by far more, so that a server
  ignoring rope_parameters cannot pass.
- do_lower_case: sentence_bert_config.json's do_lower_case true (written as
  older sentence-transformers versions wrote it; 6.x reads it and saves
  none) over cased tokenizers (byte-level BPE without a normalizer, and a
  Unigram behind NFKC): Tokenize's ids against the tokenizer of
  sentence-transformers' Transformer module, and the same ids against the
  plain tokenizer on Python's str.lower() of each text (the corpus has
  non-ASCII capitals: İ, ǅ, Greek, Cyrillic, full-width Latin); Embed
  against encode. Lowercasing must change some ids.
- model_max_length: a Transformer module given max_seq_length=20, which
  6.x saves only as the tokenizer's model_max_length (tokenizer_config.json;
  sentence_bert_config.json has no max_seq_length): ListModels'
  max_input_tokens and truncated Embed of texts past 20 tokens against
  encode.
- CrossEncoder activation: a BertForSequenceClassification with one
  output saved by sentence-transformers 6.x's CrossEncoder with
  activation_fn Identity, which 6.x writes only into
  config_sentence_transformers.json (a server reading config.json alone
  would apply the one-output default, a sigmoid); Rerank against
  CrossEncoder.predict, tolerance 1e-5, and the sigmoid of the same scores
  must differ by far more.
- LayerNorm module: a SentenceTransformer with Pooling (mean), Dense (to
  24, Tanh) and sentence-transformers' LayerNorm module (gains and biases
  with noise), saved by 6.x; Embed against encode, tolerance 1e-5, and the
  same model without its LayerNorm must differ by far more.
- activations: a BertModel per hidden_act name of transformers' ACT2FN the
  families can name (gelu, relu, gelu_new, gelu_fast, gelu_pytorch_tanh,
  quick_gelu, silu, swish, mish), with feed-forward weights large enough
  that the activation shows; token states against transformers, tolerance
  1e-4 (scaled). Those far from gelu (relu, quick_gelu, silu, swish, mish)
  must also differ from the gelu model's states by at least 10 times
  that tolerance.

build(out_dir, names) writes the directories and returns [(name, path)]
(names: the models to build, or "saved_formats" for all, "activations" for
the activation models); check(served, built, report) compares them.
"""
import json
import pathlib

import numpy as np
import torch
import transformers

from compare import max_abs, scaled
import corpus
import family_models

POOLED_TOL = 1e-5
STATE_TOL = 1e-4
# A server running gelu for an activation far from it would be off by the
# gap between the two models' states; the check sees that when the gap is
# this many times STATE_TOL. quick_gelu, x * sigmoid(1.702 x), is within
# 0.02 of gelu everywhere, so its gap is near 1e-2 (scaled) on these
# weights: 10x leaves room, 100x did not.
ACTIVATION_MARGIN = 10
CHUNK = 32
MAX_SEQ_LENGTH = 20

POOLING_MODES = ("cls", "max", "mean", "mean_sqrt_len_tokens",
                 "weightedmean", "lasttoken")
ACTIVATIONS = ("gelu", "relu", "gelu_new", "gelu_fast", "gelu_pytorch_tanh",
               "quick_gelu", "silu", "swish", "mish")
FAR_FROM_GELU = ("relu", "quick_gelu", "silu", "swish", "mish")
ROPE = {"global_rope_theta": 40000.0, "local_rope_theta": 5000.0}
CE_IDENTITY = "torch.nn.modules.linear.Identity"
SCORE_TOL = 1e-5

# name -> what it checks; filled by build().
_BUILT = {}


def _st_model(raw, pooling="mean", **transformer_kwargs):
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.base.modules import Transformer
    from sentence_transformers.sentence_transformer.modules import Pooling
    t = Transformer(str(raw), **transformer_kwargs)
    return SentenceTransformer(modules=[
        t, Pooling(t.get_embedding_dimension(), pooling_mode=pooling)])


def _load_st(path):
    from sentence_transformers import SentenceTransformer
    return SentenceTransformer(str(path), device="cpu",
                               model_kwargs={"dtype": torch.float32})


def _raw(out_dir, name, make_config, cls, kind, seed, change=None):
    """A transformers model saved with its tokenizer; its path."""
    tok = family_models.tokenizer(kind)
    config = family_models.sized_config(make_config, tok)
    torch.manual_seed(seed)
    model = cls(config).eval()
    if change:
        change(model)
    path = pathlib.Path(out_dir) / name
    model.save_pretrained(path, safe_serialization=True)
    tok.save_pretrained(path)
    return path


def _small_bert(act):
    config = family_models._bert()
    config.hidden_size, config.num_attention_heads = 32, 4
    config.intermediate_size, config.num_hidden_layers = 48, 2
    config.hidden_act = act
    return config


def _small_bert_classifier():
    config = _small_bert("gelu")
    config.num_labels = 1
    return config


@torch.no_grad()
def _loud_classifier(model):
    """The classifier's weights x10, so that scores spread well past the
    sigmoid's flat middle."""
    for name, p in model.named_parameters():
        if "classifier" in name or "pooler" in name:
            p.mul_(10.0)


@torch.no_grad()
def _loud_feed_forward(model):
    """Pre-activations of order 1-3, so that the activation's shape, not
    only its slope at 0, reaches the output."""
    for name, p in model.named_parameters():
        if name.endswith("intermediate.dense.weight"):
            p.normal_(0.0, 2.0 / p.shape[1] ** 0.5)
        elif name.endswith("output.dense.weight") and "attention" not in name:
            p.normal_(0.0, 1.0 / p.shape[1] ** 0.5)


@torch.no_grad()
def _sharp_attention(model):
    """ModernBERT's q/k/v projection std 0.2 instead of 0.02: attention far
    from uniform, so that the rotary bases show."""
    for name, p in model.named_parameters():
        if name.endswith("attn.Wqkv.weight"):
            p.mul_(10.0)


def _modernbert(**rope):
    """family_models' ModernBERT config with the given rotary bases (none:
    the defaults)."""
    return transformers.ModernBertConfig(
        vocab_size=family_models.VOCAB, hidden_size=72, num_hidden_layers=3,
        num_attention_heads=3, intermediate_size=60,
        max_position_embeddings=300, global_attn_every_n_layers=2,
        local_attention=8, pad_token_id=0, bos_token_id=2, eos_token_id=3,
        cls_token_id=2, sep_token_id=3, **rope)


def build(out_dir, names=None):
    out_dir = pathlib.Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    built = []

    def wanted(name):
        return not names or name in names or "saved_formats" in names

    # Pooling modes, sentence-transformers 6.x's keys.
    base = None
    for mode in POOLING_MODES:
        name = f"st6-pool-{mode}"
        if not wanted(name):
            continue
        if base is None:
            base = _raw(out_dir, "st6-pool-hf", family_models._bert,
                        transformers.BertModel, "wordpiece", 7100)
        path = out_dir / name
        _st_model(base, pooling=mode).save(str(path))
        saved = json.loads((path / "1_Pooling" / "config.json").read_text())
        if saved.get("pooling_mode") != mode or \
                "embedding_dimension" not in saved:
            raise AssertionError(f"{name}: sentence-transformers saved "
                                 f"{saved}, not its 6.x keys")
        _BUILT[name] = ("pooled", None)
        built.append((name, path))

    # ModernBERT with non-default rotary bases (and the default twin that
    # must differ).
    name = "tf-modernbert-rope"
    if wanted(name):
        path = _raw(out_dir, name, lambda: _modernbert(**ROPE),
                    transformers.ModernBertModel, "wordpiece", 7200,
                    _sharp_attention)
        saved = json.loads((path / "config.json").read_text())
        rp = saved.get("rope_parameters") or {}
        if "global_rope_theta" in saved or \
                rp.get("full_attention", {}).get("rope_theta") != 40000.0 or \
                rp.get("sliding_attention", {}).get("rope_theta") != 5000.0:
            raise AssertionError(f"{name}: transformers saved rope keys "
                                 f"{rp}, not the 5.x per-layer-type form")
        twin = _raw(out_dir, name + "-default-twin", _modernbert,
                    transformers.ModernBertModel, "wordpiece", 7200,
                    _sharp_attention)
        _BUILT[name] = ("states", twin)
        built.append((name, path))

    # do_lower_case over cased tokenizers.
    for name, make_config, cls, kind in (
            ("st-lower-roberta", family_models._roberta,
             transformers.RobertaModel, "bpe"),
            ("st-lower-xlmr", lambda: family_models._roberta(
                transformers.XLMRobertaConfig), transformers.XLMRobertaModel,
             "unigram")):
        if not wanted(name):
            continue
        raw = _raw(out_dir, name + "-hf", make_config, cls, kind, 7300)
        path = out_dir / name
        _st_model(raw).save(str(path))
        config_path = path / "sentence_bert_config.json"
        config = json.loads(config_path.read_text())
        config["do_lower_case"] = True
        config_path.write_text(json.dumps(config, indent=2))
        _BUILT[name] = ("lower", raw)
        built.append((name, path))

    # max_seq_length kept only as the tokenizer's model_max_length.
    name = "st6-maxlen"
    if wanted(name):
        raw = _raw(out_dir, name + "-hf", family_models._bert,
                   transformers.BertModel, "wordpiece", 7400)
        path = out_dir / name
        _st_model(raw, max_seq_length=MAX_SEQ_LENGTH).save(str(path))
        st_config = json.loads((path / "sentence_bert_config.json").read_text())
        tok_config = json.loads((path / "tokenizer_config.json").read_text())
        if "max_seq_length" in st_config or \
                tok_config.get("model_max_length") != MAX_SEQ_LENGTH:
            raise AssertionError(
                f"{name}: sentence-transformers saved max_seq_length "
                f"{st_config.get('max_seq_length')}, model_max_length "
                f"{tok_config.get('model_max_length')}")
        _BUILT[name] = ("maxlen", None)
        built.append((name, path))

    # sentence-transformers' LayerNorm module after a Dense.
    name = "st6-layernorm"
    if wanted(name):
        from sentence_transformers.base.modules import Dense
        from sentence_transformers.sentence_transformer.modules import (
            LayerNorm)
        raw = _raw(out_dir, name + "-hf", family_models._bert,
                   transformers.BertModel, "wordpiece", 7700)
        st = _st_model(raw)
        width = st[0].get_embedding_dimension()
        torch.manual_seed(7701)
        norm = LayerNorm(24)
        with torch.no_grad():
            norm.norm.weight.add_(0.5 * torch.randn(24))
            norm.norm.bias.add_(0.3 * torch.randn(24))
        st.append(Dense(width, 24, activation_function=torch.nn.Tanh()))
        st.append(norm)
        path = out_dir / name
        st.save(str(path))
        _BUILT[name] = ("layernorm", None)
        built.append((name, path))

    # A CrossEncoder whose activation 6.x keeps beside config.json.
    name = "st6-ce-identity"
    if wanted(name):
        raw = _raw(out_dir, name + "-hf", _small_bert_classifier,
                   transformers.BertForSequenceClassification, "wordpiece",
                   7600, _loud_classifier)
        family_models.bert_token_types(raw)
        from sentence_transformers import CrossEncoder
        path = out_dir / name
        CrossEncoder(str(raw), device="cpu",
                     activation_fn=torch.nn.Identity()).save(str(path))
        saved = json.loads(
            (path / "config_sentence_transformers.json").read_text())
        in_config = json.loads((path / "config.json").read_text())
        if saved.get("activation_fn") != CE_IDENTITY or \
                "activation_fn" in in_config.get("sentence_transformers", {}):
            raise AssertionError(
                f"{name}: sentence-transformers saved activation_fn "
                f"{saved.get('activation_fn')!r} (config.json: "
                f"{in_config.get('sentence_transformers')}), not the 6.x form")
        _BUILT[name] = ("cross-encoder", None)
        built.append((name, path))

    # One BertModel per activation name.
    for i, act in enumerate(ACTIVATIONS):
        name = f"tf-bert-act-{act}"
        if not wanted(name) and "activations" not in (names or ()):
            continue
        path = _raw(out_dir, name, lambda act=act: _small_bert(act),
                    transformers.BertModel, "wordpiece", 7500,
                    _loud_feed_forward)
        _BUILT[name] = ("activation", act)
        built.append((name, path))
    return built


def _texts(tok, limit):
    return [t for t in corpus.TEXTS if t and len(tok(t)["input_ids"]) <= limit]


def _embed(served, name, texts, **kwargs):
    return np.concatenate([
        served.client.embed(texts[i:i + CHUNK], model=name, truncate=True,
                            **kwargs)
        for i in range(0, len(texts), CHUNK)])


def _encode(st, texts):
    return st.encode(texts, batch_size=CHUNK, convert_to_numpy=True,
                     show_progress_bar=False)


@torch.no_grad()
def _hf_states(model, ids):
    out = model(input_ids=torch.tensor([ids]),
                attention_mask=torch.ones(1, len(ids), dtype=torch.long))
    return out.last_hidden_state[0].numpy()


def _served_states(served, name, ids):
    from encoder_client import tensor_to_numpy
    r = served.client.embed_response([ids], model=name,
                                     tokens=True).results[0]
    return tensor_to_numpy(r.token_embeddings)


def _state_texts(tok, limit=120, count=12):
    texts = _texts(tok, limit)
    texts.sort(key=lambda t: -len(tok(t)["input_ids"]))
    return texts[:count]


def _check_states(served, name, path, report, twin=None):
    """Token states against transformers; with `twin`, also how far the
    twin's states are (they must be far)."""
    tok = transformers.AutoTokenizer.from_pretrained(path)
    kwargs = {"attn_implementation": "eager", "dtype": torch.float32}
    model = transformers.AutoModel.from_pretrained(path, **kwargs).eval()
    other = (transformers.AutoModel.from_pretrained(twin, **kwargs).eval()
             if twin is not None else None)
    worst, gap = 0.0, float("inf")
    texts = _state_texts(tok)
    for text in texts:
        ids = tok(text)["input_ids"]
        want = _hf_states(model, ids)
        worst = max(worst, scaled(_served_states(served, name, ids), want))
        if other is not None:
            gap = min(gap, scaled(_hf_states(other, ids), want))
    report.add(name, "last hidden state", worst, STATE_TOL, len(texts))
    return gap


def check(served, built, report):
    models = served.models()
    gelu_states = {}
    for name, path in built:
        kind, extra = _BUILT[name]
        if name not in models:
            report.fail(f"{name}: not served")
            continue
        try:
            if kind == "pooled":
                st = _load_st(path)
                texts = _texts(st.tokenizer, 250)
                got, want = _embed(served, name, texts), _encode(st, texts)
                # Sums over up to 250 tokens divided by sqrt(n): relative.
                if name.endswith("mean_sqrt_len_tokens"):
                    report.add(name, "pooled (6.x keys), relative",
                               scaled(got, want), POOLED_TOL, len(texts))
                else:
                    report.add(name, "pooled (6.x keys)",
                               max_abs(got, want), POOLED_TOL, len(texts))
            elif kind == "states":
                gap = _check_states(served, name, path, report, twin=extra)
                print(f"{name}: the default bases' states differ by "
                      f"{gap:.3g} (scaled)", flush=True)
                if not gap > 100 * STATE_TOL:
                    report.fail(f"{name}: the default rotary bases give "
                                f"states within {gap:.2g} of these; the "
                                "check cannot see the bases")
            elif kind == "lower":
                _check_lower(served, name, path, extra, report)
            elif kind == "maxlen":
                _check_maxlen(served, name, path, models[name], report)
            elif kind == "layernorm":
                _check_layernorm(served, name, path, report)
            elif kind == "cross-encoder":
                _check_cross_encoder(served, name, path, report)
            elif kind == "activation":
                _check_states(served, name, path, report)
                gelu_states[extra] = path
        except Exception as e:  # one model's failure is reported
            report.fail(f"{name}: {type(e).__name__}: {e}")
    _check_activations_differ(gelu_states, report)


def _check_lower(served, name, path, raw, report):
    st = _load_st(path)
    lowered = st[0].tokenizer  # with sentence-transformers' Lowercase
    plain = transformers.AutoTokenizer.from_pretrained(raw)
    texts = _texts(plain, 250)
    got = [list(map(int, e["ids"]))
           for e in served.client.tokenize(texts, model=name)]
    want = [lowered(t)["input_ids"] for t in texts]
    bad = [i for i, (g, w) in enumerate(zip(got, want)) if g != w]
    report.add(name, "token ids (do_lower_case)", len(bad), 0, len(texts),
               f"first: {texts[bad[0]]!r}" if bad else "")
    by_python = [plain(t.lower())["input_ids"] for t in texts]
    bad = [i for i, (g, w) in enumerate(zip(got, by_python)) if g != w]
    report.add(name, "token ids = str.lower()'s", len(bad), 0, len(texts),
               f"first: {texts[bad[0]]!r}" if bad else "")
    changed = sum(plain(t)["input_ids"] != w for t, w in zip(texts, want))
    if changed < 10:
        report.fail(f"{name}: lowercasing changes the ids of only "
                    f"{changed} texts; the check cannot see it")
    report.add(name, "pooled (do_lower_case)",
               max_abs(_embed(served, name, texts), _encode(st, texts)),
               POOLED_TOL, len(texts))


def _check_maxlen(served, name, path, info, report):
    st = _load_st(path)
    if st.max_seq_length != MAX_SEQ_LENGTH:
        report.fail(f"{name}: sentence-transformers reads max_seq_length "
                    f"{st.max_seq_length}, want {MAX_SEQ_LENGTH}")
    if info.max_input_tokens != MAX_SEQ_LENGTH:
        report.fail(f"{name}: ListModels max_input_tokens "
                    f"{info.max_input_tokens}, want {MAX_SEQ_LENGTH}")
    tok = transformers.AutoTokenizer.from_pretrained(path)
    texts = _texts(tok, 250)
    longer = sum(len(tok(t)["input_ids"]) > MAX_SEQ_LENGTH for t in texts)
    if longer < 50:
        report.fail(f"{name}: only {longer} texts pass {MAX_SEQ_LENGTH} "
                    "tokens")
    report.add(name, f"pooled, truncated at {MAX_SEQ_LENGTH}",
               max_abs(_embed(served, name, texts), _encode(st, texts)),
               POOLED_TOL, len(texts))


def _check_layernorm(served, name, path, report):
    from sentence_transformers import SentenceTransformer
    st = _load_st(path)
    texts = _texts(st.tokenizer, 250)
    want = _encode(st, texts)
    report.add(name, "pooled (Dense, LayerNorm)",
               max_abs(_embed(served, name, texts), want), POOLED_TOL,
               len(texts))
    without = SentenceTransformer(modules=list(st)[:-1], device="cpu")
    gap = float(np.abs(_encode(without, texts) - want).max())
    if not gap > 100 * POOLED_TOL:
        report.fail(f"{name}: without its LayerNorm the vectors move by only "
                    f"{gap:.2g}; the check cannot see the module")


def _check_cross_encoder(served, name, path, report):
    from sentence_transformers import CrossEncoder
    ce = CrossEncoder(str(path), device="cpu")
    texts = _texts(ce.tokenizer, 60)
    queries, documents = texts[:4], texts[4:20]
    worst, gap = 0.0, float("inf")
    for q in queries:
        want = np.asarray(ce.predict([(q, d) for d in documents],
                                     show_progress_bar=False),
                          np.float64).reshape(-1)
        scores = np.zeros(len(documents))
        for r in served.client.rerank(q, documents, model=name):
            scores[r["index"]] = r["score"]
        worst = max(worst, float(np.abs(scores - want).max()))
        gap = min(gap, float(np.abs(1 / (1 + np.exp(-want)) - want).max()))
    report.add(name, "rerank vs CrossEncoder (6.x activation_fn)", worst,
               SCORE_TOL, len(queries) * len(documents))
    if not gap > 100 * SCORE_TOL:
        report.fail(f"{name}: a sigmoid moves the scores by only {gap:.2g}; "
                    "the check cannot see the activation")


def _check_activations_differ(paths, report):
    """The activations far from gelu must move the states far: else the
    checks above could pass on a server that runs gelu for every name."""
    if "gelu" not in paths:
        return
    kwargs = {"attn_implementation": "eager", "dtype": torch.float32}
    tok = transformers.AutoTokenizer.from_pretrained(paths["gelu"])
    gelu = transformers.AutoModel.from_pretrained(paths["gelu"],
                                                  **kwargs).eval()
    ids = [tok(t)["input_ids"] for t in _state_texts(tok, count=4)]
    for act in FAR_FROM_GELU:
        if act not in paths:
            continue
        model = transformers.AutoModel.from_pretrained(paths[act],
                                                       **kwargs).eval()
        gap = min(scaled(_hf_states(model, i), _hf_states(gelu, i))
                  for i in ids)
        print(f"tf-bert-act-{act}: states differ from gelu's by {gap:.3g} "
              "(scaled)", flush=True)
        if not gap > ACTIVATION_MARGIN * STATE_TOL:
            report.fail(f"tf-bert-act-{act}: states within {gap:.2g} of "
                        "gelu's; the check cannot tell the activations "
                        "apart")
