#!/usr/bin/python3
"""encoder-server scraped by a real Prometheus with deploy/prometheus.yml.

Starts the server with the deployment's model repository, and Prometheus
with a copy of deploy/prometheus.yml whose replica targets point at the
server's metrics port (scrape interval 1 s). Sends known Embed and
ListModels traffic, including failing calls, then checks through the
Prometheus HTTP API that every metric agrees with what the client saw:
request counts by rpc, model and code, tokens, sequences, histogram counts,
the model info gauge, gauges back at zero, resident memory. Finally every
PromQL expression of deploy/grafana/dashboards/encoder.json is evaluated
against that Prometheus and must return data.
"""

import collections
import json
import math
import os
import time
import urllib.parse

import grpc
import yaml

import deploy_util as du

# Dashboard variables and the values they take here: every model, and a
# range that spans the whole test at a 1 s scrape interval.
DASHBOARD_VARIABLES = {
    "$__rate_interval": "2m",
    "$__interval": "1s",
    "$__range": "2m",
    "$model": ".*",
}
# Expressions allowed to return nothing on a CPU-only server.
# Series a server may lack, and why.
MAY_BE_ABSENT = {
    "encoder_gpu_memory_bytes": "without CUDA",
    "encoder_cpu_buffer_cache_bytes":
        "with the CPU buffer cache off (sanitizer builds)",
}
DROP_REASONS = {"deadline", "cancelled", "overload", "shutdown"}


def derive_prometheus_config(source, metrics_port, prometheus_port, checks):
    """deploy/prometheus.yml with a 1 s interval, the encoder job's
    replica targets replaced by the test server, and the self-scrape job
    pointed at the test Prometheus."""
    with open(source) as f:
        config = yaml.safe_load(f)
    config.setdefault("global", {}).update(
        {"scrape_interval": "1s", "scrape_timeout": "1s",
         "evaluation_interval": "1s"})
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    checks.check("encoder" in jobs, "deploy/prometheus.yml has no job "
                 "'encoder'")
    encoder = jobs["encoder"]
    targets = [t for sc in encoder["static_configs"] for t in sc["targets"]]
    checks.check(len(targets) >= 2 and all(t.endswith(":9090")
                                           for t in targets),
                 f"encoder job targets {targets} are not replicas' :9090")
    for sc in encoder["static_configs"]:
        sc["targets"] = [f"127.0.0.1:{metrics_port}"]
    if "prometheus" in jobs:
        for sc in jobs["prometheus"]["static_configs"]:
            sc["targets"] = [f"127.0.0.1:{prometheus_port}"]
    return config


class PrometheusApi:
    def __init__(self, port):
        self.base = f"http://127.0.0.1:{port}"

    def query(self, expr, at=None):
        """Instant vector result [(labels, value)]; raises on errors."""
        params = {"query": expr}
        if at is not None:
            params["time"] = f"{at:.3f}"
        status, body = du.http_get(
            f"{self.base}/api/v1/query?{urllib.parse.urlencode(params)}")
        reply = json.loads(body)
        if status != 200 or reply.get("status") != "success":
            raise du.CheckFailed(f"query {expr!r} failed: {status} "
                                 f"{reply.get('errorType')}: "
                                 f"{reply.get('error')}")
        data = reply["data"]
        if data["resultType"] == "scalar":
            return [({}, float(data["result"][1]))]
        return [(r["metric"], float(r["value"][1])) for r in data["result"]]

    def label_values(self, label, match):
        params = urllib.parse.urlencode({"match[]": match})
        status, body = du.http_get(
            f"{self.base}/api/v1/label/{label}/values?{params}")
        reply = json.loads(body)
        if status != 200 or reply.get("status") != "success":
            raise du.CheckFailed(f"label values of {label}: {body}")
        return sorted(reply["data"])


