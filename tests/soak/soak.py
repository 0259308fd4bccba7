#!/usr/bin/python3
"""Load-and-fault soak of a real encoder-server on loopback.

Workers send a seeded mix of calls for a bounded time: valid Embed calls,
invalid ones (ids outside the vocabulary, text that is not UTF-8, bytes that
are no message), calls cancelled in flight, calls past their deadline,
requests over the memory budget or the send limit, and EmbedStream calls
with a bad request among good ones. Every call must end with the status its
kind expects; a call that does not (a wrong code, a stream that ends OK with
fewer answers than requests, no answer at all) is counted as lost. A valid
call that ran out of its 60 s deadline was answered, but late: it is counted
apart (a machine too busy for the offered load), and fails the run only
with --strict-deadlines.

Memory: calls in flight move the resident set by gigabytes from one second
to the next, so it is read at rest. The load runs in three parts (a fifth
of the time as warm-up, then two fifths, then two fifths) and stops after
each; once the server has rested (under 5% of a core) for --quiet-seconds
with no call, its resident set less the free blocks its CPU buffer cache
keeps for reuse (encoder_cpu_buffer_cache_bytes from /metrics; bounded by
--cpu-buffer-cache-bytes) is read. Early on the reading rises as malloc's
arenas and gRPC's pools reach the high-water mark of the load; a leak keeps
rising, so growth is measured over the last part: from the middle reading
to the last. RSS is also sampled every second under load.

Prints a summary and writes it as JSON with --out. Exits 1 when a call was
lost or memory at rest grew more than --max-rss-growth over the last part.

Usage: soak.py --binary build/encoder-server [--seconds 60] [--workers 6]
"""
import argparse
import collections
import json
import os
import pathlib
import random
import sys
import tempfile
import threading
import time
import urllib.request

import grpc

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "integration"))
sys.path.insert(0, str(HERE.parents[1] / "client" / "python" / "examples"))
from server_process import ServerProcess  # noqa: E402
import minimal_client  # noqa: E402

EMBED = "/encoder.v1.EncoderService/Embed"
MODELS = ["none", "sinusoidal", "learned", "rope", "alibi", "relative"]
OK = grpc.StatusCode.OK
INVALID = grpc.StatusCode.INVALID_ARGUMENT


