#!/usr/bin/python3
"""Two encoder-server replicas behind nginx with deploy/nginx/nginx.conf.

nginx runs a copy of the committed config whose upstream servers point at
the two test replicas and whose listen address, pid, logs and temp paths
are test-local. gRPC traffic through nginx must all succeed and reach both
replicas (read from each replica's /metrics). Then one replica is stopped
(SIGTERM: it drains and exits) while calls keep flowing: a call may fail
only with a clean UNAVAILABLE, every call started after the replica exited
must succeed, and the survivor must have served them.
"""

import os
import signal
import time

import grpc

import deploy_util as du

PHASE1_CALLS = 40
WORKERS = 4
DRAIN_GRACE_SECONDS = 5
# How long the stopping replica answers UNAVAILABLE before its transport
# closes (--drain-unready).
DRAIN_UNREADY_SECONDS = 1.0
# gRPC core cancels calls that have reached a transport but no handler at
# the moment it closes; nginx cannot retry those (the status is an HTTP 200
# trailer). Only calls sent in this window around the close may see it.
CLOSE_WINDOW_SECONDS = 0.25


def replica_embed_ok(metrics_port):
    return du.sum_samples(du.scrape_metrics(metrics_port),
                          "encoder_requests_total", rpc="Embed", code="OK")


class Load(du.Load):
    """Worker threads sending Embed calls until stopped; records
    (start, end, code name, details) of every call."""

    def __init__(self, pb2, stub):
        super().__init__(WORKERS, join_timeout=30)
        self.pb2 = pb2
        self.stub = stub

    def call(self, i):
        start = time.monotonic()
        try:
            self.stub.Embed(du.embed_request(self.pb2, i), timeout=20)
            code, details = "OK", ""
        except grpc.RpcError as e:
            code, details = e.code().name, e.details()
        return start, time.monotonic(), code, details


def main():
    args = du.server_test_args(__doc__, "nginx")
    deploy = os.path.join(args.source_dir, "deploy")

    with du.Harness(args, "nginx") as h:
        checks = du.Checks()
        pb2, pb2_grpc = h.grpc_stubs()
        server_args = [f"--models={deploy}/models/repository.json",
                       f"--drain-grace={DRAIN_GRACE_SECONDS}s",
                       f"--drain-unready={DRAIN_UNREADY_SECONDS}s"]
        replicas, nginx, listen_port = du.start_behind_nginx(
            h, server_args, checks)

        channel = grpc.insecure_channel(f"127.0.0.1:{listen_port}",
                                        options=du.GRPC_OPTIONS)
        stub = pb2_grpc.EncoderServiceStub(channel)
        listed = stub.ListModels(pb2.ListModelsRequest(), timeout=30,
                                 wait_for_ready=True)
        checks.check(len(listed.models) >= 2,
                     f"ListModels through nginx: {listed}")

        # Phase 1: every call succeeds and both replicas serve some.
        before = [replica_embed_ok(m) for _, _, m in replicas]
        codes = []
        for i in range(PHASE1_CALLS):
            try:
                response = stub.Embed(du.embed_request(pb2, i), timeout=20)
                codes.append("OK")
                checks.equal(response.results[0].num_tokens, 4 + i % 12,
                             f"tokens of call {i}")
            except grpc.RpcError as e:
                codes.append(f"{e.code().name}: {e.details()}")
        checks.equal(codes, ["OK"] * PHASE1_CALLS, "phase 1 call codes")
        served = [replica_embed_ok(m) - b
                  for (_, _, m), b in zip(replicas, before)]
        print(f"phase 1: replicas served {served} of {PHASE1_CALLS} calls")
        checks.check(all(s > 0 for s in served),
                     f"a replica got no traffic through nginx: {served}")
        checks.equal(sum(served), float(PHASE1_CALLS),
                     "Embed OK counts over both replicas")
        checks.raise_if_failed()

        # Phase 2: stop replica 1 under load.
        stopped, _, _ = replicas[0]
        survivor_metrics = replicas[1][2]
        survivor_before = replica_embed_ok(survivor_metrics)
        with Load(pb2, stub) as load:
            time.sleep(2.0)
            stop_sent = time.monotonic()
            code, seconds = h.stop(stopped, signal.SIGTERM,
                                   timeout=DRAIN_GRACE_SECONDS + 15)
            exited = time.monotonic()
            time.sleep(3.0)
        checks.equal(code, 0, "stopped replica's exit code")
        checks.check(seconds <= DRAIN_GRACE_SECONDS + 5,
                     f"stopped replica took {seconds:.1f} s to exit")
        results = load.results
        by_code = {}
        for _, _, c, _ in results:
            by_code[c] = by_code.get(c, 0) + 1
        print(f"phase 2: {len(results)} calls {by_code}; replica exited "
              f"{exited - stop_sent:.2f} s after SIGTERM")
        # The transport closes after the unready window, just before exit.
        close_from = stop_sent + DRAIN_UNREADY_SECONDS - CLOSE_WINDOW_SECONDS
        close_to = exited + CLOSE_WINDOW_SECONDS
        at_close = [r for r in results if r[2] == "CANCELLED" and
                    close_from <= r[0] and r[1] <= close_to]
        bad = [r for r in results if r[2] not in ("OK", "UNAVAILABLE") and
               r not in at_close]
        checks.check(not bad, f"calls failed with other than UNAVAILABLE: "
                     f"{bad[:5]}")
        checks.check(len(at_close) <= 3,
                     f"{len(at_close)} calls cancelled at transport close")
        print(f"phase 2: {len(at_close)} call(s) cancelled by the transport "
              "close (sent while it closed)")
        late = [r for r in results if r[0] > exited]
        checks.check(len(late) >= WORKERS,
                     f"only {len(late)} calls after the replica exited")
        late_failed = [r for r in late if r[2] != "OK"]
        checks.check(not late_failed,
                     f"{len(late_failed)} calls started after the replica "
                     f"exited failed: {late_failed[:5]}")
        checks.check(sum(1 for r in results if r[0] < stop_sent) > 0,
                     "no calls before the stop")
        survivor_served = replica_embed_ok(survivor_metrics) - survivor_before
        ok_calls = by_code.get("OK", 0)
        checks.check(survivor_served >= len(late),
                     f"survivor served {survivor_served} calls, fewer than "
                     f"the {len(late)} sent after the stop")
        checks.check(survivor_served <= ok_calls,
                     f"survivor served {survivor_served} > {ok_calls} OK "
                     "calls")
        checks.check(nginx.running(), "nginx exited")
        channel.close()
        checks.raise_if_failed()
    print("PASSED")


if __name__ == "__main__":
    du.run(main)
