#!/usr/bin/python3
"""Scale-out under the shipped proxy: two encoder-server replicas behind
deploy/nginx/nginx.conf (the test-local copy nginx_test.py uses), one drained
under load.

Callers send at least MIN_CALLS Embed calls through nginx from WORKERS
threads, each with its own request id, and retry a call refused with
UNAVAILABLE as encoder_client does (RETRIES times, backoff doubling from
BACKOFF_SECONDS). The retry is the client's own: the server's drain
refusal follows its initial metadata, so neither gRPC's retry policy nor
nginx (to which it is an HTTP 200) retries it. Midway, with two large
calls of its own in flight on replica 1 (sent to its port directly, on the
model the load does not use, seen accepted in its encoder_input_tokens),
replica 1 gets SIGTERM and drains (--drain-unready, then --drain-grace).
Then:

- no call is lost: every call through nginx ends OK;
- the drained replica's in-flight calls finish: the large calls sent
  before SIGTERM end OK, its access log has them OK after the signal, and
  it logs no call cut off (only OK, and UNAVAILABLE for calls refused while
  draining, which the callers retried elsewhere); it exits 0 before its
  grace ends;
- the other replica takes the load: every call started after replica 1
  exited is in replica 2's access log, OK;
- the queue-time metric follows the load on both replicas: the
  encoder_queue_duration_seconds histogram's count grows on each while
  both serve, with a positive mean queue time per sequence (the HPA's
  signal: the sum's increase over the count's); it counts the sequences
  each replica's access log shows served (replica 2: exactly, over the
  whole run; replica 1: at its last scrape, give or take the calls then in
  flight); on replica 2 it grows by at least every call sent after the
  exit, and stops when the load stops.
"""

import json
import os
import random
import signal
import threading
import time
from datetime import datetime

import grpc

import deploy_util as du

WORKERS = 8
MIN_CALLS = 2000
# Calls through nginx before the drain starts, and after replica 1 exited.
CALLS_BEFORE_DRAIN = 600
CALLS_AFTER_EXIT = 600
# The server's default, as docker-compose.yml has it.
DRAIN_GRACE_SECONDS = 20
DRAIN_UNREADY_SECONDS = 1.0
# encoder_client's backoff (0.1 s doubling, with jitter) with twice its
# default 3 retries: between 3.2 and 6.3 s of waits, longer than the drain
# here lasts (the unready second, then the calls in flight). nginx keeps
# sending calls to the draining replica until it exits (to nginx its
# UNAVAILABLE is an HTTP 200), one in two, so a caller whose retries end
# sooner can see only refusals.
RETRIES = 6
DEFAULT_RETRIES = 3
BACKOFF_SECONDS = 0.1
# The large calls held in flight on replica 1 when it gets SIGTERM, on the
# model the load does not use (the load's is the default, sinusoidal).
LARGE_MODEL = "rope"
LARGE_INPUTS = 16
LARGE_TOKENS = 128


class Load(du.Load):
    """Worker threads sending Embed calls through nginx until stopped,
    retrying UNAVAILABLE; records (request id, start, end, final code,
    attempts) of every call."""

    def __init__(self, pb2, stub):
        super().__init__(WORKERS, join_timeout=40)
        self.pb2 = pb2
        self.stub = stub

    def call(self, i):
        request_id = f"load-{i}"
        start = time.time()
        code, attempts = self.with_retries(i, request_id)
        return request_id, start, time.time(), code, attempts

    def with_retries(self, i, request_id):
        """(final code, attempts) of one call with its retries."""
        attempt = 0
        while True:
            attempt += 1
            try:
                self.stub.Embed(du.embed_request(self.pb2, i), timeout=30,
                                metadata=[("x-request-id", request_id)])
                return "OK", attempt
            except grpc.RpcError as e:
                if (e.code() != grpc.StatusCode.UNAVAILABLE or
                        attempt > RETRIES):
                    return f"{e.code().name}: {e.details()}", attempt
            ceiling = BACKOFF_SECONDS * 2 ** (attempt - 1)
            time.sleep(ceiling / 2 + random.random() * ceiling / 2)

    def count(self, since=None):
        with self.lock:
            return sum(1 for r in self.results
                       if since is None or r[1] > since)