class Soak:
    def __init__(self, pb2, pb2_grpc, channel, seed):
        self.pb2 = pb2
        self.stub = pb2_grpc.EncoderServiceStub(channel)
        self.raw_embed = channel.unary_unary(EMBED)  # bytes in, bytes out
        self.rng = random.Random(seed)
        self.lock = threading.Lock()
        self.sent = collections.Counter()
        self.answered = collections.Counter()
        self.late = 0
        self.lost = []

    def ids_request(self, model, lengths, **kw):
        r = self.pb2.EmbedRequest(model=model, **kw)
        for n in lengths:
            r.inputs.add().token_ids.ids.extend(
                self.rng.randrange(4, 9000) for _ in range(n))
        return r

    def record(self, kind, code, expected, detail=""):
        with self.lock:
            self.sent[kind] += 1
            if code in expected:
                self.answered[f"{kind}:{code.name}"] += 1
            elif code == grpc.StatusCode.DEADLINE_EXCEEDED:
                self.late += 1
            else:
                self.lost.append(f"{kind}: got {code.name} {detail}")

    def unary(self, kind, call, request, expected, timeout=60):
        try:
            call(request, timeout=timeout)
            code, detail = OK, ""
        except grpc.RpcError as e:
            code, detail = e.code(), e.details()
        self.record(kind, code, expected, detail)

    def one(self):
        rng = self.rng
        kind = rng.choice(["valid", "valid", "valid", "bad_id", "bad_utf8",
                           "garbage", "cancelled", "deadline", "oversized",
                           "stream"])
        model = rng.choice(MODELS)
        if kind == "valid":
            req = self.ids_request(model, [rng.randint(1, 64)
                                           for _ in range(rng.randint(1, 8))],
                                   return_attention_stats=rng.random() < 0.3)
            self.unary(kind, self.stub.Embed, req, {OK})
        elif kind == "bad_id":
            req = self.ids_request(model, [3])
            req.inputs[0].token_ids.ids.append(10 ** 9)
            self.unary(kind, self.stub.Embed, req, {INVALID})
        elif kind == "bad_utf8":
            req = self.pb2.EmbedRequest(model=model)
            req.inputs.add().text = "placeholder"
            raw = req.SerializeToString().replace(b"placeholder",
                                                  b"place\xffholder")
            self.unary(kind, self.raw_embed, raw, {INVALID})
        elif kind == "garbage":
            raw = bytes(rng.randrange(256) for _ in range(rng.randint(1, 64)))
            # Random bytes may happen to parse (as an empty request, say):
            # then the request is invalid in content, still INVALID_ARGUMENT.
            self.unary(kind, self.raw_embed, b"\xff\xff\xff" + raw, {INVALID})
        elif kind == "cancelled":
            req = self.ids_request(model, [200] * 16)
            future = self.stub.Embed.future(req, timeout=60)
            time.sleep(rng.random() * 0.01)
            future.cancel()
            try:
                future.result()
                code = OK
            except grpc.FutureCancelledError:
                code = grpc.StatusCode.CANCELLED
            except grpc.RpcError as e:
                code = e.code()
            self.record(kind, code, {OK, grpc.StatusCode.CANCELLED})
        elif kind == "deadline":
            req = self.ids_request(model, [400] * 32)
            self.unary(kind, self.stub.Embed, req,
                       {OK, grpc.StatusCode.DEADLINE_EXCEEDED}, timeout=0.005)
        elif kind == "oversized":
            # All layers' maps of 64 x 500 tokens: over the 64 MiB send limit.
            req = self.ids_request("rope", [500] * 64)
            req.attention.layers.extend([0, 1, 2, 3])
            self.unary(kind, self.stub.Embed, req,
                       {grpc.StatusCode.RESOURCE_EXHAUSTED})
        elif kind == "stream":
            self.stream(model)

    def stream(self, model):
        n = self.rng.randint(3, 12)
        bad = self.rng.randrange(n)
        requests = []
        for i in range(n):
            r = self.ids_request(model, [self.rng.randint(1, 32)],
                                 request_id=f"s{i}")
            if i == bad:
                r.inputs[0].token_ids.ids.append(-1)
            requests.append(r)
        try:
            answers = list(self.stub.EmbedStream(iter(requests), timeout=60))
            code, detail = OK, ""
        except grpc.RpcError as e:
            answers, code, detail = [], e.code(), e.details()
        ids = [a.request_id for a in answers]
        complete = ids == [f"s{i}" for i in range(n)]
        errors = [a.request_id for a in answers if a.HasField("error")]
        if code == OK and (not complete or errors != [f"s{bad}"]):
            code, detail = grpc.StatusCode.DATA_LOSS, f"answers {ids}"
        self.record("stream", code, {OK}, detail)


