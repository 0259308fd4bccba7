"""Closed-loop HTTP load on an OpenAI-style embeddings route, the same for
every server: each caller keeps one HTTP/1.1 keep-alive connection and
waits for its answer before the next request. Plain asyncio sockets (no
client library), so the client costs little CPU next to the servers.

  closed: --texts len-N.jsonl, --concurrency C callers, one text per
          request, for --duration seconds after --warmup requests each
  bulk:   --bulk FILE (one text a line), --batch texts per request,
          --in-flight requests at once, until every text is embedded

Prints one JSON object: sequences_per_s, p50_ms, p99_ms, requests, errors.
"""
import argparse
import asyncio
import json
import time
from urllib.parse import urlparse


class Conn:
    def __init__(self, host, port, path):
        self.host, self.port, self.path = host, port, path
        self.reader = self.writer = None

    async def open(self):
        self.reader, self.writer = await asyncio.open_connection(
            self.host, self.port)

    async def post(self, body):
        """One request; a kept-alive connection the server closed while
        idle (ours closes after --http-keep-alive, 2 s; uvicorn after 5 s)
        is reopened once, as an HTTP client library would."""
        if self.writer is None:
            await self.open()
            return await self._post(body)
        try:
            return await self._post(body)
        except (ConnectionError, asyncio.IncompleteReadError):
            self.writer.close()
            await self.open()
            return await self._post(body)

    async def _post(self, body):
        head = ("POST %s HTTP/1.1\r\nHost: %s:%d\r\n"
                "Content-Type: application/json\r\nContent-Length: %d\r\n"
                "\r\n" % (self.path, self.host, self.port, len(body)))
        self.writer.write(head.encode() + body)
        await self.writer.drain()
        status_line = await self.reader.readline()
        if not status_line:
            raise ConnectionError("closed")
        status = int(status_line.split()[1])
        length, chunked, close = None, False, False
        while True:
            line = await self.reader.readline()
            if line in (b"\r\n", b"\n", b""):
                break
            k, _, v = line.decode("latin-1").partition(":")
            k, v = k.strip().lower(), v.strip().lower()
            if k == "content-length":
                length = int(v)
            elif k == "transfer-encoding" and "chunked" in v:
                chunked = True
            elif k == "connection" and v == "close":
                close = True
        if chunked:
            data = b""
            while True:
                size = int((await self.reader.readline()).split(b";")[0], 16)
                if size == 0:
                    await self.reader.readline()
                    break
                data += await self.reader.readexactly(size)
                await self.reader.readline()
        else:
            data = await self.reader.readexactly(length or 0)
        if close:
            self.writer.close()
            self.writer = None
        return status, data


def percentile(sorted_ms, q):
    if not sorted_ms:
        return float("nan")
    return sorted_ms[min(len(sorted_ms) - 1, int(q * len(sorted_ms)))]


async def closed(a, url):
    texts = [json.loads(line)["text"] for line in open(a.texts)]
    stop_at = [None]
    lat, errors, seqs, warm = [], [0], [0], [0]
    statuses = {}

    async def caller(i):
        c = Conn(url.hostname, url.port, url.path)
        k = i * 7919
        for _ in range(a.warmup):
            body = json.dumps({"model": a.model,
                               "input": [texts[k % len(texts)]]}).encode()
            k += 1
            status, data = await c.post(body)
            if status != 200:
                raise RuntimeError("warm-up got HTTP %d: %s" % (status,
                                                              data[:300]))
            json.loads(data)["data"][0]["embedding"]
        warm[0] += 1
        await started.wait()
        while time.perf_counter() < stop_at[0]:
            body = json.dumps({"model": a.model,
                               "input": [texts[k % len(texts)]]}).encode()
            k += 1
            s = time.perf_counter()
            try:
                status, data = await c.post(body)
            except (ConnectionError, asyncio.IncompleteReadError) as e:
                status, data, c.writer = 0, repr(e).encode(), None
            if status != 200:
                statuses.setdefault(str(status), data[:200].decode(
                    "utf-8", "replace"))
            if status == 200:
                lat.append(1000 * (time.perf_counter() - s))
                seqs[0] += 1
            else:
                errors[0] += 1

    started = asyncio.Event()
    tasks = [asyncio.create_task(caller(i)) for i in range(a.concurrency)]
    # The clock starts for every caller at once, after all have warmed up.
    while warm[0] < a.concurrency and not any(t.done() for t in tasks):
        await asyncio.sleep(0.005)
    for t in tasks:
        if t.done() and t.exception():
            raise t.exception()
    t0 = time.perf_counter()
    stop_at[0] = t0 + a.duration
    started.set()
    await asyncio.gather(*tasks)
    elapsed = time.perf_counter() - t0
    lat.sort()
    return {"sequences_per_s": seqs[0] / elapsed, "requests": len(lat),
            "errors": errors[0], "error_examples": statuses,
            "elapsed_s": elapsed,
            "warmup_requests": a.warmup * a.concurrency,
            "p50_ms": percentile(lat, 0.5), "p99_ms": percentile(lat, 0.99)}


async def bulk(a, url):
    texts = [line.rstrip("\n") for line in open(a.bulk) if line.strip()]
    batches = [texts[i:i + a.batch] for i in range(0, len(texts), a.batch)]
    queue = list(range(len(batches)))
    queue.reverse()
    lat, done, errors = [], [0], [0]

    async def worker():
        c = Conn(url.hostname, url.port, url.path)
        while queue:
            b = queue.pop()
            body = json.dumps({"model": a.model, "input": batches[b]}).encode()
            s = time.perf_counter()
            status, data = await c.post(body)
            if status != 200:
                errors[0] += 1
                continue
            n = len(json.loads(data)["data"])
            lat.append(1000 * (time.perf_counter() - s))
            done[0] += n

    t0 = time.perf_counter()
    await asyncio.gather(*[worker() for _ in range(a.in_flight)])
    elapsed = time.perf_counter() - t0
    lat.sort()
    return {"sequences_per_s": done[0] / elapsed, "texts": done[0],
            "elapsed_s": elapsed, "errors": errors[0],
            "p50_ms": percentile(lat, 0.5), "p99_ms": percentile(lat, 0.99)}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--url", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--texts")
    p.add_argument("--concurrency", type=int, default=1)
    p.add_argument("--duration", type=float, default=10)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--bulk")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--in-flight", type=int, default=4)
    a = p.parse_args()
    url = urlparse(a.url)
    r = asyncio.run(bulk(a, url) if a.bulk else closed(a, url))
    print(json.dumps(r))


if __name__ == "__main__":
    main()
