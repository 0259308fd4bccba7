"""Multi-vector (ColBERT-style) token vectors against sentence-transformers.

Models: sentence-transformers' MultiVectorEncoder over a transformers
BertModel and ModernBertModel of family_models.py's configs (seeded random
weights), with its modules as it builds them: the Transformer, a Dense
projection of every token (module_input_name token_embeddings, no bias),
for the ModernBERT one a MultiVectorMask, and a Normalize of the tokens.

Checks, per model: ListModels' tasks, token_embedding_dim and
normalize_token_embeddings; Embed's token embeddings with
project_token_embeddings against MultiVectorEncoder.encode_document's
token embeddings (tolerance 1e-5, one row per token, special tokens
included); the same call without the projection still gives the
transformer's own last hidden state; the refusals (a projection on a
model without one: FAILED_PRECONDITION; a projection without token
embeddings: INVALID_ARGUMENT).
"""
import numpy as np
import torch
import transformers

import corpus
import family_models

TOL = 1e-5
WIDTH = 24

# name -> (config, class, tokenizer kind, with a MultiVectorMask)
MODELS = {
    "colbert-bert": (family_models._bert, transformers.BertModel,
                     "wordpiece", False),
    "colbert-modernbert": (family_models._modernbert,
                           transformers.ModernBertModel, "wordpiece", True),
}


def build(out_dir, names=None):
    """Writes each model directory; returns [(name, path)]."""
    from sentence_transformers import MultiVectorEncoder
    from sentence_transformers.base.modules import Normalize, Transformer
    from sentence_transformers.base.modules.dense import Dense
    from sentence_transformers.multi_vector_encoder.modules import \
        MultiVectorMask
    built = []
    for i, (name, (make_config, cls, kind, mask)) in enumerate(
            MODELS.items()):
        if names and name not in names:
            continue
        tok = family_models.tokenizer(kind)
        config = family_models.sized_config(make_config, tok)
        torch.manual_seed(4000 + i)
        raw = out_dir / (name + "-hf")
        cls(config).eval().save_pretrained(raw, safe_serialization=True)
        tok.save_pretrained(raw)
        transformer = Transformer(str(raw))
        width = transformer.get_embedding_dimension()
        modules = [transformer,
                   Dense(width, WIDTH, bias=False,
                         activation_function=torch.nn.Identity(),
                         module_input_name="token_embeddings")]
        if mask:
            modules.append(MultiVectorMask())
        modules.append(Normalize(module_input_name="token_embeddings"))
        path = out_dir / name
        MultiVectorEncoder(modules=modules, device="cpu").save(str(path))
        built.append((name, path))
    return built


def _tokens(served, name, texts, project):
    response = served.client.embed_response(
        texts, model=name, tokens=True, project_tokens=project)
    from encoder_client import tensor_to_numpy
    return [tensor_to_numpy(r.token_embeddings) for r in response.results]


def _check_model(name, path, served, report):
    from sentence_transformers import MultiVectorEncoder
    info = served.models()[name]
    if "multi_vector" not in list(info.tasks) or \
            info.token_embedding_dim != WIDTH or \
            not info.normalize_token_embeddings:
        report.fail(f"{name}: ListModels tasks {list(info.tasks)} "
                    f"token_embedding_dim {info.token_embedding_dim} "
                    f"normalized {info.normalize_token_embeddings}; expected "
                    f"multi_vector {WIDTH} True")
    texts = [t for t in corpus.SENTENCES if len(t) < 200][:16]
    reference = MultiVectorEncoder(str(path), device="cpu")
    ref = reference.encode_document(texts, output_value="token_embeddings",
                                    batch_size=1)
    got = _tokens(served, name, texts, True)
    worst, shapes = 0.0, 0
    for g, r in zip(got, ref):
        r = np.asarray(r, dtype=np.float64)
        if g.shape != r.shape:
            shapes += 1
            continue
        worst = max(worst, float(np.abs(g - r).max()))
    report.add(name, "projected tokens vs MultiVectorEncoder", worst, TOL,
               len(texts), f"{WIDTH} wide")
    if shapes or worst > TOL:
        report.fail(f"{name}: projected token vectors differ by {worst:.3g} "
                    f"({shapes} of {len(texts)} with other shapes)")
    # Without the projection: the transformer's last hidden state.
    hf = transformers.AutoModel.from_pretrained(
        str(path), attn_implementation="eager", dtype=torch.float32).eval()
    tok = transformers.AutoTokenizer.from_pretrained(str(path))
    with torch.no_grad():
        state = hf(**tok(texts[0], return_tensors="pt")).last_hidden_state[0]
    raw = _tokens(served, name, texts[:1], False)[0]
    raw_worst = float(np.abs(raw - state.numpy()).max()) \
        if raw.shape == tuple(state.shape) else float("inf")
    report.add(name, "unprojected tokens vs last_hidden_state", raw_worst,
               1e-4, 1)
    if raw_worst > 1e-4:
        report.fail(f"{name}: unprojected tokens differ by {raw_worst:.3g}")


def check(served, models, embedder, report):
    import grpc
    for name, path in models:
        try:
            _check_model(name, path, served, report)
        except Exception as e:  # one model's failure is reported
            report.fail(f"{name}: {type(e).__name__}: {e}")
    refusals = []
    if embedder is not None:
        refusals.append((embedder, True, grpc.StatusCode.FAILED_PRECONDITION))
    if models:
        refusals.append((models[0][0], False,
                         grpc.StatusCode.INVALID_ARGUMENT))
    for name, tokens, code in refusals:
        try:
            served.client.embed_response(["a text"], model=name,
                                         tokens=tokens, project_tokens=True)
            report.fail(f"{name}: project_tokens (tokens={tokens}) was "
                        "accepted")
        except grpc.RpcError as e:
            if e.code() != code:
                report.fail(f"{name}: project_tokens (tokens={tokens}) got "
                            f"{e.code()}, expected {code}")
    report.add("multi-vector", "projection refusals", 0, 0, len(refusals))