def rss_bytes(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def cpu_seconds(pid):
    """User + system CPU seconds the process has used."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cache_bytes(metrics_port):
    """encoder_cpu_buffer_cache_bytes from /metrics (0 when the cache is
    off and the series absent)."""
    url = f"http://127.0.0.1:{metrics_port}/metrics"
    with urllib.request.urlopen(url, timeout=10) as response:
        for line in response.read().decode().splitlines():
            if line.startswith("encoder_cpu_buffer_cache_bytes "):
                return int(float(line.split()[1]))
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--binary", required=True)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--workers", type=int, default=6)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--max-rss-growth", type=float, default=0.10)
    parser.add_argument("--strict-deadlines", action="store_true",
                        help="count late answers as failures")
    parser.add_argument("--sanitized", action="store_true",
                        help="report memory without bounding it (an "
                             "AddressSanitizer build's quarantine and shadow "
                             "memory)")
    parser.add_argument("--quiet-seconds", type=float, default=3,
                        help="the server's rest (under 5%% of a core) "
                             "before each memory reading")
    parser.add_argument("--out", help="write the summary as JSON here")
    parser.add_argument("--server-arg", action="append", default=[],
                        help="one more encoder-server flag (repeatable)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="soak-") as tmp:
        pb2, pb2_grpc = minimal_client.load_stubs(tmp)
        server = ServerProcess(args.binary, directory=tmp,
                               extra_args=["--http-listen=127.0.0.1:0",
                                           *args.server_arg])
        try:
            server.wait_ready(300)
            with open(server.ready_file) as f:
                metrics_port = json.load(f)["metrics_port"]
            channel = grpc.insecure_channel(
                f"127.0.0.1:{server.port}",
                options=[("grpc.max_receive_message_length", 256 << 20)])
            soaks = [Soak(pb2, pb2_grpc, channel, args.seed + w)
                     for w in range(args.workers)]
            samples = []
            start = time.monotonic()

            def sample():
                samples.append((round(time.monotonic() - start, 1),
                                rss_bytes(server.process.pid),
                                cache_bytes(metrics_port)))

            def load(seconds):
                stop = time.monotonic() + seconds
                threads = [threading.Thread(
                    target=lambda s=s: [s.one() for _ in iter(
                        lambda: time.monotonic() < stop, False)])
                    for s in soaks]
                for t in threads:
                    t.start()
                while any(t.is_alive() for t in threads):
                    sample()
                    time.sleep(1)
                for t in threads:
                    t.join()

            def quiet():
                # No call in flight, and the server itself done: calls
                # past their deadline or cancelled may still be computing
                # after their callers gave up. Once the server has used
                # under 5% of a core for --quiet-seconds, its idle trim
                # (after --malloc-trim-idle, 1s by default) has run,
                # and what it holds now is what it keeps.
                cpu = [(time.monotonic(), cpu_seconds(server.process.pid))]
                limit = time.monotonic() + 120
                while time.monotonic() < limit:
                    time.sleep(0.25)
                    now = time.monotonic()
                    cpu.append((now, cpu_seconds(server.process.pid)))
                    window = [c for c in cpu
                              if c[0] >= now - args.quiet_seconds]
                    if (now - cpu[0][0] >= args.quiet_seconds and
                            window[-1][1] - window[0][1] <
                            0.05 * args.quiet_seconds):
                        break
                sample()
                return samples[-1][1] - samples[-1][2]

            load(args.seconds / 5)
            held_after_warmup = quiet()
            load(args.seconds * 2 / 5)
            held_middle = quiet()
            load(args.seconds * 2 / 5)
            held_end = quiet()
            exit_code = server.stop()
        finally:
            if server.process.poll() is None:
                server.stop()

    sent = sum((s.sent for s in soaks), collections.Counter())
    answered = sum((s.answered for s in soaks), collections.Counter())
    lost = [line for s in soaks for line in s.lost]
    late = sum(s.late for s in soaks)
    growth = (held_end - held_middle) / held_middle
    summary = {
        "seconds": args.seconds, "workers": args.workers,
        "sent": sum(sent.values()), "sent_by_kind": dict(sent),
        "answered": sum(answered.values()),
        "answered_by_kind_and_code": dict(answered),
        "late": late, "lost": len(lost), "lost_examples": lost[:10],
        "rss_and_cache_mib_samples": [
            (t, round(r / 2 ** 20, 1), round(c / 2 ** 20, 1))
            for t, r, c in samples],
        "rss_peak_mib": round(max(r for _, r, _ in samples) / 2 ** 20, 1),
        "held_mib_after_warmup": round(held_after_warmup / 2 ** 20, 1),
        "held_mib_middle": round(held_middle / 2 ** 20, 1),
        "held_mib_end": round(held_end / 2 ** 20, 1),
        "held_growth_last_part": round(growth, 4),
        "cpu_buffer_cache_mib_end":
            round(samples[-1][2] / 2 ** 20, 1) if samples else 0,
        "server_exit_code": exit_code,
    }
    print(f"soak: {summary['sent']} calls sent, {summary['answered']} "
          f"answered as expected, {late} late (deadline exceeded), "
          f"{summary['lost']} lost; RSS at rest less the buffer cache "
          f"{summary['held_mib_after_warmup']} MiB after warm-up, "
          f"{summary['held_mib_middle']} MiB in the middle, "
          f"{summary['held_mib_end']} MiB at the end "
          f"({100 * growth:+.1f}% over the last part; cache "
          f"{summary['cpu_buffer_cache_mib_end']} MiB; peak RSS "
          f"{summary['rss_peak_mib']} MiB); "
          f"server exit {exit_code}")
    for kind, n in sorted(answered.items()):
        print(f"  {kind}: {n}")
    for line in lost[:10]:
        print(f"  LOST {line}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(summary, f, indent=1)
    if args.sanitized:
        print("  memory reported, not bounded (sanitizer build)")
    failed = (lost or (growth > args.max_rss_growth and not args.sanitized) or
              exit_code != 0 or
              (args.strict_deadlines and late))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
