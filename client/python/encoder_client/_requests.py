"""Request messages from Python arguments, and Python results from response
messages: shared by EncoderClient, Client and AsyncClient, which differ
only in how they make the calls."""

import numpy as np

from . import pb2

_POOLING = {None: 0, "mean": 1, "first": 2, "max": 3, "last_token": 4,
            "weighted_mean": 5}
_EMBEDDING_TYPES = {"float": 0, "binary": 1, "ubinary": 2, "int8": 3,
                    "uint8": 4}
PROBES = ("permutation", "shift", "structure", "attention_stats",
          "extrapolation")


def tensor_to_numpy(tensor):
    """An encoder.v1.Tensor as a numpy array of its shape. ValueError when
    the dtype is unspecified or the bytes do not fill the shape."""
    shape = tuple(int(d) for d in tensor.shape)
    if tensor.dtype == pb2.DTYPE_BFLOAT16:
        # bfloat16 is the high half of a float32.
        halves = np.frombuffer(tensor.data, dtype="<u2")
        values = (halves.astype(np.uint32) << 16).view(np.float32)
    else:
        dtypes = {pb2.DTYPE_FLOAT32: "<f4", pb2.DTYPE_FLOAT16: "<f2",
                  pb2.DTYPE_FLOAT64: "<f8", pb2.DTYPE_INT64: "<i8",
                  pb2.DTYPE_INT8: "i1", pb2.DTYPE_UINT8: "u1"}
        if tensor.dtype not in dtypes:
            raise ValueError(f"tensor dtype {tensor.dtype} is unspecified or "
                             "unknown")
        values = np.frombuffer(tensor.data, dtype=dtypes[tensor.dtype])
    if values.size != int(np.prod(shape, dtype=np.int64)):
        raise ValueError(f"tensor of shape {list(shape)} holds {values.size} "
                         "values")
    return values.reshape(shape)


def make_input(item):
    """A str is a text, bytes raw text bytes, a sequence of ints token
    ids; an encoder.v1.Input passes as it is."""
    if isinstance(item, pb2.Input):
        return item
    if isinstance(item, str):
        return pb2.Input(text=item)
    if isinstance(item, (bytes, bytearray)):
        return pb2.Input(text_bytes=bytes(item))
    return pb2.Input(token_ids=pb2.TokenIds(ids=[int(i) for i in item]))


def single_input(text, ids):
    if (text is None) == (ids is None):
        raise ValueError("give exactly one of text and ids")
    return make_input(text if text is not None else ids)


def side_enum(side):
    sides = {"right": pb2.TRUNCATION_SIDE_RIGHT,
             "left": pb2.TRUNCATION_SIDE_LEFT}
    if side not in sides:
        raise ValueError(f"truncation_side is 'right' or 'left', not {side!r}")
    return sides[side]


def embed_request(inputs, *, model="", pooling=None, normalize=None,
                  tokens=False, attention_layers=(), attention_heads=(),
                  average_heads=False, hidden_layers=(), pool_hidden=False,
                  truncate=None, prompt_name="", prompt=None, chunk=False,
                  chunk_overlap=0, chunk_aggregation="mean",
                  extrapolate=False, late_chunk=False, chunk_tokens=0,
                  return_chunks=False, embedding_type="float",
                  quantization_ranges=None, project_tokens=False,
                  dimensions=None, truncation_side=None, sparse=False,
                  sparse_top_k=0, sparse_threshold=0.0, input_type=""):
    """The EmbedRequest of EncoderClient.embed_response's arguments."""
    if pooling not in _POOLING:
        raise ValueError(f"pooling must be one of {sorted(_POOLING, key=str)}")
    request = pb2.EmbedRequest(
        model=model, inputs=[make_input(i) for i in inputs],
        pooling=_POOLING[pooling], return_token_embeddings=tokens,
        project_token_embeddings=project_tokens,
        attention=pb2.AttentionSelection(
            layers=list(attention_layers), heads=list(attention_heads),
            average_heads=average_heads),
        hidden_states=pb2.HiddenStateSelection(
            layers=list(hidden_layers), pooled=pool_hidden))
    if sparse:
        request.return_sparse = True
        request.sparse_top_k = int(sparse_top_k)
        request.sparse_threshold = float(sparse_threshold)
    if input_type:
        request.input_type = input_type
    if normalize is not None:
        request.normalize = bool(normalize)
    if truncate is not None:
        request.truncate = bool(truncate)
    if truncation_side is not None:
        request.text_options.truncation_side = side_enum(truncation_side)
    if dimensions is not None:
        request.dimensions = int(dimensions)
    if embedding_type not in _EMBEDDING_TYPES:
        raise ValueError("embedding_type must be one of "
                         f"{sorted(_EMBEDDING_TYPES)}")
    request.embedding_type = _EMBEDDING_TYPES[embedding_type]
    if quantization_ranges is not None:
        low, high = quantization_ranges
        request.quantization_ranges.min.extend(float(v) for v in low)
        request.quantization_ranges.max.extend(float(v) for v in high)
    request.prompt_name = prompt_name or ""
    if prompt is not None:
        request.prompt = prompt
    if extrapolate:
        request.long_input.policy = pb2.LongInput.POLICY_EXTRAPOLATE
    if chunk or late_chunk:
        if chunk_aggregation not in ("mean", "max"):
            raise ValueError('chunk_aggregation is "mean" or "max"')
        request.long_input.policy = (
            pb2.LongInput.POLICY_LATE_CHUNK if late_chunk
            else pb2.LongInput.POLICY_CHUNK)
        request.long_input.overlap_tokens = chunk_overlap
        request.long_input.chunk_tokens = chunk_tokens
        request.long_input.return_chunks = return_chunks
        request.long_input.aggregation = (
            pb2.LongInput.AGGREGATION_MAX if chunk_aggregation == "max"
            else pb2.LongInput.AGGREGATION_MEAN)
    return request


