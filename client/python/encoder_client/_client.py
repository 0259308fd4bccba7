"""Client: sentence-transformers' calling conventions over an
encoder-server, with client-side batching, bounded concurrency, retries
and typed errors."""

from __future__ import annotations

import concurrent.futures
import threading
import time

from typing import (Any, Dict, Iterable, List, Optional, Sequence,
                    Union)

import grpc

from . import _common
from ._common import ClassifyInput, Input
from . import _requests as rq
from . import pb2
from ._legacy import EncoderClient
from .errors import EncoderError, InvalidInput, from_rpc_error


class Client(EncoderClient):
    """A connection to one encoder-server (its gRPC port).

        client = Client("127.0.0.1:50051")
        vectors = client.encode(["first text", "second text"])  # [2, D]

    Methods that take many inputs (encode, encode_sparse, classify,
    rerank, tokenize) split them into requests the server accepts and keep
    up to `max_concurrency` of them in flight on a thread pool; results
    come back in the inputs' order. Every call is retried on UNAVAILABLE
    and RESOURCE_EXHAUSTED, and failures raise the typed errors of
    encoder_client.errors. The low-level methods of EncoderClient (embed,
    embed_response, attention, hidden_states, token_embeddings,
    embed_chunks, models, ...) are all here too, with the same retries and
    errors. Safe to share between threads; close() it, or use it as a
    context manager."""

    def __init__(self, target: str = "127.0.0.1:50051", *,
                 token: Optional[str] = None, tls: bool = False,
                 root_certificates: Union[bytes, str, None] = None,
                 private_key: Union[bytes, str, None] = None,
                 certificate_chain: Union[bytes, str, None] = None,
                 timeout: Optional[float] = 60.0, max_concurrency: int = 4,
                 retries: int = 3, backoff: float = 0.1,
                 max_backoff: float = 5.0,
                 max_receive_message_bytes: Optional[int] =
                 _common.DEFAULT_MAX_RECEIVE_BYTES,
                 options: Sequence[tuple] = ()) -> None:
        """target: the server's gRPC address, host:port. token: a bearer
        token sent with every call. tls: connect with TLS (implied by any
        certificate); root_certificates: PEM of the CA to trust (bytes, or a
        file's path; None: the system's roots); private_key and
        certificate_chain: the client's own, for mutual TLS. timeout:
        seconds each call (each attempt) may take. max_concurrency: calls
        one method keeps in flight at once. retries: how many times a call
        is retried after UNAVAILABLE or RESOURCE_EXHAUSTED (0: never),
        waiting backoff * 2^attempt seconds (at most max_backoff, with
        jitter) or what the server asked for. max_receive_message_bytes:
        the largest response accepted. options: more gRPC channel
        arguments, (name, value) pairs."""
        self._max_concurrency = _common.check_concurrency(max_concurrency)
        self._retry = _common.RetryPolicy(retries, backoff, max_backoff)
        # Inputs per request, per method: from ListModels, asked once
        # before the first call that has several inputs, else from the
        # server's refusals.
        self._limits: Dict[str, int] = {}
        self._limits_asked = False
        self._pool = None
        self._pool_lock = threading.Lock()
        super().__init__(target, timeout=timeout, tls=tls,
                         root_certificates=root_certificates,
                         private_key=private_key,
                         certificate_chain=certificate_chain, token=token,
                         max_receive_message_bytes=max_receive_message_bytes,
                         options=options)

    def close(self):
        """Closes the channel and the thread pool."""
        with self._pool_lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)
        super().close()

    def _call(self, method, request):
        """One call with retries; failures as typed errors."""
        stub_method = getattr(self._stub, method)
        attempt = 0
        while True:
            try:
                return stub_method(request, timeout=self._timeout,
                                   metadata=self._metadata)
            except grpc.RpcError as rpc_error:
                error = from_rpc_error(rpc_error)
                delay = self._retry.delay(attempt, error)
                if delay is None:
                    raise error from rpc_error
            time.sleep(delay)
            attempt += 1

    def _executor(self):
        with self._pool_lock:
            if self._pool is None:
                self._pool = concurrent.futures.ThreadPoolExecutor(
                    self._max_concurrency,
                    thread_name_prefix="encoder-client")
            return self._pool

    def _ask_limits(self):
        """The server's per-request limits from ListModels, once; a server
        that cannot say (an older one, a refused call) leaves them to be
        learned from refusals."""
        if self._limits_asked:
            return
        self._limits_asked = True
        try:
            response = self._call("ListModels", pb2.ListModelsRequest())
        except EncoderError:
            return
        for method, limit in _common.limits_from_list_models(
                response).items():
            self._limits.setdefault(method, limit)

    def _batched(self, method, items, batch_size, run, concat,
                 progress=None):
        """run(slice of items) over slices of at most batch_size items (and
        at most what the server takes per request, learned from its first
        refusal), up to max_concurrency at once; concat(results in order).
        """
        if len(items) > 1:
            self._ask_limits()
        size = _common.request_size(batch_size, self._limits.get(method))

        def run_part(part):
            limit = self._limits.get(method)
            if limit is not None and len(part) > limit:
                # Learned while this part waited: split before sending.
                return concat([run_part(sub) for _, sub in
                               _common.split(part, limit)])
            try:
                result = run(part)
            except InvalidInput as error:
                limit = _common.learned_limit(error, len(part))
                if limit is None:
                    raise
                self._limits[method] = limit
                return concat([run_part(sub) for _, sub in
                               _common.split(part, limit)])
            if progress is not None:
                progress.update(len(part))
            return result

        parts = _common.split(items, size)
        if len(parts) == 1:
            return concat([run_part(items)])
        futures = [self._executor().submit(run_part, part)
                   for _, part in parts]
        done, _ = concurrent.futures.wait(
            futures, return_when=concurrent.futures.FIRST_EXCEPTION)
        failed = [f for f in futures if f in done and f.exception()]
        if failed:
            for future in futures:
                future.cancel()  # those not started yet
            raise failed[0].exception()
        return concat([future.result() for future in futures])

    def encode(
            self, sentences: Union[Input, Iterable[Input]], *,
            model: str = "", batch_size: Optional[int] = None,
            normalize: Optional[bool] = None,
            dimensions: Optional[int] = None,
            prompt_name: Optional[str] = None, prompt: Optional[str] = None,
            convert_to_numpy: bool = True, convert_to_tensor: bool = False,
            truncate: Optional[bool] = None, show_progress_bar: bool = False,
            device: Any = None, normalize_embeddings: Optional[bool] = None,
            truncate_dim: Optional[int] = None) -> Any:
        """Embeddings of `sentences`, as SentenceTransformer.encode returns
        them: a str gives a 1-D float32 array [D], a list of str [N, D]
        (numpy float32, in the list's order). Also takes raw text bytes and
        lists of token ids as inputs.

        model: the served model's name ("": the server's default).
        batch_size: inputs per request (default 32, and never more than the
        server takes per request). normalize: True L2-normalizes the
        vectors, False returns them unnormalized, None does what the model
        does (sentence-transformers' Normalize module). dimensions: keep
        the first `dimensions` values of each vector (Matryoshka models),
        normalized again when normalization is on. prompt_name: one of the
        model's prompts by name (None: the model's default prompt, if any);
        prompt: a prompt text of your own, prepended to every text.
        truncate: True cuts inputs past the model's length, False refuses
        them (InvalidInput), None leaves it to the server (which truncates
        unless started otherwise). convert_to_tensor: one torch tensor
        instead (needs PyTorch), on `device` when given;
        convert_to_numpy=False: a list of 1-D torch tensors.
        show_progress_bar: a progress bar on stderr (tqdm's when installed).

        sentence-transformers' own keywords work as they do there:
        normalize_embeddings=True normalizes the final vectors (False adds
        nothing to what the model does), truncate_dim keeps the first
        truncate_dim values without normalizing again."""
        plan = _common.EncodePlan(
            sentences, normalize=normalize, dimensions=dimensions,
            prompt_name=prompt_name, prompt=prompt,
            convert_to_numpy=convert_to_numpy,
            convert_to_tensor=convert_to_tensor, device=device,
            normalize_embeddings=normalize_embeddings,
            truncate_dim=truncate_dim)
        batch_size = _common.check_batch_size(batch_size) or \
            _common.DEFAULT_BATCH_SIZE
        if not plan.items:
            return plan.finish(None)
        options = plan.request_options()

        def run(part):
            request = rq.embed_request(part, model=model, truncate=truncate,
                                       **options)
            return rq.pooled(self._call("Embed", request))

        progress = _common.Progress(len(plan.sent), show_progress_bar)
        try:
            vectors = self._batched("Embed", plan.sent, batch_size, run,
                                    _common.concat_arrays, progress)
        finally:
            progress.close()
        return plan.finish(vectors)

    def encode_sparse(
            self, inputs: Union[Input, Iterable[Input]], *, model: str = "",
            top_k: int = 0, threshold: float = 0.0,
            truncate: Optional[bool] = None,
            prompt_name: Optional[str] = None, prompt: Optional[str] = None,
            batch_size: Optional[int] = None
    ) -> Union[Dict[int, float], List[Dict[int, float]]]:
        """Sparse (SPLADE) vectors from a model whose tasks include
        "sparse": for a str a dict {vocabulary id: weight}, for a list one
        dict per input. top_k keeps the largest weights (0: all above
        threshold); threshold drops weights at or below it. batch_size:
        inputs per request (default: as many as the server takes)."""
        single = _common.is_single_text(inputs)
        items = [inputs] if single else list(inputs)
        if not items:
            return []

        def run(part):
            request = rq.sparse_request(
                part, model=model, top_k=top_k, threshold=threshold,
                truncate=truncate, prompt_name=prompt_name, prompt=prompt)
            return rq.sparse_results(self._call("EmbedSparse", request))

        results = self._batched("EmbedSparse", items,
                                _common.check_batch_size(batch_size), run,
                                _common.concat_lists)
        return results[0] if single else results

    def classify(
            self, inputs: Union[ClassifyInput, Iterable[ClassifyInput]], *,
            model: str = "", raw_scores: bool = False,
            truncate: Optional[bool] = None,
            truncation_side: Optional[str] = None,
            batch_size: Optional[int] = None) -> list:
        """A classification head's labels with scores, best first: for one
        input (a str, or a (text, text_pair) tuple) a list of
        (label, score); for a list of inputs one such list per input.
        raw_scores: the head's logits rather than its activation's scores.
        truncate / truncation_side ("right", "left"): as in encode."""
        single = _common.single_classify_input(inputs)
        items = [inputs] if single else list(inputs)
        if not items:
            return []

        def run(part):
            request = rq.classify_request(
                part, model=model, raw_scores=raw_scores, truncate=truncate,
                truncation_side=truncation_side)
            return rq.classify_results(self._call("Classify", request))

        results = self._batched("Classify", items,
                                _common.check_batch_size(batch_size), run,
                                _common.concat_lists)
        return results[0] if single else results

    def rerank(
            self, query: str, documents: Iterable[str], *, model: str = "",
            top_n: int = 0, keep_order: bool = False,
            return_documents: bool = False, raw_scores: bool = False,
            truncate: Optional[bool] = None,
            truncation_side: Optional[str] = None,
            batch_size: Optional[int] = None,
            attention_layers: Sequence[int] = (),
            attention_heads: Sequence[int] = (), average_heads: bool = False,
            positional_probes: bool = False,
            weights: Optional[Any] = None,
            instruction: Optional[str] = None) -> List[Dict[str, Any]]:
        """A cross-encoder's relevance of each document to `query` (a model
        whose tasks include "rerank"): a list of dicts with "index" (the
        document's place in `documents`), "score", "tokens", "truncated",
        "truncated_tokens" (and "document" with return_documents), best
        first unless keep_order; the best top_n only when top_n > 0.
        More documents than the server takes per request are scored in
        several requests and ranked together. attention_layers,
        attention_heads, average_heads and positional_probes: as in
        EncoderClient.rerank. weights: a late-interaction model's (dense,
        sparse, colbert) weights (ModelInfo.late_interaction: BGE-M3).
        instruction: a rerank template's instruction (ModelInfo.
        rerank_template: Qwen3-Reranker); unset: the template's own."""
        if isinstance(documents, str):
            raise TypeError("documents is a list of str")
        documents = list(documents)
        if not documents:
            return []
        options, results_options = _common.rerank_options(
            model=model, return_documents=return_documents,
            raw_scores=raw_scores, truncate=truncate,
            truncation_side=truncation_side,
            attention_layers=attention_layers,
            attention_heads=attention_heads, average_heads=average_heads,
            positional_probes=positional_probes, weights=weights,
            instruction=instruction)
        batch_size = _common.check_batch_size(batch_size)
        if len(documents) > 1:
            self._ask_limits()
        size = _common.request_size(batch_size, self._limits.get("Rerank"))
        if size is None or size >= len(documents):
            # One request: the server ranks and cuts.
            request = rq.rerank_request(query, documents, top_n=top_n,
                                        keep_order=keep_order, **options)
            try:
                return rq.rerank_results(self._call("Rerank", request),
                                         **results_options)
            except InvalidInput as error:
                limit = _common.learned_limit(error, len(documents))
                if limit is None:
                    raise
                self._limits["Rerank"] = limit

        def run(indices):  # consecutive places in documents
            request = rq.rerank_request(
                query, [documents[i] for i in indices], keep_order=True,
                **options)
            return [(indices[0],
                     rq.rerank_results(self._call("Rerank", request),
                                       **results_options))]

        parts = self._batched("Rerank", list(range(len(documents))),
                              batch_size, run, _common.concat_lists)
        return _common.merge_rerank(parts, keep_order=keep_order,
                                    top_n=top_n)

    def tokenize(
            self, texts: Union[str, Iterable[str]], *, model: str = "",
            add_special_tokens: bool = True, truncate: bool = False,
            max_length: int = 0, batch_size: Optional[int] = None
    ) -> Union[Dict[str, Any], List[Dict[str, Any]]]:
        """The model's tokenization without running it: for a str one dict,
        for a list one dict per text, with "ids" (int64 array), "tokens"
        (list of str), "byte_offsets" and "char_offsets" ([T, 2] int64
        arrays), "special_tokens_mask" (bool array) and "truncated".
        truncate cuts to max_length tokens (0: the model's length)."""
        single = isinstance(texts, str)
        items = [texts] if single else list(texts)
        if not items:
            return []

        def run(part):
            request = rq.tokenize_request(
                part, model=model, add_special_tokens=add_special_tokens,
                truncate=truncate, max_length=max_length)
            return rq.tokenize_results(self._call("Tokenize", request))

        results = self._batched("Tokenize", items,
                                _common.check_batch_size(batch_size), run,
                                _common.concat_lists)
        return results[0] if single else results