class Traffic:
    """Sends calls and records what the server should have counted."""

    def __init__(self, pb2, stub, scheme_of, default_model):
        self.pb2 = pb2
        self.stub = stub
        self.scheme_of = scheme_of
        self.default_model = default_model
        self.requests = collections.Counter()  # (rpc, model, code)
        self.tokens = collections.Counter()  # model -> real tokens
        self.sequences = collections.Counter()  # model -> sequences

    def label_for(self, model):
        """The model label the server reports for a requested name."""
        if model == "":
            return self.default_model
        return model if model in self.scheme_of else ""

    def embed_request(self, model, inputs):
        request = self.pb2.EmbedRequest(model=model)
        for item in inputs:
            if isinstance(item, str):
                request.inputs.add(text=item)
            else:
                request.inputs.add(token_ids=self.pb2.TokenIds(ids=item))
        return request

    def record_embed(self, model, call):
        """call: a finished future or a callable returning the response."""
        label = self.label_for(model)
        try:
            response = call()
            code = "OK"
        except grpc.RpcError as e:
            code = e.code().name
            response = None
        self.requests[("Embed", label, code)] += 1
        if response is not None:
            self.tokens[label] += sum(r.num_tokens for r in response.results)
            self.sequences[label] += len(response.results)
        return code

    def embed(self, model, inputs):
        request = self.embed_request(model, inputs)
        return self.record_embed(
            model, lambda: self.stub.Embed(request, timeout=60))

    def embed_concurrently(self, calls):
        pending = [(model, self.stub.Embed.future(
            self.embed_request(model, inputs), timeout=60))
            for model, inputs in calls]
        return [self.record_embed(model, f.result) for model, f in pending]

    def list_models(self):
        response = self.stub.ListModels(self.pb2.ListModelsRequest(),
                                        timeout=30)
        self.requests[("ListModels", "", "OK")] += 1
        return response


def ids(length, start=1):
    return [start + (7 * i) % 9000 for i in range(length)]


def send_traffic(traffic, models):
    """Known traffic spread over several scrape intervals, so that rates
    over the test's range have data. Returns the number of calls."""
    first, second = models[0], models[1]
    checks = du.Checks()
    checks.equal(traffic.embed(first, [ids(5)]), "OK", "first Embed")
    checks.equal(traffic.embed(second, [ids(4), ids(9)]), "OK",
                 "second-model Embed")
    traffic.list_models()
    time.sleep(2.5)
    for i in range(8):
        checks.equal(traffic.embed(first, [ids(3 + i, start=i)]), "OK",
                     f"Embed {first} length {3 + i}")
        time.sleep(0.25)
    checks.equal(traffic.embed("", [ids(6)]), "OK", "default-model Embed")
    checks.equal(traffic.embed(first, ["hello, encoder", "positional"]),
                 "OK", "text Embed")
    codes = traffic.embed_concurrently(
        [(second, [ids(2 + i), ids(11 - i)]) for i in range(6)] +
        [(first, [ids(16 + i)]) for i in range(6)])
    checks.equal(codes, ["OK"] * 12, "concurrent Embed codes")
    time.sleep(1.0)
    for _ in range(3):
        checks.check(traffic.embed("no-such-model", [ids(4)]) != "OK",
                     "Embed of an unknown model succeeded")
    for _ in range(2):
        checks.check(traffic.embed(first, [[1, 2, 10 ** 7]]) != "OK",
                     "Embed of an out-of-vocabulary id succeeded")
    checks.check(traffic.embed(second, []) != "OK",
                 "Embed without inputs succeeded")
    traffic.list_models()
    time.sleep(1.0)
    for i in range(4):
        checks.equal(traffic.embed(second, [ids(20 + i)]), "OK",
                     f"late Embed {i}")
    checks.raise_if_failed()
    return sum(traffic.requests.values())


def by_labels(result, *names):
    """{tuple of label values (missing = ""): value}."""
    return {tuple(m.get(n, "") for n in names): v for m, v in result}


