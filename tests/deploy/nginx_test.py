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
import re
import signal
import socket
import subprocess
import threading
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


def derive_nginx_config(source, replica_ports, listen_port, tmp, checks):
    with open(source) as f:
        text = f.read()

    def upstream(match):
        index = int(match.group(1)) - 1
        return f"server 127.0.0.1:{replica_ports[index]}"

    text, n = re.subn(r"server\s+replica(\d+):50051", upstream, text)
    checks.equal(n, len(replica_ports), "replica servers in the upstream")
    text, n = re.subn(r"listen\s+50051\s+http2;",
                      f"listen 127.0.0.1:{listen_port} http2;", text)
    checks.equal(n, 1, "gRPC listen directives")
    text = re.sub(r"access_log\s+[^;]+;",
                  f"access_log {tmp}/access.log;", text)
    temp_paths = "".join(
        f"\n  {kind}_temp_path {tmp}/{kind}_temp;"
        for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
    text, n = re.subn(r"^http\s*{", "http {" + temp_paths, text,
                      flags=re.MULTILINE)
    checks.equal(n, 1, "http blocks")
    # Workers run as this user (as root nginx would otherwise switch to an
    # unprivileged user that cannot write the test's temporary directory).
    user = "user root root;\n" if os.geteuid() == 0 else ""
    return (f"{user}daemon off;\npid {tmp}/nginx.pid;\n"
            f"error_log {tmp}/error.log info;\n" + text)


def replica_embed_ok(metrics_port):
    status, body = du.http_get(f"http://127.0.0.1:{metrics_port}/metrics")
    if status != 200:
        raise du.CheckFailed(f"/metrics on {metrics_port} answered {status}")
    return du.sum_samples(du.parse_exposition(body), "encoder_requests_total",
                          rpc="Embed", code="OK")


def make_request(pb2, i):
    request = pb2.EmbedRequest(model="")
    request.inputs.add(token_ids=pb2.TokenIds(
        ids=[1 + (i * 13 + j) % 9000 for j in range(4 + i % 12)]))
    return request


class Load:
    """Worker threads sending Embed calls until stopped; records
    (start, end, code name, details) of every call."""

    def __init__(self, pb2, stub):
        self.pb2 = pb2
        self.stub = stub
        self.results = []
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.threads = [threading.Thread(target=self.run, args=(w,))
                        for w in range(WORKERS)]

    def run(self, worker):
        i = worker
        while not self.stopping.is_set():
            start = time.monotonic()
            try:
                self.stub.Embed(make_request(self.pb2, i), timeout=20)
                code, details = "OK", ""
            except grpc.RpcError as e:
                code, details = e.code().name, e.details()
            with self.lock:
                self.results.append((start, time.monotonic(), code, details))
            i += WORKERS

    def __enter__(self):
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc):
        self.stopping.set()
        for t in self.threads:
            t.join(timeout=30)
        return False


def port_open(port):
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", port)) == 0


def main():
    parser = du.common_args(__doc__)
    parser.add_argument("--server", required=True)
    parser.add_argument("--nginx", required=True)
    parser.add_argument("--protoc", required=True)
    parser.add_argument("--grpc-python-plugin", required=True)
    args = parser.parse_args()
    du.require_executable(args.server, "encoder-server")
    du.require_executable(args.nginx, "nginx")
    du.require_executable(args.protoc, "protoc")
    du.require_executable(args.grpc_python_plugin, "grpc_python_plugin")
    deploy = os.path.join(args.source_dir, "deploy")

    with du.Harness(args, "nginx") as h:
        checks = du.Checks()
        pb2, pb2_grpc = du.generate_stubs(
            args.protoc, args.grpc_python_plugin,
            os.path.join(args.source_dir, "proto"), h.path("stubs"))
        server_args = [f"--models={deploy}/models/repository.json",
                       f"--drain-grace={DRAIN_GRACE_SECONDS}s",
                       f"--drain-unready={DRAIN_UNREADY_SECONDS}s"]
        started = [h.start_server(f"replica{i}", args.server, server_args)
                   for i in (1, 2)]
        replicas = [(child, *h.wait_server_ready(child, ready))
                    for child, ready in started]

        listen_port = du.free_port()
        config = derive_nginx_config(
            os.path.join(deploy, "nginx", "nginx.conf"),
            [grpc_port for _, grpc_port, _ in replicas], listen_port, h.tmp,
            checks)
        checks.raise_if_failed()
        with open(h.path("nginx.conf"), "w") as f:
            f.write(config)
        nginx_argv = [args.nginx, "-p", h.tmp, "-c", h.path("nginx.conf"),
                      "-e", h.path("error.log")]
        subprocess.run(nginx_argv + ["-t"], check=True, timeout=30)
        nginx = h.start("nginx", nginx_argv)
        h.wait_for(lambda: port_open(listen_port), 30, "nginx listening")

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
                response = stub.Embed(make_request(pb2, i), timeout=20)
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
