"""Python client of encoder.v1.EncoderService with numpy results.

    from encoderclient import EncoderClient
    with EncoderClient("127.0.0.1:50051") as client:
        vectors = client.embed(["first text", "second text"])  # [2, D]
        maps = client.attention("some text", layers=[0])       # [1, H, S, S]

Tensors arrive as packed little-endian bytes with a shape and dtype and
come back as numpy arrays of that shape (float16 as float16, bfloat16
widened to float32). RPC failures raise grpc.RpcError with the server's
status code and message.
"""

import numpy as np

import grpc

from . import _stubs
from ._version import __version__

pb2, pb2_grpc = _stubs.load()

__all__ = ["EncoderClient", "tensor_to_numpy", "pb2", "__version__"]

_POOLING = {None: 0, "mean": 1, "first": 2, "max": 3, "last_token": 4,
            "weighted_mean": 5}


_EMBEDDING_TYPES = {"float": 0, "binary": 1, "ubinary": 2, "int8": 3,
                    "uint8": 4}


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


def _input(item):
    """A str is a text, bytes raw text bytes, a sequence of ints token
    ids; an encoder.v1.Input passes as it is."""
    if isinstance(item, pb2.Input):
        return item
    if isinstance(item, str):
        return pb2.Input(text=item)
    if isinstance(item, (bytes, bytearray)):
        return pb2.Input(text_bytes=bytes(item))
    return pb2.Input(token_ids=pb2.TokenIds(ids=[int(i) for i in item]))


def _truncation_side(side):
    sides = {"right": pb2.TRUNCATION_SIDE_RIGHT,
             "left": pb2.TRUNCATION_SIDE_LEFT}
    if side not in sides:
        raise ValueError(f"truncation_side is 'right' or 'left', not {side!r}")
    return sides[side]


def _single_input(text, ids):
    if (text is None) == (ids is None):
        raise ValueError("give exactly one of text and ids")
    return _input(text if text is not None else ids)


