"""AsyncClient: Client's methods as coroutines, on grpc.aio."""

from __future__ import annotations

import asyncio

from typing import (Any, Dict, Iterable, List, Optional, Sequence,
                    Union)

import grpc
import grpc.aio

from . import _common
from ._common import ClassifyInput, Input
from . import _requests as rq
from . import pb2, pb2_grpc
from ._channel import bearer_metadata, channel_settings
from .errors import EncoderError, InvalidInput, from_rpc_error


class AsyncClient:
    """Client's methods as coroutines, for asyncio programs:

        async with AsyncClient("127.0.0.1:50051") as client:
            vectors = await client.encode(["first text", "second text"])

    Same arguments, results, batching, retries and errors as Client. At
    most `max_concurrency` calls of one AsyncClient are in flight at once,
    whichever coroutines make them (a semaphore); the others wait their
    turn. The channel opens on the first call, in the running event loop:
    use one AsyncClient within one event loop, and close it (await
    client.close(), or `async with`) before that loop ends."""

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
        """As Client's."""
        self._credentials, self._options = channel_settings(
            grpc, target, tls=tls, root_certificates=root_certificates,
            private_key=private_key, certificate_chain=certificate_chain,
            max_receive_message_bytes=max_receive_message_bytes,
            options=options)
        self.target = target
        self._timeout = timeout
        self._metadata = bearer_metadata(token)
        self._max_concurrency = _common.check_concurrency(max_concurrency)
        self._retry = _common.RetryPolicy(retries, backoff, max_backoff)
        # As Client's: from ListModels, else from refusals.
        self._limits: Dict[str, int] = {}
        self._limits_asked = False
        self._channel = None
        self._stub = None
        self._semaphore = None

    def _open(self):
        if self._channel is None:
            if self._credentials is not None:
                self._channel = grpc.aio.secure_channel(
                    self.target, self._credentials, options=self._options)
            else:
                self._channel = grpc.aio.insecure_channel(
                    self.target, options=self._options)
            self._stub = pb2_grpc.EncoderServiceStub(self._channel)
            self._semaphore = asyncio.Semaphore(self._max_concurrency)
        return self._stub

    async def close(self):
        """Closes the channel (calls in flight are cancelled)."""
        if self._channel is not None:
            channel, self._channel = self._channel, None
            await channel.close()

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        await self.close()

    async def _call(self, method, request):
        """One call with retries; failures as typed errors."""
        stub_method = getattr(self._open(), method)
        attempt = 0
        while True:
            try:
                async with self._semaphore:
                    return await stub_method(request, timeout=self._timeout,
                                             metadata=self._metadata)
            except grpc.RpcError as rpc_error:
                error = from_rpc_error(rpc_error)
                delay = self._retry.delay(attempt, error)
                if delay is None:
                    raise error from rpc_error
            await asyncio.sleep(delay)
            attempt += 1

    async def _ask_limits(self):
        """As Client._ask_limits."""
        if self._limits_asked:
            return
        self._limits_asked = True
        try:
            response = await self._call("ListModels", pb2.ListModelsRequest())
        except EncoderError:
            return
        for method, limit in _common.limits_from_list_models(
                response).items():
            self._limits.setdefault(method, limit)

    async def _batched(self, method, items, batch_size, run, concat,
                       progress=None):
        """As Client._batched, with tasks."""
        if len(items) > 1:
            await self._ask_limits()
        size = _common.request_size(batch_size, self._limits.get(method))

        async def run_part(part):
            limit = self._limits.get(method)
            if limit is not None and len(part) > limit:
                # Learned while this part waited: split before sending.
                return concat([await run_part(sub) for _, sub in
                               _common.split(part, limit)])
            try:
                result = await run(part)
            except InvalidInput as error:
                limit = _common.learned_limit(error, len(part))
                if limit is None:
                    raise
                self._limits[method] = limit
                return concat([await run_part(sub) for _, sub in
                               _common.split(part, limit)])
            if progress is not None:
                progress.update(len(part))
            return result

        parts = _common.split(items, size)
        if len(parts) == 1:
            return concat([await run_part(items)])
        tasks = [asyncio.ensure_future(run_part(part)) for _, part in parts]
        try:
            done, _ = await asyncio.wait(
                tasks, return_when=asyncio.FIRST_EXCEPTION)
        finally:
            # After a failure (or when this coroutine is cancelled), the
            # calls still in flight or waiting are cancelled.
            pending = [task for task in tasks if not task.done()]
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.gather(*pending, return_exceptions=True)
        failed = [task for task in tasks if task in done and
                  not task.cancelled() and task.exception()]
        if failed:
            raise failed[0].exception()
        return concat([task.result() for task in tasks])

    async def models(self):
        """The ListModelsResponse message (models, default_model,
        server_version)."""
        return await self._call("ListModels", pb2.ListModelsRequest())

    async def embed_response(self, inputs, **options):
        """The raw EmbedResponse of one Embed call; options as
        EncoderClient.embed_response's."""
        if _common.is_single_text(inputs):
            raise TypeError("inputs is a list of texts or id lists")
        return await self._call("Embed", rq.embed_request(inputs, **options))

    async def embed(self, inputs, **options):
        """Pooled embeddings [N, D] of one Embed call; options as
        EncoderClient.embed's."""
        return rq.pooled(await self.embed_response(inputs, **options))

    async def token_embeddings(self, text=None, *, ids=None, model=""):
        response = await self.embed_response(
            [rq.single_input(text, ids)], model=model, tokens=True)
        return rq.tensor_to_numpy(response.results[0].token_embeddings)

    async def attention(self, text=None, *, ids=None, model="", layers=(0,),
                        heads=(), average_heads=False):
        response = await self.embed_response(
            [rq.single_input(text, ids)], model=model,
            attention_layers=layers, attention_heads=heads,
            average_heads=average_heads)
        return rq.tensor_to_numpy(response.results[0].attention)

    async def hidden_states(self, text=None, *, ids=None, model="",
                            layers=(-1,), pooled=False):
        response = await self.embed_response(
            [rq.single_input(text, ids)], model=model, hidden_layers=layers,
            pool_hidden=pooled)
        return rq.tensor_to_numpy(response.results[0].hidden_states)

    async def encode(
            self, sentences: Union[Input, Iterable[Input]], *,
            model: str = "", batch_size: Optional[int] = None,
            normalize: Optional[bool] = None,
            dimensions: Optional[int] = None,
            prompt_name: Optional[str] = None, prompt: Optional[str] = None,
            convert_to_numpy: bool = True, convert_to_tensor: bool = False,
            truncate: Optional[bool] = None, show_progress_bar: bool = False,
            device: Any = None, normalize_embeddings: Optional[bool] = None,
            truncate_dim: Optional[int] = None) -> Any:
        """As Client.encode."""
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

        async def run(part):
            request = rq.embed_request(part, model=model, truncate=truncate,
                                       **options)
            return rq.pooled(await self._call("Embed", request))

        progress = _common.Progress(len(plan.sent), show_progress_bar)
        try:
            vectors = await self._batched("Embed", plan.sent, batch_size,
                                          run, _common.concat_arrays,
                                          progress)
        finally:
            progress.close()
        return plan.finish(vectors)

    async def encode_sparse(
            self, inputs: Union[Input, Iterable[Input]], *, model: str = "",
            top_k: int = 0, threshold: float = 0.0,
            truncate: Optional[bool] = None,
            prompt_name: Optional[str] = None, prompt: Optional[str] = None,
            batch_size: Optional[int] = None
    ) -> Union[Dict[int, float], List[Dict[int, float]]]:
        """As Client.encode_sparse."""
        single = _common.is_single_text(inputs)
        items = [inputs] if single else list(inputs)
        if not items:
            return []

        async def run(part):
            request = rq.sparse_request(
                part, model=model, top_k=top_k, threshold=threshold,
                truncate=truncate, prompt_name=prompt_name, prompt=prompt)
            return rq.sparse_results(await self._call("EmbedSparse", request))

        results = await self._batched(
            "EmbedSparse", items, _common.check_batch_size(batch_size), run,
            _common.concat_lists)
        return results[0] if single else results

    async def classify(
            self, inputs: Union[ClassifyInput, Iterable[ClassifyInput]], *,
            model: str = "", raw_scores: bool = False,
            truncate: Optional[bool] = None,
            truncation_side: Optional[str] = None,
            batch_size: Optional[int] = None) -> list:
        """As Client.classify."""
        single = _common.single_classify_input(inputs)
        items = [inputs] if single else list(inputs)
        if not items:
            return []

        async def run(part):
            request = rq.classify_request(
                part, model=model, raw_scores=raw_scores, truncate=truncate,
                truncation_side=truncation_side)
            return rq.classify_results(await self._call("Classify", request))

        results = await self._batched(
            "Classify", items, _common.check_batch_size(batch_size), run,
            _common.concat_lists)
        return results[0] if single else results

    async def rerank(
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
        """As Client.rerank."""
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
            await self._ask_limits()
        size = _common.request_size(batch_size, self._limits.get("Rerank"))
        if size is None or size >= len(documents):
            request = rq.rerank_request(query, documents, top_n=top_n,
                                        keep_order=keep_order, **options)
            try:
                return rq.rerank_results(await self._call("Rerank", request),
                                         **results_options)
            except InvalidInput as error:
                limit = _common.learned_limit(error, len(documents))
                if limit is None:
                    raise
                self._limits["Rerank"] = limit

        async def run(indices):  # consecutive places in documents
            request = rq.rerank_request(
                query, [documents[i] for i in indices], keep_order=True,
                **options)
            return [(indices[0],
                     rq.rerank_results(await self._call("Rerank", request),
                                       **results_options))]

        parts = await self._batched("Rerank", list(range(len(documents))),
                                    batch_size, run, _common.concat_lists)
        return _common.merge_rerank(parts, keep_order=keep_order,
                                    top_n=top_n)

    async def tokenize(
            self, texts: Union[str, Iterable[str]], *, model: str = "",
            add_special_tokens: bool = True, truncate: bool = False,
            max_length: int = 0, batch_size: Optional[int] = None
    ) -> Union[Dict[str, Any], List[Dict[str, Any]]]:
        """As Client.tokenize."""
        single = isinstance(texts, str)
        items = [texts] if single else list(texts)
        if not items:
            return []

        async def run(part):
            request = rq.tokenize_request(
                part, model=model, add_special_tokens=add_special_tokens,
                truncate=truncate, max_length=max_length)
            return rq.tokenize_results(await self._call("Tokenize", request))

        results = await self._batched(
            "Tokenize", items, _common.check_batch_size(batch_size), run,
            _common.concat_lists)
        return results[0] if single else results

    async def diagnose(self, text=None, *, ids=None, model="", probes=(),
                       attention_maps=False, **fields):
        """As EncoderClient.diagnose: (DiagnoseResponse, arrays)."""
        request = rq.diagnose_request(text, ids=ids, model=model,
                                      probes=probes,
                                      attention_maps=attention_maps, **fields)
        response = await self._call("Diagnose", request)
        return response, rq.diagnose_arrays(response)
