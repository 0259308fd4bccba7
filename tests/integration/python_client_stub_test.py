#!/usr/bin/python3
"""encoder_client's retries, typed errors, batching and merging against a
stand-in encoder.v1.EncoderService (a grpc server in this process, which
fails calls on cue and counts them), imported from the source tree:

- Overloaded: RESOURCE_EXHAUSTED twice then OK succeeds on the third
  attempt, waiting at least the retry-after the server's trailing metadata
  gave; with fewer retries the Overloaded error carries .retry_after; a
  negative grpc-retry-pushback-ms stops retries; a request too large
  (RESOURCE_EXHAUSTED "over the send limit") is RequestTooLarge and never
  retried;
- Unavailable: UNAVAILABLE twice then OK succeeds; DEADLINE_EXCEEDED is
  Unavailable but not retried;
- every status code maps to its error class, with .code and the message;
- a bearer token is sent as the server expects it, and its absence is
  Unauthenticated;
- batching: a server taking at most 5 inputs per request gets requests of
  at most 5 once the client has read its first refusal, never more than
  max_concurrency at once, and results come back in order (encode,
  classify, encode_sparse, tokenize); rerank over more documents than a
  request takes ranks them together (top_n, keep_order);
- a call whose inputs need several requests fails with the error of the
  one that failed, while the others are in flight (Client and
  AsyncClient);
- a server whose ListModels reports its per-request limit gets requests
  within it from the first (asked once per client); one that does not
  answer ListModels is learned from as above;
- AsyncClient: the same retry path, and its semaphore bounding the calls
  in flight across coroutines.

Usage: python_client_stub_test.py --source-dir DIR
"""
import argparse
import asyncio
import concurrent.futures
import os
import sys
import threading
import time
import unittest

import grpc
import numpy as np

ARGS = None
DIM = 4
SERVICE = "encoder.v1.EncoderService"
# How long a request with a SLOW text takes: a call that cancels it must
# return well before (on a loaded machine, too).
SLOW_S = 3.0