def check_metrics(api, traffic, model_infos, checks):
    at = time.time()

    def q(expr):
        return api.query(expr, at)

    up = q('up{job="encoder"}')
    checks.equal([v for _, v in up], [1.0], "up of the encoder target")

    requests = q("encoder_requests_total")
    checks.equal(by_labels(requests, "rpc", "model", "code"),
                 {k: float(v) for k, v in traffic.requests.items()},
                 "encoder_requests_total by rpc, model and code")
    for labels, _ in requests:
        model = labels.get("model", "")
        checks.equal(labels.get("scheme", ""),
                     traffic.scheme_of.get(model, ""),
                     f"scheme label of {labels}")

    expected_by_rpc = collections.Counter()
    for (rpc, model, _), n in traffic.requests.items():
        expected_by_rpc[(rpc, model)] += n
    expected_by_rpc = {k: float(v) for k, v in expected_by_rpc.items()}
    checks.equal(by_labels(q("encoder_request_duration_seconds_count"),
                           "rpc", "model"), expected_by_rpc,
                 "request latency histogram _count by rpc and model")
    checks.equal(by_labels(q('encoder_request_duration_seconds_bucket'
                             '{le="+Inf"}'), "rpc", "model"),
                 expected_by_rpc, "request latency +Inf bucket")
    checks.check(all(v > 0 for _, v in
                     q("encoder_request_duration_seconds_sum")),
                 "request latency _sum not positive")

    models = sorted(traffic.scheme_of)
    zero = {(m,): 0.0 for m in models}
    tokens = {(m,): float(traffic.tokens[m]) for m in models}
    sequences = {(m,): float(traffic.sequences[m]) for m in models}
    checks.equal(by_labels(q("encoder_tokens_total"), "model"), tokens,
                 "encoder_tokens_total by model")
    for name in ("encoder_queue_duration_seconds_count",
                 "encoder_inference_duration_seconds_count",
                 "encoder_batch_size_sum"):
        checks.equal(by_labels(q(name), "model"), sequences,
                     f"{name} (sequences computed)")
    batches = by_labels(q("encoder_batch_size_count"), "model")
    checks.equal(by_labels(q("encoder_batch_padding_ratio_count"), "model"),
                 batches, "padding ratio _count vs batch size _count")
    checks.equal(by_labels(q("encoder_batch_tokens_count"), "model"),
                 batches, "batch tokens _count vs batch size _count")
    padded = by_labels(q("encoder_batch_tokens_sum"), "model")
    for m in models:
        checks.check(0 < batches.get((m,), 0) <= traffic.sequences[m],
                     f"{m}: {batches.get((m,))} batches for "
                     f"{traffic.sequences[m]} sequences")
        checks.check(padded.get((m,), 0) >= traffic.tokens[m],
                     f"{m}: padded tokens {padded.get((m,))} < real tokens "
                     f"{traffic.tokens[m]}")

    dropped = by_labels(q("encoder_dropped_sequences_total"), "model",
                        "reason")
    checks.equal(dropped, {(m, r): 0.0 for m in models for r in DROP_REASONS},
                 "encoder_dropped_sequences_total (nothing dropped)")
    checks.equal(by_labels(q("encoder_queue_depth"), "model"), zero,
                 "encoder_queue_depth after the traffic")
    in_flight = by_labels(q("encoder_in_flight_requests"), "rpc")
    checks.check(set(in_flight) >= {("Embed",), ("ListModels",)},
                 f"in-flight gauges {sorted(in_flight)}")
    checks.check(all(v == 0 for v in in_flight.values()),
                 f"in-flight requests after the traffic: {in_flight}")

    info = q("encoder_model_info")
    got_info = sorted(
        (m.get("model"), m.get("scheme"), m.get("device"), m.get("dtype"),
         m.get("d_model"), m.get("num_heads"), m.get("num_layers"), v)
        for m, v in info)
    checks.equal(got_info, sorted(model_infos),
                 "encoder_model_info (model, scheme, device, dtype, d_model, "
                 "num_heads, num_layers, value)")

    rss = q('process_resident_memory_bytes{job="encoder"}')
    checks.check(len(rss) == 1 and rss[0][1] > 50e6,
                 f"process_resident_memory_bytes {rss} (a server with "
                 "LibTorch models holds more than 50 MB)")
    checks.equal(q("encoder_gpu_memory_bytes"), [],
                 "encoder_gpu_memory_bytes on a CPU server")
    checks.equal(api.label_values("model", "encoder_model_info"), models,
                 "the dashboard's model variable values")


def dashboard_expressions(path):
    with open(path) as f:
        dashboard = json.load(f)
    panels = list(dashboard.get("panels", []))
    exprs = []
    while panels:
        panel = panels.pop(0)
        panels.extend(panel.get("panels", []))  # collapsed rows
        for target in panel.get("targets", []):
            if target.get("expr"):
                exprs.append((panel.get("title", "?"), target["expr"]))
    return exprs