def pooled(response):
    """The pooled vectors of an EmbedResponse, [N, D]."""
    return np.stack([tensor_to_numpy(r.pooled) for r in response.results])


def tokenize_request(texts, *, model="", add_special_tokens=True,
                     truncate=False, max_length=0):
    return pb2.TokenizeRequest(
        model=model, texts=list(texts), truncate=truncate,
        max_length=max_length,
        text_options=pb2.TextOptions(add_special_tokens=add_special_tokens))


def tokenize_results(response):
    return [{
        "ids": np.asarray(e.ids, dtype=np.int64),
        "tokens": list(e.tokens),
        "byte_offsets": np.asarray(e.byte_offsets,
                                   dtype=np.int64).reshape(-1, 2),
        "char_offsets": np.asarray(e.char_offsets,
                                   dtype=np.int64).reshape(-1, 2),
        "special_tokens_mask": np.asarray(e.special_tokens_mask, dtype=bool),
        "truncated": e.truncated,
    } for e in response.encodings]


def rerank_request(query, documents, *, model="", top_n=0, keep_order=False,
                   return_documents=False, raw_scores=False, truncate=None,
                   truncation_side=None, attention_layers=(),
                   attention_heads=(), average_heads=False,
                   positional_probes=False, weights=None, instruction=None):
    """weights: a late-interaction model's (dense, sparse, colbert)
    weights, a tuple or a dict of those names (left out: 0). instruction:
    a rerank template's instruction (ModelInfo.rerank_template)."""
    request = pb2.RerankRequest(
        model=model, query=query, documents=list(documents), top_n=top_n,
        keep_order=keep_order, return_documents=return_documents,
        raw_scores=raw_scores,
        attention=pb2.AttentionSelection(
            layers=list(attention_layers), heads=list(attention_heads),
            average_heads=average_heads),
        positional_probes=positional_probes)
    if truncate is not None:
        request.truncate = bool(truncate)
    if truncation_side is not None:
        request.truncation_side = side_enum(truncation_side)
    if weights is not None:
        if not isinstance(weights, dict):
            weights = dict(zip(("dense", "sparse", "colbert"), weights))
        unknown = set(weights) - {"dense", "sparse", "colbert"}
        if unknown:
            raise ValueError(f"weights has unknown parts {sorted(unknown)}")
        request.weights.dense = float(weights.get("dense", 0))
        request.weights.sparse = float(weights.get("sparse", 0))
        request.weights.colbert = float(weights.get("colbert", 0))
    if instruction is not None:
        request.instruction = str(instruction)
    return request


def rerank_results(response, *, return_documents=False, attention=False,
                   positional_probes=False):
    out = []
    for r in response.results:
        item = {"index": r.index, "score": r.score, "tokens": r.tokens,
                "truncated": r.truncated,
                "truncated_tokens": r.truncated_tokens}
        if return_documents:
            item["document"] = r.document
        if attention:
            item["attention"] = tensor_to_numpy(r.attention)
            item["query_tokens"] = list(r.query_tokens)
            item["document_tokens"] = list(r.document_tokens)
        if positional_probes:
            item["probes"] = {
                "swapped": r.probes.swapped_score,
                "reversed_document": r.probes.reversed_document_score}
        out.append(item)
    return out


def classify_request(inputs, *, model="", raw_scores=False, truncate=None,
                     truncation_side=None):
    request = pb2.ClassifyRequest(model=model, raw_scores=raw_scores)
    if truncate is not None:
        request.truncate = bool(truncate)
    if truncation_side is not None:
        request.truncation_side = side_enum(truncation_side)
    for item in inputs:
        if isinstance(item, str):
            request.inputs.add(text=item)
        else:
            text, pair = item
            request.inputs.add(text=text, text_pair=pair)
    return request


def classify_results(response):
    return [[(label.label, label.score) for label in r.labels]
            for r in response.results]


def sparse_request(inputs, *, model="", top_k=0, threshold=0.0,
                   truncate=None, prompt_name="", prompt=None):
    request = pb2.EmbedSparseRequest(
        model=model, inputs=[make_input(i) for i in inputs], top_k=top_k,
        threshold=threshold, prompt_name=prompt_name or "")
    if truncate is not None:
        request.truncate = bool(truncate)
    if prompt is not None:
        request.prompt = prompt
    return request


def sparse_results(response):
    return [dict(zip(r.indices, r.values)) for r in response.results]


def diagnose_request(text=None, *, ids=None, model="", probes=(),
                     attention_maps=False, **fields):
    request = pb2.DiagnoseRequest(model=model,
                                  return_attention_maps=attention_maps,
                                  **fields)
    if text is not None:
        request.text = text
    elif ids is not None:
        request.token_ids.ids.extend(int(i) for i in ids)
    else:
        raise ValueError("give text or ids")
    for probe in probes:
        if probe not in PROBES:
            raise ValueError(f"unknown probe {probe!r}; one of {PROBES}")
        setattr(request, probe, True)
    return request


def diagnose_arrays(response):
    """numpy views of a DiagnoseResponse's tensors that are present:
    "attention_maps", "gram", "relativity", "bias"."""
    arrays = {}
    tensors = [("attention_maps", response.attention_maps)]
    tensors += [(name, getattr(response.structure, name))
                for name in ("gram", "relativity", "bias")]
    for name, tensor in tensors:
        # An empty Tensor message (no dtype, shape or data) is absent.
        if tensor.dtype != pb2.DTYPE_UNSPECIFIED or tensor.data:
            arrays[name] = tensor_to_numpy(tensor)
    return arrays