class StandIn:
    """The stand-in server. `script` lists what the next calls get: "ok",
    or (code, message, trailing metadata); when it is empty calls succeed.
    `limit` refuses requests of more inputs, as the real server does."""

    def __init__(self, pb2):
        self.pb2 = pb2
        self.lock = threading.Lock()
        self.reset()
        handlers = {
            "Embed": self._unary(self.embed, pb2.EmbedRequest),
            "Rerank": self._unary(self.rerank, pb2.RerankRequest),
            "Classify": self._unary(self.classify, pb2.ClassifyRequest),
            "EmbedSparse": self._unary(self.sparse, pb2.EmbedSparseRequest),
            "Tokenize": self._unary(self.tokenize, pb2.TokenizeRequest),
            "ListModels": self._unary(self.list_models,
                                      pb2.ListModelsRequest),
        }
        self.server = grpc.server(
            concurrent.futures.ThreadPoolExecutor(max_workers=16))
        self.server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler(SERVICE, handlers),))
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        self.server.start()

    def reset(self, script=(), limit=None, token=None, delay_s=0.0,
              advertise=False):
        """`advertise`: ListModels reports `limit` (else the call is
        UNIMPLEMENTED, as from a server that predates it)."""
        with self.lock:
            self.advertise = advertise
            self.script = list(script)
            self.limit = limit
            self.token = token
            self.delay_s = delay_s
            self.calls = []  # (method, number of inputs)
            self.in_flight = 0
            self.max_in_flight = 0

    def settle(self, quiet_s=0.3, timeout_s=10.0):
        """Waits until no call is in flight and none has arrived for
        quiet_s: calls a test cancelled may still reach the handlers after
        it ended, and must not take the next test's script."""
        deadline = time.monotonic() + timeout_s
        seen, since = -1, time.monotonic()
        while time.monotonic() < deadline:
            with self.lock:
                count, busy = len(self.calls), self.in_flight
            if count != seen or busy:
                seen, since = count, time.monotonic()
            elif time.monotonic() - since >= quiet_s:
                return
            time.sleep(0.02)
        raise AssertionError("the stand-in server did not settle")

    @staticmethod
    def _unary(fn, request_type):
        return grpc.unary_unary_rpc_method_handler(
            fn, request_deserializer=request_type.FromString,
            response_serializer=lambda m: m.SerializeToString())

    def _enter(self, method, n, context):
        """Records the call and applies the script, the token and the
        limit; aborts the call when one of them says so."""
        with self.lock:
            self.calls.append((method, n))
            step = self.script.pop(0) if self.script else "ok"
            token, limit = self.token, self.limit
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if self.delay_s:
                time.sleep(self.delay_s)
            metadata = dict(context.invocation_metadata())
            if token is not None and \
                    metadata.get("authorization") != f"Bearer {token}":
                context.abort(grpc.StatusCode.UNAUTHENTICATED,
                              "missing or wrong bearer token")
            if step != "ok":
                code, message, trailing = step
                if trailing:
                    context.set_trailing_metadata(trailing)
                context.abort(code, message)
            if limit is not None and n > limit:
                what = {"Rerank": "documents"}.get(method, "inputs")
                if method == "Tokenize":
                    message = f"{n} texts in one request; at most {limit}"
                else:
                    message = (f"request has {n} {what}; at most {limit} "
                               "per request (--max-inputs-per-request)")
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, message)
        finally:
            with self.lock:
                self.in_flight -= 1

    def _text(self, item):
        return item.text if item.WhichOneof("content") == "text" else \
            item.text_bytes.decode()

    def embed(self, request, context):
        self._enter("Embed", len(request.inputs), context)
        texts = [self._text(item) for item in request.inputs]
        if "FAIL" in texts:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                          f"inputs[{texts.index('FAIL')}] is refused")
        if any(t.startswith("SLOW") for t in texts):
            time.sleep(SLOW_S)
        response = self.pb2.EmbedResponse(model="stand-in")
        for item in request.inputs:
            text = self._text(item)
            # A vector that names its text: [len, first char, 1, 0].
            values = np.array([len(text), ord(text[0]) if text else 0, 1, 0],
                              dtype="<f4")
            result = response.results.add()
            result.pooled.shape.append(DIM)
            result.pooled.dtype = self.pb2.DTYPE_FLOAT32
            result.pooled.data = values.tobytes()
        return response

    def rerank(self, request, context):
        self._enter("Rerank", len(request.documents), context)
        results = [(i, float(len(d)), d) for i, d in
                   enumerate(request.documents)]
        if not request.keep_order:
            results.sort(key=lambda r: -r[1])
        if request.top_n:
            results = results[:request.top_n]
        response = self.pb2.RerankResponse()
        for index, score, document in results:
            response.results.add(index=index, score=score,
                                 document=document if
                                 request.return_documents else "")
        return response

    def classify(self, request, context):
        self._enter("Classify", len(request.inputs), context)
        response = self.pb2.ClassifyResponse()
        for item in request.inputs:
            result = response.results.add()
            result.labels.add(label=item.text + "|" + item.text_pair,
                              score=0.9)
        return response

    def sparse(self, request, context):
        self._enter("EmbedSparse", len(request.inputs), context)
        response = self.pb2.EmbedSparseResponse()
        for item in request.inputs:
            response.results.add(indices=[len(self._text(item))],
                                 values=[1.5])
        return response

    def list_models(self, request, context):
        with self.lock:
            self.calls.append(("ListModels", 0))
            advertise, limit = self.advertise, self.limit
        if not advertise:
            context.abort(grpc.StatusCode.UNIMPLEMENTED, "ListModels")
        return self.pb2.ListModelsResponse(
            default_model="stand-in", max_inputs_per_request=limit or 0,
            max_tokenize_texts_per_request=limit or 0)

    def tokenize(self, request, context):
        self._enter("Tokenize", len(request.texts), context)
        response = self.pb2.TokenizeResponse()
        for text in request.texts:
            response.encodings.add(ids=[len(text)], tokens=[text])
        return response


def overloaded(message="queue full: 1 sequences queued + 1 requested > "
               "--max-queued-sequences=1; retry with backoff", trailing=()):
    return (grpc.StatusCode.RESOURCE_EXHAUSTED, message, tuple(trailing))


def unavailable():
    return (grpc.StatusCode.UNAVAILABLE, "models are still loading; retry "
            "shortly", ())


class StubTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        sys.path.insert(0, os.path.join(ARGS.source_dir, "client", "python"))
        import encoder_client
        cls.ec = encoder_client
        cls.stand_in = StandIn(encoder_client.pb2)
        cls.target = f"127.0.0.1:{cls.stand_in.port}"

    @classmethod
    def tearDownClass(cls):
        cls.stand_in.server.stop(None)

    def tearDown(self):
        self.stand_in.settle()

    def client(self, **options):
        options.setdefault("backoff", 0.01)
        return self.ec.Client(self.target, timeout=30, **options)

    def attempts(self, method="Embed"):
        return sum(1 for m, _ in self.stand_in.calls if m == method)

    def test_overloaded_twice_then_ok(self):
        self.stand_in.reset([overloaded(trailing=[("retry-after", "0.2")]),
                             overloaded(trailing=[("retry-after", "0.2")])])
        with self.client(retries=3) as client:
            t0 = time.monotonic()
            vector = client.encode("abc")
            elapsed = time.monotonic() - t0
        np.testing.assert_array_equal(vector, [3, ord("a"), 1, 0])
        self.assertEqual(self.attempts(), 3)
        self.assertGreaterEqual(elapsed, 0.4)  # two waits of retry-after

    def test_overloaded_past_the_retries(self):
        self.stand_in.reset([overloaded(trailing=[("retry-after", "0.05")])]
                            * 5)
        with self.client(retries=1) as client:
            with self.assertRaises(self.ec.Overloaded) as caught:
                client.encode(["abc"])
        error = caught.exception
        self.assertEqual(self.attempts(), 2)
        self.assertEqual(error.code, grpc.StatusCode.RESOURCE_EXHAUSTED)
        self.assertEqual(error.retry_after, 0.05)
        self.assertIn("queue full", error.message)
        self.assertIsInstance(error.__cause__, grpc.RpcError)
        # No retry-after: exponential backoff alone; retries=0: one call.
        self.stand_in.reset([overloaded()] * 5)
        with self.client(retries=0) as client:
            with self.assertRaises(self.ec.Overloaded) as caught:
                client.encode("abc")
        self.assertIsNone(caught.exception.retry_after)
        self.assertEqual(self.attempts(), 1)

    def test_retry_pushback(self):
        self.stand_in.reset([overloaded(trailing=[("grpc-retry-pushback-ms",
                                                   "-1")])] * 3)
        with self.client(retries=3) as client:
            with self.assertRaises(self.ec.Overloaded):
                client.encode("abc")
        self.assertEqual(self.attempts(), 1)
        self.stand_in.reset([overloaded(trailing=[("grpc-retry-pushback-ms",
                                                   "150")])])
        with self.client(retries=3) as client:
            t0 = time.monotonic()
            client.encode("abc")
            self.assertGreaterEqual(time.monotonic() - t0, 0.15)
        self.assertEqual(self.attempts(), 2)

    def test_request_too_large_is_not_retried(self):
        self.stand_in.reset([overloaded(
            "the response would be about 99999999 bytes, over the send "
            "limit of 67108864 bytes (--max-send-message-bytes); ask for "
            "fewer attention layers")] * 3)
        with self.client(retries=3) as client:
            with self.assertRaises(self.ec.RequestTooLarge) as caught:
                client.encode("abc")
        self.assertIsInstance(caught.exception, self.ec.InvalidInput)
        self.assertNotIsInstance(caught.exception, self.ec.Overloaded)
        self.assertEqual(self.attempts(), 1)

    def test_unavailable_twice_then_ok(self):
        self.stand_in.reset([unavailable(), unavailable()])
        with self.client(retries=2) as client:
            self.assertEqual(client.encode(["ab", "c"]).shape, (2, DIM))
        self.assertEqual(self.attempts(), 3)
        self.stand_in.reset([unavailable()] * 3)
        with self.client(retries=1) as client:
            with self.assertRaises(self.ec.Unavailable):
                client.encode("abc")
        self.assertEqual(self.attempts(), 2)
        self.stand_in.reset([(grpc.StatusCode.DEADLINE_EXCEEDED, "late",
                              ())] * 3)
        with self.client(retries=3) as client:
            with self.assertRaises(self.ec.Unavailable) as caught:
                client.encode("abc")
        self.assertEqual(caught.exception.code,
                         grpc.StatusCode.DEADLINE_EXCEEDED)
        self.assertEqual(self.attempts(), 1)

    def test_codes_map_to_error_classes(self):
        ec = self.ec
        table = [("NOT_FOUND", ec.ModelNotFound),
                 ("INVALID_ARGUMENT", ec.InvalidInput),
                 ("OUT_OF_RANGE", ec.InvalidInput),
                 ("FAILED_PRECONDITION", ec.InvalidInput),
                 ("UNAUTHENTICATED", ec.Unauthenticated),
                 ("PERMISSION_DENIED", ec.Unauthenticated),
                 ("INTERNAL", ec.EncoderError),
                 ("UNIMPLEMENTED", ec.EncoderError)]
        for name, cls in table:
            code = getattr(grpc.StatusCode, name)
            self.stand_in.reset([(code, f"said {name}", ())] * 3)
            with self.client(retries=3) as client:
                with self.assertRaises(cls) as caught:
                    client.encode("abc")
            error = caught.exception
            self.assertEqual(type(error), cls, name)
            self.assertEqual(error.code, code)
            self.assertEqual(error.message, f"said {name}")
            self.assertEqual(str(error), f"{name}: said {name}")
            self.assertEqual(self.attempts(), 1, name)

    def test_bearer_token(self):
        self.stand_in.reset(token="s3cret")
        with self.client(token="s3cret") as client:
            self.assertEqual(client.encode("abc").shape, (DIM,))
        with self.client() as client:
            with self.assertRaises(self.ec.Unauthenticated):
                client.encode("abc")

    def test_batches_past_the_limit_in_order(self):
        texts = [chr(ord("a") + i % 26) * (1 + i % 7) for i in range(53)]
        self.stand_in.reset(limit=5, delay_s=0.02)
        with self.client(max_concurrency=3) as client:
            vectors = client.encode(texts, batch_size=20)
            sizes = [n for _, n in self.stand_in.calls]
            # The refused first requests (of batch_size), then requests of
            # at most 5 that hold every input once.
            self.assertEqual(sorted(n for n in sizes if n > 5),
                             [13, 20, 20], sizes)
            self.assertEqual(sum(n for n in sizes if n <= 5), 53, sizes)
            self.assertLessEqual(self.stand_in.max_in_flight, 3)
            want = np.array([[len(t), ord(t[0]), 1, 0] for t in texts],
                            dtype=np.float32)
            np.testing.assert_array_equal(vectors, want)
            # Learned: the next call sends requests of 5 at once.
            self.stand_in.reset(limit=5)
            client.encode(texts, batch_size=20)
            self.assertEqual(max(n for _, n in self.stand_in.calls), 5)
            self.assertEqual(sum(n for _, n in self.stand_in.calls), 53)

            self.stand_in.reset(limit=5)
            labels = client.classify(texts[:12])
            self.assertEqual([r[0][0] for r in labels],
                             [t + "|" for t in texts[:12]])
            self.assertEqual(client.classify(("a", "b"))[0][0], "a|b")
            self.assertEqual(client.classify("a")[0][0], "a|")
            sparse = client.encode_sparse(texts[:12])
            self.assertEqual(sparse, [{len(t): 1.5} for t in texts[:12]])
            self.assertEqual(client.encode_sparse("abc"), {3: 1.5})
            tokens = client.tokenize(texts[:12])
            self.assertEqual([t["tokens"] for t in tokens],
                             [[t] for t in texts[:12]])
            self.assertEqual(client.tokenize("abcd")["ids"].tolist(), [4])

    def test_limit_read_from_list_models(self):
        texts = [chr(ord("a") + i % 26) * (1 + i % 7) for i in range(53)]
        self.stand_in.reset(limit=5, advertise=True)
        with self.client(max_concurrency=3) as client:
            vectors = client.encode(texts, batch_size=20)
            calls = list(self.stand_in.calls)
            # Asked once, first; then no request over the limit, so no
            # refusal to learn from.
            self.assertEqual(calls[0], ("ListModels", 0))
            sizes = [n for m, n in calls if m == "Embed"]
            self.assertLessEqual(max(sizes), 5, sizes)
            self.assertEqual(sum(sizes), 53)
            np.testing.assert_array_equal(vectors[:, 0],
                                          [len(t) for t in texts])
            tokens = client.tokenize(texts[:12])
            self.assertEqual(len(tokens), 12)
            self.assertEqual(
                sum(1 for m, _ in self.stand_in.calls if m == "ListModels"),
                1)
            self.assertLessEqual(
                max(n for m, n in self.stand_in.calls if m == "Tokenize"), 5)

        async def run():
            async with self.ec.AsyncClient(self.target,
                                           max_concurrency=3) as client:
                return await client.encode(texts, batch_size=20)

        self.stand_in.reset(limit=5, advertise=True)
        vectors = asyncio.run(run())
        self.assertEqual(self.stand_in.calls[0], ("ListModels", 0))
        self.assertLessEqual(
            max(n for m, n in self.stand_in.calls if m == "Embed"), 5)
        self.assertEqual(vectors.shape, (53, DIM))

    def test_a_failed_request_fails_the_call(self):
        # Longest first, two a request: the slow pair goes first, the
        # failing pair second and fails while the first is in flight.
        texts = ["b", "SLOW-long-text-x", "FAIL", "SLOW-long-text-y", "c",
                 "d"]
        self.stand_in.reset()
        with self.client(max_concurrency=3) as client:
            with self.assertRaises(self.ec.InvalidInput) as caught:
                client.encode(texts, batch_size=2)
        self.assertIn("is refused", caught.exception.message)

        async def run():
            async with self.ec.AsyncClient(self.target,
                                           max_concurrency=3) as client:
                await client.encode(texts, batch_size=2)

        t0 = time.monotonic()
        with self.assertRaises(self.ec.InvalidInput):
            asyncio.run(run())
        # The slow request in flight was cancelled, not waited for.
        self.assertLess(time.monotonic() - t0, SLOW_S / 2)

    def test_rerank_past_the_limit(self):
        documents = ["x" * n for n in (3, 9, 1, 7, 7, 2, 8, 5, 4, 6, 10)]
        self.stand_in.reset(limit=3)
        with self.client(max_concurrency=2) as client:
            top = client.rerank("q", documents, top_n=4,
                                return_documents=True)
            self.assertEqual([r["index"] for r in top], [10, 1, 6, 3])
            self.assertEqual([r["score"] for r in top], [10, 9, 8, 7])
            self.assertEqual([r["document"] for r in top],
                             [documents[i] for i in (10, 1, 6, 3)])
            reranks = [n for m, n in self.stand_in.calls if m == "Rerank"]
            # The first, of all 11, was refused; it told the limit.
            self.assertEqual(reranks[0], 11)
            self.assertLessEqual(max(reranks[1:]), 3)
            ranked = client.rerank("q", documents)
            self.assertEqual(sorted(r["index"] for r in ranked),
                             list(range(len(documents))))
            self.assertEqual([r["score"] for r in ranked],
                             sorted((len(d) for d in documents),
                                    reverse=True))
            kept = client.rerank("q", documents, keep_order=True)
            self.assertEqual([r["index"] for r in kept],
                             list(range(len(documents))))
            self.stand_in.reset()  # no limit: one request, ranked there
            self.assertEqual(len(client.rerank("q", documents[:3],
                                               top_n=2)), 2)

    def test_async_client(self):
        ec = self.ec
        self.stand_in.reset([overloaded(trailing=[("retry-after", "0.1")]),
                             overloaded(trailing=[("retry-after", "0.1")])])

        async def retry():
            async with ec.AsyncClient(self.target, retries=3,
                                      backoff=0.01) as client:
                return await client.encode("abc")

        t0 = time.monotonic()
        vector = asyncio.run(retry())
        self.assertGreaterEqual(time.monotonic() - t0, 0.2)
        np.testing.assert_array_equal(vector, [3, ord("a"), 1, 0])
        self.assertEqual(self.attempts(), 3)

        self.stand_in.reset([overloaded()] * 5)

        async def give_up():
            async with ec.AsyncClient(self.target, retries=1,
                                      backoff=0.01) as client:
                await client.encode("abc")

        with self.assertRaises(ec.Overloaded):
            asyncio.run(give_up())
        self.assertEqual(self.attempts(), 2)

        texts = [f"t{i}" for i in range(40)]
        self.stand_in.reset(limit=5, delay_s=0.02)

        async def bounded():
            async with ec.AsyncClient(self.target,
                                      max_concurrency=3) as client:
                return await asyncio.gather(
                    client.encode(texts, batch_size=4),
                    client.encode(texts[::-1], batch_size=4),
                    client.rerank("q", texts, top_n=3),
                    client.classify(texts[:7]))

        forward, backward, top, labels = asyncio.run(bounded())
        self.assertLessEqual(self.stand_in.max_in_flight, 3)
        np.testing.assert_array_equal(forward, backward[::-1])
        self.assertEqual(forward[:, 0].tolist(), [len(t) for t in texts])
        self.assertEqual([r["score"] for r in top], [3, 3, 3])
        self.assertEqual(len(labels), 7)


def main():
    global ARGS
    parser = argparse.ArgumentParser()
    parser.add_argument("--source-dir", required=True)
    ARGS, rest = parser.parse_known_args()
    unittest.main(argv=[sys.argv[0], *rest], verbosity=2)


if __name__ == "__main__":
    main()