def check_dashboard(api, path, checks):
    exprs = dashboard_expressions(path)
    checks.check(len(exprs) >= 8, f"only {len(exprs)} dashboard queries")
    at = time.time()
    for title, expr in exprs:
        concrete = expr
        for variable, value in DASHBOARD_VARIABLES.items():
            concrete = concrete.replace(variable, value)
        checks.check("$" not in concrete,
                     f"{title}: unsubstituted variable in {concrete!r}")
        try:
            result = api.query(concrete, at)
        except du.CheckFailed as e:
            checks.check(False, f"{title}: {e}")
            continue
        finite = [v for _, v in result if math.isfinite(v)]
        absent = [why for name, why in MAY_BE_ABSENT.items() if name in expr]
        if absent and not finite:
            print(f"ok (may be empty {absent[0]}) {title}: {concrete}")
            continue
        checks.check(finite, f"{title}: {concrete!r} returned no finite "
                     f"value: {result}")
        print(f"ok {title}: {len(result)} series, e.g. {finite[:3]}")


def main():
    args = du.server_test_args(__doc__, "prometheus")
    deploy = os.path.join(args.source_dir, "deploy")

    with du.Harness(args, "prometheus") as h:
        pb2, pb2_grpc = h.grpc_stubs()
        server, ready = h.start_server("encoder-server", args.server, [
            f"--models={deploy}/models/repository.json",
            "--drain-grace=5s"])
        grpc_port, metrics_port = h.wait_server_ready(server, ready)

        checks = du.Checks()
        prometheus_port = du.free_port()
        config = derive_prometheus_config(
            os.path.join(deploy, "prometheus.yml"), metrics_port,
            prometheus_port, checks)
        with open(h.path("prometheus.yml"), "w") as f:
            yaml.safe_dump(config, f)
        h.start("prometheus", [
            args.prometheus, f"--config.file={h.path('prometheus.yml')}",
            f"--web.listen-address=127.0.0.1:{prometheus_port}",
            f"--storage.tsdb.path={h.path('tsdb')}", "--log.level=warn"])
        api = PrometheusApi(prometheus_port)
        h.wait_for(lambda: du.http_get(f"{api.base}/-/ready")[0] == 200, 60,
                   "Prometheus ready")
        h.wait_for(lambda: [v for _, v in api.query('up{job="encoder"}')]
                   == [1.0], 30, "the first successful scrape")

        channel = grpc.insecure_channel(f"127.0.0.1:{grpc_port}",
                                        options=du.GRPC_OPTIONS)
        stub = pb2_grpc.EncoderServiceStub(channel)
        listed = stub.ListModels(pb2.ListModelsRequest(), timeout=30)
        scheme_of = {m.name: m.positional.scheme for m in listed.models}
        model_infos = [
            (m.name, m.positional.scheme, m.device,
             pb2.DType.Name(m.dtype).removeprefix("DTYPE_").lower(),
             str(m.d_model), str(m.num_heads), str(m.num_layers), 1.0)
            for m in listed.models]
        models = sorted(scheme_of)
        checks.check(len(models) >= 2, f"repository models {models}")
        traffic = Traffic(pb2, stub, scheme_of, listed.default_model)
        traffic.requests[("ListModels", "", "OK")] += 1
        calls = send_traffic(traffic, [listed.default_model] +
                             [m for m in models
                              if m != listed.default_model])
        traffic_end = time.time()
        print(f"sent {calls} calls: {dict(traffic.requests)}")

        h.wait_for(lambda: api.query('timestamp(up{job="encoder"})')[0][1]
                   > traffic_end + 1.0, 30, "a scrape after the traffic")
        check_metrics(api, traffic, model_infos, checks)
        check_dashboard(api, os.path.join(deploy, "grafana", "dashboards",
                                          "encoder.json"), checks)
        channel.close()

        code, seconds = h.stop(server, timeout=15)
        checks.equal(code, 0, "encoder-server exit code after SIGTERM")
        checks.check(seconds < 10, f"encoder-server took {seconds:.1f} s to "
                     "exit after SIGTERM with nothing in flight")
        checks.raise_if_failed()
    print("PASSED")


if __name__ == "__main__":
    du.run(main)