def scrape(metrics_port):
    """The queue-time histogram's count and sum and the large calls'
    accepted inputs; `time`: when the request was sent (every call logged
    before it is in the counts)."""
    sent = time.time()
    samples = du.scrape_metrics(metrics_port)
    return {
        "time": sent,
        "queue_count": du.sum_samples(
            samples, "encoder_queue_duration_seconds_count"),
        "queue_sum": du.sum_samples(samples,
                                    "encoder_queue_duration_seconds_sum"),
        "large_accepted": du.sum_samples(
            samples, "encoder_input_tokens_count", model=LARGE_MODEL),
    }


def queue_signal(before, after):
    """(sequences queued, mean queue seconds per sequence) between two
    scrapes: what the adapter rule computes from the same series."""
    count = after["queue_count"] - before["queue_count"]
    seconds = after["queue_sum"] - before["queue_sum"]
    return count, (seconds / count if count > 0 else None)


def access_log(child):
    """The access lines of a replica's JSON log, each with its end time
    (ts) and start time (ts - total_ms) in seconds since the epoch."""
    lines = []
    with open(child.log_path, errors="replace") as f:
        for line in f:
            try:
                entry = json.loads(line)
            except json.JSONDecodeError:
                continue
            if entry.get("msg") != "access" or entry.get("method") != "Embed":
                continue
            end = datetime.fromisoformat(
                entry["ts"].replace("Z", "+00:00")).timestamp()
            entry["end"] = end
            entry["start"] = end - float(entry.get("total_ms", 0)) / 1000
            lines.append(entry)
    return lines


def large_request(pb2, seed):
    request = pb2.EmbedRequest(model=LARGE_MODEL)
    for k in range(LARGE_INPUTS):
        request.inputs.add(token_ids=pb2.TokenIds(
            ids=[1 + (seed * 7919 + k * 31 + j) % 9000
                 for j in range(LARGE_TOKENS)]))
    return request