class EncoderClient:
    """One channel to an encoder-server; use it as a context manager or
    call close()."""

    def __init__(self, target="127.0.0.1:50051", *, timeout=60.0, tls=False,
                 root_certificates=None, private_key=None,
                 certificate_chain=None, token=None,
                 max_receive_message_bytes=None):
        """target: host:port. timeout: seconds per call. TLS when `tls` or
        any PEM (bytes) is given; `token` is sent as a bearer token.
        max_receive_message_bytes: the largest response accepted (gRPC's
        default is 4 MiB; attention maps and hidden states of long inputs
        are larger)."""
        options = []
        if max_receive_message_bytes is not None:
            options.append(("grpc.max_receive_message_length",
                            int(max_receive_message_bytes)))
        if tls or root_certificates or certificate_chain:
            credentials = grpc.ssl_channel_credentials(
                root_certificates=root_certificates, private_key=private_key,
                certificate_chain=certificate_chain)
            self._channel = grpc.secure_channel(target, credentials,
                                                options=options)
        else:
            self._channel = grpc.insecure_channel(target, options=options)
        self._stub = pb2_grpc.EncoderServiceStub(self._channel)
        self._timeout = timeout
        self._metadata = ((("authorization", f"Bearer {token}"),)
                          if token else ())

    def close(self):
        self._channel.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _call(self, method, request):
        return method(request, timeout=self._timeout, metadata=self._metadata)

    def models(self):
        """The ListModelsResponse message (models, default_model,
        server_version)."""
        return self._call(self._stub.ListModels, pb2.ListModelsRequest())

    def embed_response(self, inputs, *, model="", pooling=None, normalize=None,
                       tokens=False, attention_layers=(), attention_heads=(),
                       average_heads=False, hidden_layers=(),
                       pool_hidden=False, truncate=None, prompt_name="",
                       prompt=None, chunk=False, chunk_overlap=0,
                       chunk_aggregation="mean", extrapolate=False,
                       late_chunk=False, chunk_tokens=0, return_chunks=False,
                       embedding_type="float", quantization_ranges=None,
                       project_tokens=False):
        """The raw EmbedResponse of one Embed call. `project_tokens`:
        the token embeddings (`tokens`) through a multi-vector model's
        token projection. `prompt_name` names one
        of the model's prompts, `prompt` is a text of the caller's
        (sentence-transformers' encode(prompt_name=..., prompt=...)).
        `chunk`: inputs over the model's length are embedded in windows
        repeating `chunk_overlap` tokens, aggregated by "mean" (weighted by
        tokens) or "max". `late_chunk`: each input runs whole and every
        window is pooled from the full-context token states. `chunk_tokens`
        sets the windows' size (0: the model's length); `return_chunks`
        returns each window's vector and spans (result.chunk_vectors).
        `extrapolate`: they run whole past the model's length where its
        positional scheme allows. `embedding_type` "binary" or "ubinary":
        pooled vectors as packed sign bits (int8 / uint8); "int8" or
        "uint8": a byte per value within per-dimension ranges, given as
        `quantization_ranges` (min, max) or else the call's own; as
        sentence-transformers' quantize_embeddings. `truncate`: True cuts
        inputs past the model's length, False refuses them, None leaves it
        to the server (truncate unless its --long-input says otherwise;
        result.truncated_tokens says what was cut)."""
        if isinstance(inputs, (str, bytes)):
            raise TypeError("inputs is a list of texts or id lists")
        if pooling not in _POOLING:
            raise ValueError(f"pooling must be one of {sorted(_POOLING, key=str)}")
        request = pb2.EmbedRequest(
            model=model, inputs=[_input(i) for i in inputs],
            pooling=_POOLING[pooling], return_token_embeddings=tokens,
            project_token_embeddings=project_tokens,
            attention=pb2.AttentionSelection(
                layers=list(attention_layers), heads=list(attention_heads),
                average_heads=average_heads),
            hidden_states=pb2.HiddenStateSelection(
                layers=list(hidden_layers), pooled=pool_hidden))
        if normalize is not None:
            request.normalize = normalize
        if truncate is not None:
            request.truncate = truncate
        if embedding_type not in _EMBEDDING_TYPES:
            raise ValueError("embedding_type must be one of "
                             f"{sorted(_EMBEDDING_TYPES)}")
        request.embedding_type = _EMBEDDING_TYPES[embedding_type]
        if quantization_ranges is not None:
            low, high = quantization_ranges
            request.quantization_ranges.min.extend(float(v) for v in low)
            request.quantization_ranges.max.extend(float(v) for v in high)
        request.prompt_name = prompt_name
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
        return self._call(self._stub.Embed, request)

    def embed(self, inputs, *, model="", pooling=None, normalize=None,
              truncate=None, prompt_name="", prompt=None, chunk=False,
              chunk_overlap=0, chunk_aggregation="mean", extrapolate=False,
              embedding_type="float", quantization_ranges=None):
        """Pooled embeddings [N, D] (float32) of `inputs`: texts (str) or
        token-id lists, in order; texts after the prompt named
        `prompt_name` or the text `prompt`. `embedding_type` "binary" /
        "ubinary": [N, ceil(D / 8)] int8 / uint8 packed sign bits; "int8"
        / "uint8": [N, D] bytes (see embed_response)."""
        response = self.embed_response(inputs, model=model, pooling=pooling,
                                       normalize=normalize, truncate=truncate,
                                       prompt_name=prompt_name, prompt=prompt,
                                       chunk=chunk,
                                       chunk_overlap=chunk_overlap,
                                       chunk_aggregation=chunk_aggregation,
                                       extrapolate=extrapolate,
                                       embedding_type=embedding_type,
                                       quantization_ranges=quantization_ranges)
        return np.stack([tensor_to_numpy(r.pooled) for r in response.results])

    def embed_chunks(self, inputs, *, model="", late_chunk=False,
                     chunk_tokens=0, chunk_overlap=0):
        """Every window's vector of each input: per input a list of
        (vector [D], (token_begin, token_end), (char_begin, char_end)),
        with chunking, or late chunking when `late_chunk`."""
        response = self.embed_response(
            inputs, model=model, chunk=not late_chunk, late_chunk=late_chunk,
            chunk_tokens=chunk_tokens, chunk_overlap=chunk_overlap,
            return_chunks=True)
        return [[(tensor_to_numpy(c.embedding),
                  (c.token_begin, c.token_end), (c.char_begin, c.char_end))
                 for c in r.chunk_vectors] for r in response.results]

    def token_embeddings(self, text=None, *, ids=None, model=""):
        """Token embeddings [S, D] of one input."""
        response = self.embed_response([_single_input(text, ids)], model=model,
                                       tokens=True)
        return tensor_to_numpy(response.results[0].token_embeddings)

    def attention(self, text=None, *, ids=None, model="", layers=(0,),
                  heads=(), average_heads=False):
        """Attention maps of one input: [L, H, S, S], or [L, S, S] with
        average_heads; rows are queries, columns keys."""
        response = self.embed_response(
            [_single_input(text, ids)], model=model,
            attention_layers=layers, attention_heads=heads,
            average_heads=average_heads)
        return tensor_to_numpy(response.results[0].attention)

    def hidden_states(self, text=None, *, ids=None, model="", layers=(-1,),
                      pooled=False):
        """Hidden states of one input after `layers` (0: the embedding
        output, -1: the last layer's, after a pre-norm model's final
        norm): [L, S, D], or [L, D] pooled like the embedding."""
        response = self.embed_response(
            [_single_input(text, ids)], model=model, hidden_layers=layers,
            pool_hidden=pooled)
        return tensor_to_numpy(response.results[0].hidden_states)

    def tokenize(self, texts, *, model="", add_special_tokens=True,
                 truncate=False, max_length=0):
        """One dict per text: ids (int64 array), tokens (list of str),
        byte_offsets and char_offsets ([T, 2] int64 arrays),
        special_tokens_mask (bool array), truncated."""
        if isinstance(texts, str):
            raise TypeError("texts is a list of str")
        request = pb2.TokenizeRequest(
            model=model, texts=list(texts), truncate=truncate,
            max_length=max_length,
            text_options=pb2.TextOptions(
                add_special_tokens=add_special_tokens))
        response = self._call(self._stub.Tokenize, request)
        return [{
            "ids": np.asarray(e.ids, dtype=np.int64),
            "tokens": list(e.tokens),
            "byte_offsets": np.asarray(e.byte_offsets,
                                       dtype=np.int64).reshape(-1, 2),
            "char_offsets": np.asarray(e.char_offsets,
                                       dtype=np.int64).reshape(-1, 2),
            "special_tokens_mask": np.asarray(e.special_tokens_mask,
                                              dtype=bool),
            "truncated": e.truncated,
        } for e in response.encodings]

    def rerank(self, query, documents, *, model="", top_n=0,
               keep_order=False, return_documents=False, raw_scores=False,
               truncate=None, truncation_side=None, attention_layers=(),
               attention_heads=(), average_heads=False,
               positional_probes=False):
        """A cross-encoder's scores of `documents` against `query`: a list
        of dicts (index, score, tokens, truncated, truncated_tokens, and
        document when return_documents), best first unless keep_order.
        truncate: True cuts, False refuses a pair past the model's length,
        None leaves it to the server. raw_scores: the
        head's logits, not the model's score_activation. With
        attention_layers each dict also has "attention" ([L, H, Q, D], or
        [L, Q, D] averaged: query tokens to document tokens),
        "query_tokens" and "document_tokens". With positional_probes, a
        "probes" dict: "swapped" (the document first) and
        "reversed_document" (its tokens reversed) scores."""
        if isinstance(documents, str):
            raise TypeError("documents is a list of str")
        request = pb2.RerankRequest(
            model=model, query=query, documents=list(documents), top_n=top_n,
            keep_order=keep_order, return_documents=return_documents,
            raw_scores=raw_scores,
            attention=pb2.AttentionSelection(
                layers=list(attention_layers), heads=list(attention_heads),
                average_heads=average_heads),
            positional_probes=positional_probes)
        if truncate is not None:
            request.truncate = truncate
        if truncation_side is not None:
            request.truncation_side = _truncation_side(truncation_side)
        response = self._call(self._stub.Rerank, request)
        out = []
        for r in response.results:
            item = {"index": r.index, "score": r.score, "tokens": r.tokens,
                    "truncated": r.truncated,
                    "truncated_tokens": r.truncated_tokens}
            if return_documents:
                item["document"] = r.document
            if attention_layers:
                item["attention"] = tensor_to_numpy(r.attention)
                item["query_tokens"] = list(r.query_tokens)
                item["document_tokens"] = list(r.document_tokens)
            if positional_probes:
                item["probes"] = {
                    "swapped": r.probes.swapped_score,
                    "reversed_document": r.probes.reversed_document_score}
            out.append(item)
        return out

    def classify(self, inputs, *, model="", raw_scores=False, truncate=None,
                 truncation_side=None):
        """Labels with scores, best first, per input: a text or a
        (text, text_pair) tuple. Returns one list of (label, score) per
        input."""
        response = self.classify_response(
            inputs, model=model, raw_scores=raw_scores, truncate=truncate,
            truncation_side=truncation_side)
        return [[(label.label, label.score) for label in r.labels]
                for r in response.results]

    def classify_response(self, inputs, *, model="", raw_scores=False,
                          truncate=None, truncation_side=None):
        """The ClassifyResponse message for `inputs` (as classify)."""
        if isinstance(inputs, str):
            raise TypeError("inputs is a list of str or (str, str) pairs")
        request = pb2.ClassifyRequest(model=model, raw_scores=raw_scores)
        if truncate is not None:
            request.truncate = truncate
        if truncation_side is not None:
            request.truncation_side = _truncation_side(truncation_side)
        for item in inputs:
            if isinstance(item, str):
                request.inputs.add(text=item)
            else:
                text, pair = item
                request.inputs.add(text=text, text_pair=pair)
        return self._call(self._stub.Classify, request)

    def embed_sparse(self, inputs, *, model="", top_k=0, threshold=0.0,
                     truncate=None, prompt_name=""):
        """Sparse (SPLADE) vectors of a model whose tasks include
        "sparse": per input a dict {vocabulary id: weight} of its weights
        above `threshold`, the `top_k` largest (0: all)."""
        response = self.embed_sparse_response(
            inputs, model=model, top_k=top_k, threshold=threshold,
            truncate=truncate, prompt_name=prompt_name)
        return [dict(zip(r.indices, r.values)) for r in response.results]

    def embed_sparse_response(self, inputs, *, model="", top_k=0,
                              threshold=0.0, truncate=None, prompt_name=""):
        """The EmbedSparseResponse message for `inputs` (as embed_sparse;
        an input is a text, raw bytes or token ids)."""
        if isinstance(inputs, (str, bytes)):
            inputs = [inputs]
        request = pb2.EmbedSparseRequest(
            model=model, inputs=[_input(i) for i in inputs], top_k=top_k,
            threshold=threshold, prompt_name=prompt_name)
        if truncate is not None:
            request.truncate = truncate
        return self._call(self._stub.EmbedSparse, request)

    def diagnose(self, text=None, *, ids=None, model="", probes=(),
                 attention_maps=False, **fields):
        """The DiagnoseResponse message, plus numpy views of its tensors:
        returns (response, arrays) where arrays maps "attention_maps",
        "gram", "relativity" and "bias" to the tensors that are present.
        `probes` names the probes to run (permutation, shift, structure,
        attention_stats, extrapolation; empty: the server's default set);
        other DiagnoseRequest fields go in `fields`."""
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
            if probe not in ("permutation", "shift", "structure",
                             "attention_stats", "extrapolation"):
                raise ValueError(f"unknown probe {probe!r}")
            setattr(request, probe, True)
        response = self._call(self._stub.Diagnose, request)
        arrays = {}
        tensors = [("attention_maps", response.attention_maps)]
        tensors += [(name, getattr(response.structure, name))
                    for name in ("gram", "relativity", "bias")]
        for name, tensor in tensors:
            # An empty Tensor message (no dtype, shape or data) is absent.
            if tensor.dtype != pb2.DTYPE_UNSPECIFIED or tensor.data:
                arrays[name] = tensor_to_numpy(tensor)
        return response, arrays
