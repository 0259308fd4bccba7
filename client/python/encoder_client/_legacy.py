"""EncoderClient: one call per method, every option of the protocol, and
failures as grpc.RpcError. Client (in _client) builds on it."""

import grpc

from . import _requests as rq
from . import pb2, pb2_grpc
from ._channel import bearer_metadata, channel_settings


class EncoderClient:
    """One channel to an encoder-server; use it as a context manager or
    call close(). Each method makes one call; failures raise grpc.RpcError
    with the server's status code and message (Client raises typed errors,
    retries and batches instead)."""

    def __init__(self, target="127.0.0.1:50051", *, timeout=60.0, tls=False,
                 root_certificates=None, private_key=None,
                 certificate_chain=None, token=None,
                 max_receive_message_bytes=None, options=()):
        """target: host:port. timeout: seconds per call. TLS when `tls` or
        any PEM is given (bytes, or the path of a PEM file); `token` is
        sent as a bearer token. max_receive_message_bytes: the largest
        response accepted (gRPC's default is 4 MiB; attention maps and
        hidden states of long inputs are larger). options: more gRPC
        channel arguments, (name, value) pairs."""
        credentials, channel_options = channel_settings(
            grpc, target, tls=tls, root_certificates=root_certificates,
            private_key=private_key, certificate_chain=certificate_chain,
            max_receive_message_bytes=max_receive_message_bytes,
            options=options)
        if credentials is not None:
            self._channel = grpc.secure_channel(target, credentials,
                                                options=channel_options)
        else:
            self._channel = grpc.insecure_channel(target,
                                                  options=channel_options)
        self.target = target
        self._stub = pb2_grpc.EncoderServiceStub(self._channel)
        self._timeout = timeout
        self._metadata = bearer_metadata(token)

    def close(self):
        self._channel.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _call(self, method, request):
        """One call of the RPC named `method` ("Embed", ...)."""
        return getattr(self._stub, method)(request, timeout=self._timeout,
                                           metadata=self._metadata)

    def models(self):
        """The ListModelsResponse message (models, default_model,
        server_version)."""
        return self._call("ListModels", pb2.ListModelsRequest())

    def embed_response(self, inputs, *, model="", pooling=None, normalize=None,
                       tokens=False, attention_layers=(), attention_heads=(),
                       average_heads=False, hidden_layers=(),
                       pool_hidden=False, truncate=None, prompt_name="",
                       prompt=None, chunk=False, chunk_overlap=0,
                       chunk_aggregation="mean", extrapolate=False,
                       late_chunk=False, chunk_tokens=0, return_chunks=False,
                       embedding_type="float", quantization_ranges=None,
                       project_tokens=False, dimensions=None,
                       truncation_side=None, sparse=False, sparse_top_k=0,
                       sparse_threshold=0.0, input_type=""):
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
        result.truncated_tokens says what was cut); `truncation_side`
        "right" (the default) or "left". `dimensions`: keep the first
        `dimensions` values of each pooled vector (normalized again when
        normalization is on). `sparse`: also each input's sparse vector
        (result.sparse: its `sparse_top_k` largest weights above
        `sparse_threshold`) from the same forward pass; with `tokens` and
        `project_tokens` on a BGE-M3 model, its three outputs in one
        call. `input_type` "query" or "document": a ColBERT model's
        framing (ModelInfo.colbert), which its projected tokens need."""
        if isinstance(inputs, (str, bytes)):
            raise TypeError("inputs is a list of texts or id lists")
        request = rq.embed_request(
            inputs, model=model, pooling=pooling, normalize=normalize,
            tokens=tokens, attention_layers=attention_layers,
            attention_heads=attention_heads, average_heads=average_heads,
            hidden_layers=hidden_layers, pool_hidden=pool_hidden,
            truncate=truncate, prompt_name=prompt_name, prompt=prompt,
            chunk=chunk, chunk_overlap=chunk_overlap,
            chunk_aggregation=chunk_aggregation, extrapolate=extrapolate,
            late_chunk=late_chunk, chunk_tokens=chunk_tokens,
            return_chunks=return_chunks, embedding_type=embedding_type,
            quantization_ranges=quantization_ranges,
            project_tokens=project_tokens, dimensions=dimensions,
            truncation_side=truncation_side, sparse=sparse,
            sparse_top_k=sparse_top_k, sparse_threshold=sparse_threshold,
            input_type=input_type)
        return self._call("Embed", request)

    def embed(self, inputs, *, model="", pooling=None, normalize=None,
              truncate=None, prompt_name="", prompt=None, chunk=False,
              chunk_overlap=0, chunk_aggregation="mean", extrapolate=False,
              embedding_type="float", quantization_ranges=None,
              dimensions=None):
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
                                       quantization_ranges=quantization_ranges,
                                       dimensions=dimensions)
        return rq.pooled(response)

    def embed_chunks(self, inputs, *, model="", late_chunk=False,
                     chunk_tokens=0, chunk_overlap=0):
        """Every window's vector of each input: per input a list of
        (vector [D], (token_begin, token_end), (char_begin, char_end)),
        with chunking, or late chunking when `late_chunk`."""
        response = self.embed_response(
            inputs, model=model, chunk=not late_chunk, late_chunk=late_chunk,
            chunk_tokens=chunk_tokens, chunk_overlap=chunk_overlap,
            return_chunks=True)
        return [[(rq.tensor_to_numpy(c.embedding),
                  (c.token_begin, c.token_end), (c.char_begin, c.char_end))
                 for c in r.chunk_vectors] for r in response.results]

    def token_embeddings(self, text=None, *, ids=None, model=""):
        """Token embeddings [S, D] of one input."""
        response = self.embed_response([rq.single_input(text, ids)],
                                       model=model, tokens=True)
        return rq.tensor_to_numpy(response.results[0].token_embeddings)

    def attention(self, text=None, *, ids=None, model="", layers=(0,),
                  heads=(), average_heads=False):
        """Attention maps of one input: [L, H, S, S], or [L, S, S] with
        average_heads; rows are queries, columns keys."""
        response = self.embed_response(
            [rq.single_input(text, ids)], model=model,
            attention_layers=layers, attention_heads=heads,
            average_heads=average_heads)
        return rq.tensor_to_numpy(response.results[0].attention)

    def hidden_states(self, text=None, *, ids=None, model="", layers=(-1,),
                      pooled=False):
        """Hidden states of one input after `layers` (0: the embedding
        output, -1: the last layer's, after a pre-norm model's final
        norm): [L, S, D], or [L, D] pooled like the embedding."""
        response = self.embed_response(
            [rq.single_input(text, ids)], model=model, hidden_layers=layers,
            pool_hidden=pooled)
        return rq.tensor_to_numpy(response.results[0].hidden_states)

    def tokenize(self, texts, *, model="", add_special_tokens=True,
                 truncate=False, max_length=0):
        """One dict per text: ids (int64 array), tokens (list of str),
        byte_offsets and char_offsets ([T, 2] int64 arrays),
        special_tokens_mask (bool array), truncated."""
        if isinstance(texts, str):
            raise TypeError("texts is a list of str")
        request = rq.tokenize_request(
            texts, model=model, add_special_tokens=add_special_tokens,
            truncate=truncate, max_length=max_length)
        return rq.tokenize_results(self._call("Tokenize", request))

    def rerank(self, query, documents, *, model="", top_n=0,
               keep_order=False, return_documents=False, raw_scores=False,
               truncate=None, truncation_side=None, attention_layers=(),
               attention_heads=(), average_heads=False,
               positional_probes=False, weights=None, instruction=None):
        """A cross-encoder's scores of `documents` against `query` (or a
        late-interaction model's, with its (dense, sparse, colbert)
        `weights`, FlagEmbedding's compute_score; `instruction`: a rerank
        template's, ModelInfo.rerank_template): a list
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
        request = rq.rerank_request(
            query, documents, model=model, top_n=top_n,
            keep_order=keep_order, return_documents=return_documents,
            raw_scores=raw_scores, truncate=truncate,
            truncation_side=truncation_side,
            attention_layers=attention_layers,
            attention_heads=attention_heads, average_heads=average_heads,
            positional_probes=positional_probes, weights=weights,
            instruction=instruction)
        return rq.rerank_results(
            self._call("Rerank", request), return_documents=return_documents,
            attention=bool(attention_layers),
            positional_probes=positional_probes)

    def classify(self, inputs, *, model="", raw_scores=False, truncate=None,
                 truncation_side=None):
        """Labels with scores, best first, per input: a text or a
        (text, text_pair) tuple. Returns one list of (label, score) per
        input."""
        response = self.classify_response(
            inputs, model=model, raw_scores=raw_scores, truncate=truncate,
            truncation_side=truncation_side)
        return rq.classify_results(response)

    def classify_response(self, inputs, *, model="", raw_scores=False,
                          truncate=None, truncation_side=None):
        """The ClassifyResponse message for `inputs` (as classify)."""
        if isinstance(inputs, str):
            raise TypeError("inputs is a list of str or (str, str) pairs")
        request = rq.classify_request(
            inputs, model=model, raw_scores=raw_scores, truncate=truncate,
            truncation_side=truncation_side)
        return self._call("Classify", request)

    def embed_sparse(self, inputs, *, model="", top_k=0, threshold=0.0,
                     truncate=None, prompt_name=""):
        """Sparse (SPLADE) vectors of a model whose tasks include
        "sparse": per input a dict {vocabulary id: weight} of its weights
        above `threshold`, the `top_k` largest (0: all)."""
        response = self.embed_sparse_response(
            inputs, model=model, top_k=top_k, threshold=threshold,
            truncate=truncate, prompt_name=prompt_name)
        return rq.sparse_results(response)

    def embed_sparse_response(self, inputs, *, model="", top_k=0,
                              threshold=0.0, truncate=None, prompt_name=""):
        """The EmbedSparseResponse message for `inputs` (as embed_sparse;
        an input is a text, raw bytes or token ids)."""
        if isinstance(inputs, (str, bytes)):
            inputs = [inputs]
        request = rq.sparse_request(
            inputs, model=model, top_k=top_k, threshold=threshold,
            truncate=truncate, prompt_name=prompt_name)
        return self._call("EmbedSparse", request)

    def diagnose(self, text=None, *, ids=None, model="", probes=(),
                 attention_maps=False, **fields):
        """The DiagnoseResponse message, plus numpy views of its tensors:
        returns (response, arrays) where arrays maps "attention_maps",
        "gram", "relativity" and "bias" to the tensors that are present.
        `probes` names the probes to run (permutation, shift, structure,
        attention_stats, extrapolation; empty: the server's default set);
        other DiagnoseRequest fields go in `fields`."""
        request = rq.diagnose_request(text, ids=ids, model=model,
                                      probes=probes,
                                      attention_maps=attention_maps, **fields)
        response = self._call("Diagnose", request)
        return response, rq.diagnose_arrays(response)