def main():
    args = du.server_test_args(__doc__, "nginx")
    deploy = os.path.join(args.source_dir, "deploy")
    began = time.monotonic()

    with du.Harness(args, "scaleout") as h:
        checks = du.Checks()
        pb2, pb2_grpc = h.grpc_stubs()
        server_args = [f"--models={deploy}/models/repository.json",
                       f"--drain-grace={DRAIN_GRACE_SECONDS}s",
                       f"--drain-unready={DRAIN_UNREADY_SECONDS:g}s",
                       "--log-format=json", "--log-rate-limit=0"]
        replicas, nginx, listen_port = du.start_behind_nginx(
            h, server_args, checks)
        (drained, drained_grpc, drained_metrics), \
            (survivor, _, survivor_metrics) = replicas
        print(f"replicas and nginx up in {time.monotonic() - began:.1f} s",
              flush=True)

        channel = grpc.insecure_channel(f"127.0.0.1:{listen_port}",
                                        options=du.GRPC_OPTIONS)
        stub = pb2_grpc.EncoderServiceStub(channel)
        stub.ListModels(pb2.ListModelsRequest(), timeout=30,
                        wait_for_ready=True)
        direct = grpc.insecure_channel(f"127.0.0.1:{drained_grpc}",
                                       options=du.GRPC_OPTIONS)
        direct_stub = pb2_grpc.EncoderServiceStub(direct)

        first = [scrape(drained_metrics), scrape(survivor_metrics)]
        large = []

        def send_large(seed):
            start = time.time()
            try:
                response = direct_stub.Embed(
                    large_request(pb2, seed), timeout=60,
                    metadata=[("x-request-id", f"large-{seed}")])
                code = ("OK" if len(response.results) == LARGE_INPUTS
                        else f"{len(response.results)} results")
            except grpc.RpcError as e:
                code = f"{e.code().name}: {e.details()}"
            large.append((f"large-{seed}", start, time.time(), code))

        with Load(pb2, stub) as load:
            h.wait_for(lambda: load.count() >= CALLS_BEFORE_DRAIN, 60,
                       f"{CALLS_BEFORE_DRAIN} calls through nginx",
                       interval=0.1)
            before_drain = [scrape(drained_metrics),
                            scrape(survivor_metrics)]
            # Large calls on replica 1, in flight when SIGTERM comes.
            senders = [threading.Thread(target=send_large, args=(s,))
                       for s in range(2)]
            for t in senders:
                t.start()
            accepted_before = before_drain[0]["large_accepted"]
            h.wait_for(lambda: scrape(drained_metrics)["large_accepted"]
                       - accepted_before >= len(senders) * LARGE_INPUTS, 20,
                       "the large calls accepted by replica 1",
                       interval=0.02)
            sigterm = time.time()
            code, seconds = h.stop(drained, signal.SIGTERM,
                                   timeout=DRAIN_GRACE_SECONDS + 15)
            exited = time.time()
            at_exit = scrape(survivor_metrics)
            for t in senders:
                t.join(timeout=60)
            h.wait_for(lambda: load.count(since=exited) >= CALLS_AFTER_EXIT
                       and load.count() >= MIN_CALLS, 60,
                       f"{CALLS_AFTER_EXIT} calls after the exit and "
                       f"{MIN_CALLS} in all", interval=0.1)
        # Quiet: every call answered.
        end = scrape(survivor_metrics)
        time.sleep(1.0)
        idle = scrape(survivor_metrics)
        channel.close()
        direct.close()

        results = load.results
        codes = {}
        for r in results:
            code_name = r[3].split(":")[0]
            codes[code_name] = codes.get(code_name, 0) + 1
        retried = [r for r in results if r[4] > 1]
        beyond_default = [r for r in results if r[4] > DEFAULT_RETRIES + 1]
        print(f"{len(results)} calls through nginx {codes}, {len(retried)} "
              f"of them retried, {len(beyond_default)} more than "
              f"{DEFAULT_RETRIES} times; replica 1 "
              f"exited {seconds:.2f} s after SIGTERM with {code}; large "
              f"calls {[r[3] for r in large]}", flush=True)

        # No call lost.
        checks.check(len(results) >= MIN_CALLS,
                     f"only {len(results)} calls sent")
        lost = [r for r in results if r[3] != "OK"]
        checks.check(not lost, f"{len(lost)} of {len(results)} calls lost "
                     f"through nginx: {lost[:5]}")
        # The drained replica: exit 0 before its grace, its in-flight
        # calls finished.
        checks.equal(code, 0, "replica 1's exit code")
        checks.check(seconds < DRAIN_GRACE_SECONDS,
                     f"replica 1 took {seconds:.1f} s to exit (grace "
                     f"{DRAIN_GRACE_SECONDS} s: a call was cut off)")
        checks.equal([r[3] for r in large], ["OK"] * len(senders),
                     "large calls in flight on replica 1 at SIGTERM")
        checks.check(all(r[1] < sigterm for r in large),
                     "a large call started after SIGTERM")
        drained_log = access_log(drained)
        survivor_log = access_log(survivor)
        by_id = {e["request_id"]: e for e in drained_log}
        for request_id, _, _, _ in large:
            entry = by_id.get(request_id)
            checks.check(entry is not None and entry["status"] == "OK"
                         and entry["start"] < sigterm < entry["end"],
                         f"replica 1's access log for {request_id} (in "
                         f"flight at SIGTERM, finished OK): {entry}")
        in_flight_load = [e for e in drained_log
                          if e["request_id"].startswith("load-")
                          and e["status"] == "OK"
                          and e["start"] < sigterm < e["end"]]
        statuses = {e["status"] for e in drained_log}
        checks.check(statuses <= {"OK", "UNAVAILABLE"},
                     f"replica 1 ended calls with {statuses}")
        refused = sum(1 for e in drained_log if e["status"] == "UNAVAILABLE")
        print(f"replica 1: {len(drained_log)} calls logged, {refused} "
              f"refused while draining (retried by the callers), "
              f"{len(in_flight_load) + len(large)} in flight at SIGTERM "
              "finished OK", flush=True)

        # The survivor took the load after the exit.
        survivor_ids = {e["request_id"] for e in survivor_log
                        if e["status"] == "OK"}
        # Every retry was of a call replica 1 refused while draining.
        refused_ids = {e["request_id"] for e in drained_log
                       if e["status"] == "UNAVAILABLE"}
        checks.check(all(r[0] in refused_ids for r in retried),
                     "calls retried that replica 1 did not refuse: "
                     f"{[r for r in retried if r[0] not in refused_ids][:5]}")
        late = [r for r in results if r[1] > exited]
        missing = [r for r in late if r[0] not in survivor_ids]
        checks.check(len(late) >= CALLS_AFTER_EXIT,
                     f"only {len(late)} calls after replica 1 exited")
        checks.check(not missing, f"{len(missing)} calls started after "
                     f"replica 1 exited are not in replica 2's access log "
                     f"as OK: {missing[:5]}")
        checks.check(nginx.running(), "nginx exited")

        # The queue-time metric follows the load on both replicas.
        def served_sequences(log, until):
            return sum(int(e.get("inputs", 0)) for e in log
                       if e["status"] == "OK" and e["end"] <= until)

        for name, log, a, b in (
                ("replica 1", drained_log, first[0], before_drain[0]),
                ("replica 2", survivor_log, first[1], before_drain[1])):
            count, mean = queue_signal(a, b)
            print(f"{name} with both serving: {count:.0f} sequences "
                  f"queued, {1000 * (mean or 0):.2f} ms mean queue time",
                  flush=True)
            checks.check(count >= CALLS_BEFORE_DRAIN / 5,
                         f"{name} queued {count:.0f} sequences while both "
                         f"served {CALLS_BEFORE_DRAIN}+ calls: it got "
                         "little of the load")
            checks.check(mean is not None and mean > 0,
                         f"{name}: no mean queue time while serving")
        count, _ = queue_signal({"queue_count": 0, "queue_sum": 0},
                                before_drain[0])
        logged = served_sequences(drained_log, before_drain[0]["time"])
        checks.check(logged <= count <= logged + WORKERS + LARGE_INPUTS * 2,
                     f"replica 1's queue count {count:.0f} at its last "
                     f"scrape vs {logged} sequences it logged served by "
                     "then")
        count, mean = queue_signal(at_exit, end)
        print(f"replica 2 alone: {count:.0f} sequences queued, "
              f"{1000 * (mean or 0):.2f} ms mean queue time", flush=True)
        checks.check(count >= len([r for r in late if r[2] <= end["time"]]),
                     f"replica 2 queued {count:.0f} sequences after the "
                     f"exit, fewer than the {len(late)} calls sent")
        checks.check(mean is not None and mean > 0,
                     "replica 2: no mean queue time while serving alone")
        checks.equal(end["queue_count"], float(
            served_sequences(survivor_log, float("inf"))),
                     "replica 2's queue count vs the sequences its access "
                     "log shows served")
        checks.equal(queue_signal(end, idle)[0], 0.0,
                     "replica 2's queue count moved with no load")
        checks.raise_if_failed()
    print(f"PASSED in {time.monotonic() - began:.1f} s")


if __name__ == "__main__":
    du.run(main)
