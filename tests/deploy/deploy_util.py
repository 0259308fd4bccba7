"""Helpers shared by the deploy tests.

Every child process is started from the main thread with a parent-death
signal, so it dies with the test even when the test itself is killed; the
Harness context stops what is still running (on success, failure or the
test's own time limit) and prints the tail of each child's log on failure.
Everything listens on 127.0.0.1 ports picked at run time.
"""

import argparse
import contextlib
import ctypes
import importlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

import yaml

_PR_SET_PDEATHSIG = 1
# The container ports of the manifests (deploy/k8s, the Helm chart, compose).
GRPC_PORT = 50051
METRICS_PORT = 9090
HEALTH_PORT = 50052


class TimeLimit(Exception):
    """The test ran past its own time limit."""


class CheckFailed(Exception):
    """One or more checks failed; the message lists them."""


def common_args(description):
    """Arguments every deploy test takes (paths come from CMake)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--source-dir", required=True)
    parser.add_argument("--time-limit", type=float, default=240.0,
                        help="seconds; the test fails and cleans up after")
    parser.add_argument("--keep-temp", action="store_true",
                        help="keep the temporary directory for inspection")
    return parser


def server_test_args(description, program):
    """Parses the arguments of a test that starts encoder-server (--server),
    talks gRPC to it through stubs it compiles (--protoc,
    --grpc-python-plugin) and runs one other program (--<program>); fails
    the test when one of them is missing."""
    parser = common_args(description)
    parser.add_argument("--server", required=True)
    parser.add_argument(f"--{program}", required=True)
    parser.add_argument("--protoc", required=True)
    parser.add_argument("--grpc-python-plugin", required=True)
    args = parser.parse_args()
    require_executable(args.server, "encoder-server")
    require_executable(getattr(args, program), program)
    require_executable(args.protoc, "protoc")
    require_executable(args.grpc_python_plugin, "grpc_python_plugin")
    return args


def require_executable(path, what):
    """Fails the test when a program it starts is missing: the README's test
    command installs every one of them."""
    if not path or not (os.path.isfile(path) and os.access(path, os.X_OK)):
        print(f"FAILED: {what} not found at {path!r} "
              "(scripts/install_deps.sh test installs it)")
        sys.exit(1)


def free_port():
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _die_with_parent():
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


class Checks:
    """Collects failed checks so that one run reports all of them."""

    def __init__(self):
        self.failures = []

    def check(self, condition, message):
        if not condition:
            self.failures.append(message)
            print(f"FAIL: {message}", flush=True)
        return condition

    def equal(self, actual, expected, what):
        return self.check(actual == expected,
                          f"{what}: expected {expected!r}, got {actual!r}")

    def raise_if_failed(self):
        if self.failures:
            raise CheckFailed(f"{len(self.failures)} check(s) failed:\n  " +
                              "\n  ".join(self.failures))


class Child:
    def __init__(self, name, popen, log_path):
        self.name = name
        self.popen = popen
        self.log_path = log_path

    @property
    def pid(self):
        return self.popen.pid

    def running(self):
        return self.popen.poll() is None

    def log_tail(self, lines=40):
        try:
            with open(self.log_path, errors="replace") as f:
                return "".join(f.readlines()[-lines:])
        except OSError:
            return ""


class Harness(contextlib.AbstractContextManager):
    """A temporary directory, the children started in it and a deadline."""

    def __init__(self, args, name):
        self.args = args
        self.tmp = tempfile.mkdtemp(prefix=f"encoder-{name}-")
        self.children = []
        self.deadline = time.monotonic() + args.time_limit

    def __enter__(self):
        def on_alarm(signum, frame):
            raise TimeLimit(f"time limit of {self.args.time_limit:.0f} s")

        def on_term(signum, frame):
            raise KeyboardInterrupt(f"signal {signum}")

        signal.signal(signal.SIGALRM, on_alarm)
        signal.signal(signal.SIGTERM, on_term)
        signal.alarm(max(1, int(self.args.time_limit)))
        return self

    def __exit__(self, exc_type, exc, tb):
        signal.alarm(0)
        failed = exc_type is not None
        for child in reversed(self.children):
            if child.running():
                self.stop(child, timeout=10)
        if failed:
            for child in self.children:
                print(f"--- {child.name} (pid {child.pid}, exit "
                      f"{child.popen.returncode}) log tail ---\n"
                      f"{child.log_tail()}", flush=True)
        if self.args.keep_temp or failed:
            print(f"temporary files kept in {self.tmp}")
        else:
            shutil.rmtree(self.tmp, ignore_errors=True)
        return False

    def path(self, *parts):
        return os.path.join(self.tmp, *parts)

    def remaining(self):
        return self.deadline - time.monotonic()

    def start(self, name, argv, cwd=None, env=None):
        """Starts argv with stdout and stderr in <tmp>/<name>.log (env: the
        whole environment, default this process's)."""
        log_path = self.path(f"{name}.log")
        log = open(log_path, "wb")
        print(f"starting {name}: {' '.join(argv)}", flush=True)
        popen = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log,
                                 stderr=subprocess.STDOUT, cwd=cwd or self.tmp,
                                 env=env, preexec_fn=_die_with_parent)
        log.close()
        child = Child(name, popen, log_path)
        self.children.append(child)
        return child

    def stop(self, child, sig=signal.SIGTERM, timeout=30):
        """Sends sig, waits up to timeout, then SIGKILL. Returns the exit
        code and the seconds it took to exit after sig."""
        if not child.running():
            return child.popen.returncode, 0.0
        start = time.monotonic()
        child.popen.send_signal(sig)
        try:
            child.popen.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            child.popen.kill()
            child.popen.wait()
        return child.popen.returncode, time.monotonic() - start

    def wait_for(self, predicate, timeout, what, interval=0.2):
        """Polls predicate until it returns a truthy value, which is
        returned; fails after timeout seconds, or at once when predicate
        raises CheckFailed (other exceptions are retried)."""
        end = time.monotonic() + min(timeout, self.remaining())
        last_error = None
        while time.monotonic() < end:
            try:
                value = predicate()
                if value:
                    return value
            except CheckFailed:
                raise
            except Exception as e:  # Retried until the timeout.
                last_error = e
            time.sleep(interval)
        raise CheckFailed(f"timed out after {timeout:.0f} s waiting for "
                          f"{what}" + (f" (last error: {last_error})"
                                       if last_error else ""))

    def start_server(self, name, server_binary, extra_args=(), env=None):
        """Starts encoder-server with gRPC and metrics on port 0 and returns
        (child, ready_file) for wait_server_ready; starting several servers
        before waiting lets them load their models side by side. env: as
        for start."""
        ready = self.path(f"{name}.ready.json")
        child = self.start(name, [
            server_binary, "--listen=127.0.0.1:0",
            "--metrics-listen=127.0.0.1:0", f"--ready-file={ready}",
            *extra_args], env=env)
        return child, ready

    def wait_server_ready(self, child, ready, timeout=120):
        """Waits for the ready file; returns (grpc_port, metrics_port)."""
        info = self.wait_server_info(child, ready, timeout)
        return info["grpc_port"], info["metrics_port"]

    def wait_server_info(self, child, ready, timeout=120):
        """Waits for the ready file; returns all it holds (grpc_port,
        http_port, metrics_port, health_port)."""
        def is_ready():
            if not child.running():
                raise CheckFailed(f"{child.name} exited with "
                                  f"{child.popen.returncode} before ready")
            if not os.path.exists(ready):
                return None
            with open(ready) as f:
                return json.load(f)

        return self.wait_for(is_ready, timeout, f"{child.name} ready file")

    def start_replicas(self, server_binary, extra_args, count=2):
        """Starts `count` encoder-servers with the same arguments (replica1,
        replica2, ...), lets them load side by side and waits for each;
        returns [(child, grpc_port, metrics_port)]."""
        started = [self.start_server(f"replica{i}", server_binary, extra_args)
                   for i in range(1, count + 1)]
        return [(child, *self.wait_server_ready(child, ready))
                for child, ready in started]

    def grpc_stubs(self):
        """generate_stubs for the source tree's proto/ with the test's
        --protoc and --grpc-python-plugin, into <tmp>/stubs."""
        return generate_stubs(self.args.protoc, self.args.grpc_python_plugin,
                              os.path.join(self.args.source_dir, "proto"),
                              self.path("stubs"))


def run(main):
    """Runs a deploy test's main: a failed check, the time limit or a
    signal prints FAILED with the reason and exits 1."""
    try:
        main()
    except (CheckFailed, TimeLimit, KeyboardInterrupt) as e:
        print(f"FAILED: {e}")
        sys.exit(1)


def generate_stubs(protoc, plugin, proto_dir, out_dir):
    """Compiles encoder/v1/encoder.proto for Python into out_dir and returns
    the (messages, services) modules."""
    os.makedirs(out_dir, exist_ok=True)
    subprocess.run([
        protoc, f"-I{proto_dir}", f"--python_out={out_dir}",
        f"--grpc_python_out={out_dir}",
        f"--plugin=protoc-gen-grpc_python={plugin}",
        os.path.join(proto_dir, "encoder", "v1", "encoder.proto")],
        check=True, timeout=60)
    sys.path.insert(0, out_dir)
    return (importlib.import_module("encoder.v1.encoder_pb2"),
            importlib.import_module("encoder.v1.encoder_pb2_grpc"))


# Loopback only: proxies from the environment must not apply.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))

# Channel options for loopback gRPC: no proxy from the environment.
GRPC_OPTIONS = [("grpc.enable_http_proxy", 0)]


def http_get(url, timeout=5.0):
    """(status, body text) of a GET; HTTP errors return their status."""
    try:
        with _OPENER.open(url, timeout=timeout) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(errors="replace")


def embed_request(pb2, i):
    """Embed call i of a load on the default model: one input of 4 + i % 12
    token ids, varied with i."""
    request = pb2.EmbedRequest(model="")
    request.inputs.add(token_ids=pb2.TokenIds(
        ids=[1 + (i * 13 + j) % 9000 for j in range(4 + i % 12)]))
    return request


class Load(contextlib.AbstractContextManager):
    """Worker threads making calls from entering the context until leaving
    it: worker w makes calls w, w + workers, w + 2 * workers, ... with
    call(i), which a test defines, and `results` (under `lock`) gets what
    each call returns as it ends. Leaving waits up to join_timeout seconds
    for each worker's call in flight."""

    def __init__(self, workers, join_timeout):
        self.workers = workers
        self.join_timeout = join_timeout
        self.results = []
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.threads = [threading.Thread(target=self.run, args=(w,))
                        for w in range(workers)]

    def call(self, i):
        raise NotImplementedError

    def run(self, worker):
        i = worker
        while not self.stopping.is_set():
            result = self.call(i)
            with self.lock:
                self.results.append(result)
            i += self.workers

    def __enter__(self):
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc):
        self.stopping.set()
        for t in self.threads:
            t.join(timeout=self.join_timeout)
        return False


def scrape_metrics(metrics_port):
    """parse_exposition of a server's /metrics; fails the test unless it
    answers 200."""
    status, body = http_get(f"http://127.0.0.1:{metrics_port}/metrics")
    if status != 200:
        raise CheckFailed(f"/metrics on {metrics_port} answered {status}")
    return parse_exposition(body)


def parse_exposition(text):
    """Prometheus text format -> {(name, frozenset(labels)): value}. Label
    values are assumed free of escaped quotes and commas."""
    samples = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        series, _, value = line.rpartition(" ")
        labels = {}
        if "{" in series:
            name, _, body = series.partition("{")
            for pair in body.rstrip("}").split(","):
                if pair:
                    key, _, quoted = pair.partition("=")
                    labels[key] = quoted[1:-1]
        else:
            name = series
        samples[(name, frozenset(labels.items()))] = float(value)
    return samples


def sum_samples(samples, name, **labels):
    """Sum of every sample of `name` whose labels include `labels`."""
    want = set(labels.items())
    return sum(v for (n, ls), v in samples.items()
               if n == name and want <= set(ls))


# --- nginx in front of replicas (nginx_test.py, scaleout_test.py) ---------

def derive_nginx_config(source, replica_ports, listen_port, tmp, checks):
    """deploy/nginx/nginx.conf (`source`) with its upstream servers on the
    replicas' gRPC ports, its listen address on 127.0.0.1:listen_port and
    its pid, logs and temp paths in tmp."""
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


def port_open(port):
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", port)) == 0


def start_behind_nginx(h, server_args, checks):
    """Two encoder-server replicas (--server with server_args) behind nginx
    (--nginx) running derive_nginx_config's copy of the source tree's
    deploy/nginx/nginx.conf, checked with nginx -t; returns (the replicas'
    [(child, grpc_port, metrics_port)], the nginx child, nginx's gRPC port)
    once nginx listens."""
    replicas = h.start_replicas(h.args.server, server_args)
    listen_port = free_port()
    config = derive_nginx_config(
        os.path.join(h.args.source_dir, "deploy", "nginx", "nginx.conf"),
        [grpc_port for _, grpc_port, _ in replicas], listen_port, h.tmp,
        checks)
    checks.raise_if_failed()
    with open(h.path("nginx.conf"), "w") as f:
        f.write(config)
    nginx_argv = [h.args.nginx, "-p", h.tmp, "-c", h.path("nginx.conf"),
                  "-e", h.path("error.log")]
    subprocess.run(nginx_argv + ["-t"], check=True, timeout=30)
    nginx = h.start("nginx", nginx_argv)
    h.wait_for(lambda: port_open(listen_port), 30, "nginx listening")
    return replicas, nginx, listen_port


# --- Kubernetes objects (kubernetes_test.py, helm_test.py) -----------------

# apiVersion each kind must use (the stable API of current Kubernetes; the
# custom resources' current versions).
API_VERSIONS = {
    "ConfigMap": "v1",
    "Service": "v1",
    "PersistentVolumeClaim": "v1",
    "Deployment": "apps/v1",
    "PodDisruptionBudget": "policy/v1",
    "HorizontalPodAutoscaler": "autoscaling/v2",
    "ServiceMonitor": "monitoring.coreos.com/v1",
    "ServingRuntime": "serving.kserve.io/v1alpha1",
    "InferenceService": "serving.kserve.io/v1beta1",
}
# Dotted paths each kind must have.
REQUIRED = {
    "ConfigMap": ["data"],
    "Service": ["spec.selector", "spec.ports"],
    "PersistentVolumeClaim": ["spec.accessModes",
                              "spec.resources.requests.storage"],
    "Deployment": ["spec.selector.matchLabels", "spec.template.metadata.labels",
                   "spec.template.spec.containers"],
    "PodDisruptionBudget": ["spec.selector.matchLabels"],
    "HorizontalPodAutoscaler": ["spec.scaleTargetRef", "spec.maxReplicas",
                                "spec.metrics"],
    "ServiceMonitor": ["spec.selector.matchLabels", "spec.endpoints"],
    "ServingRuntime": ["spec.supportedModelFormats", "spec.containers"],
    "InferenceService": ["spec.predictor.model.modelFormat.name",
                         "spec.predictor.model.storageUri"],
}
NAME_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")

# The fields of each kind that the manifests may use, with their types, as
# the Kubernetes API (and the CRDs of the Prometheus Operator and KServe)
# define them: "string", "integer", "boolean", "quantity" (a string or a
# number), "int-or-string", "any"; [spec] is a list of spec, {"*": spec} a
# map of spec, any other dict an object whose unknown fields are errors. A
# template that puts a field at the wrong depth, or a label value that is
# not a string, fails here as the API server would refuse it.
_STRING_MAP = {"*": "string"}
_SELECTOR = {"matchLabels": _STRING_MAP, "matchExpressions": ["any"]}
_META = {"name": "string", "namespace": "string", "labels": _STRING_MAP,
         "annotations": _STRING_MAP}
_KEY_REF = {"name": "string", "key": "string", "optional": "boolean"}
_PROBE = {
    "grpc": {"port": "integer", "service": "string"},
    "httpGet": {"path": "string", "port": "int-or-string", "scheme": "string",
                "host": "string", "httpHeaders": ["any"]},
    "tcpSocket": {"port": "int-or-string", "host": "string"},
    "exec": {"command": ["string"]},
    "initialDelaySeconds": "integer", "periodSeconds": "integer",
    "timeoutSeconds": "integer", "successThreshold": "integer",
    "failureThreshold": "integer", "terminationGracePeriodSeconds": "integer",
}
_CONTAINER = {
    "name": "string", "image": "string", "imagePullPolicy": "string",
    "command": ["string"], "args": ["string"], "workingDir": "string",
    "ports": [{"name": "string", "containerPort": "integer",
               "protocol": "string", "hostPort": "integer",
               "hostIP": "string"}],
    "env": [{"name": "string", "value": "string",
             "valueFrom": {"secretKeyRef": _KEY_REF,
                           "configMapKeyRef": _KEY_REF,
                           "fieldRef": "any", "resourceFieldRef": "any"}}],
    "envFrom": ["any"],
    "resources": {"requests": {"*": "quantity"}, "limits": {"*": "quantity"},
                  "claims": ["any"]},
    "volumeMounts": [{"name": "string", "mountPath": "string",
                      "readOnly": "boolean", "subPath": "string",
                      "subPathExpr": "string", "mountPropagation": "string",
                      "recursiveReadOnly": "string"}],
    "livenessProbe": _PROBE, "readinessProbe": _PROBE, "startupProbe": _PROBE,
    "lifecycle": {"preStop": {"exec": {"command": ["string"]},
                              "httpGet": "any", "sleep": "any"},
                  "postStart": "any"},
    "securityContext": {
        "readOnlyRootFilesystem": "boolean",
        "allowPrivilegeEscalation": "boolean", "privileged": "boolean",
        "runAsNonRoot": "boolean", "runAsUser": "integer",
        "runAsGroup": "integer",
        "capabilities": {"drop": ["string"], "add": ["string"]},
        "seccompProfile": {"type": "string", "localhostProfile": "string"}},
    "terminationMessagePath": "string", "terminationMessagePolicy": "string",
    "stdin": "boolean", "tty": "boolean",
}
_VOLUME = {
    "name": "string",
    "configMap": {"name": "string", "items": ["any"], "defaultMode": "integer",
                  "optional": "boolean"},
    "secret": {"secretName": "string", "items": ["any"],
               "defaultMode": "integer", "optional": "boolean"},
    "emptyDir": {"sizeLimit": "quantity", "medium": "string"},
    "persistentVolumeClaim": {"claimName": "string", "readOnly": "boolean"},
}
_TOLERATION = {"key": "string", "operator": "string", "value": "string",
               "effect": "string", "tolerationSeconds": "integer"}
_POD_SPEC = {
    "containers": [_CONTAINER], "initContainers": [_CONTAINER],
    "volumes": [_VOLUME], "terminationGracePeriodSeconds": "integer",
    "topologySpreadConstraints": [{
        "maxSkew": "integer", "topologyKey": "string",
        "whenUnsatisfiable": "string", "labelSelector": _SELECTOR,
        "minDomains": "integer", "matchLabelKeys": ["string"],
        "nodeAffinityPolicy": "string", "nodeTaintsPolicy": "string"}],
    "securityContext": {
        "runAsNonRoot": "boolean", "runAsUser": "integer",
        "runAsGroup": "integer", "fsGroup": "integer",
        "fsGroupChangePolicy": "string", "supplementalGroups": ["integer"],
        "seccompProfile": {"type": "string", "localhostProfile": "string"}},
    "serviceAccountName": "string", "automountServiceAccountToken": "boolean",
    "priorityClassName": "string", "imagePullSecrets": [{"name": "string"}],
    "nodeSelector": _STRING_MAP, "tolerations": [_TOLERATION],
    "affinity": "any",
}
_HPA_METRIC = {"type": "string", "pods": {
    "metric": {"name": "string", "selector": _SELECTOR},
    "target": {"type": "string", "averageValue": "quantity",
               "value": "quantity", "averageUtilization": "integer"}},
    "resource": "any", "object": "any", "external": "any",
    "containerResource": "any"}
_SCALING_RULES = {"stabilizationWindowSeconds": "integer",
                  "selectPolicy": "string", "tolerance": "quantity",
                  "policies": [{"type": "string", "value": "integer",
                                "periodSeconds": "integer"}]}
SCHEMAS = {
    "ConfigMap": {"data": _STRING_MAP, "binaryData": _STRING_MAP,
                  "immutable": "boolean"},
    "Service": {"spec": {
        "type": "string", "clusterIP": "string", "selector": _STRING_MAP,
        "ports": [{"name": "string", "port": "integer",
                   "targetPort": "int-or-string", "protocol": "string",
                   "appProtocol": "string", "nodePort": "integer"}],
        "sessionAffinity": "string", "publishNotReadyAddresses": "boolean",
        "internalTrafficPolicy": "string", "trafficDistribution": "string"}},
    "PersistentVolumeClaim": {"spec": {
        "accessModes": ["string"], "storageClassName": "string",
        "volumeMode": "string",
        "resources": {"requests": {"*": "quantity"},
                      "limits": {"*": "quantity"}}}},
    "Deployment": {"spec": {
        "replicas": "integer", "selector": _SELECTOR,
        "revisionHistoryLimit": "integer", "minReadySeconds": "integer",
        "progressDeadlineSeconds": "integer",
        "strategy": {"type": "string", "rollingUpdate": {
            "maxUnavailable": "int-or-string",
            "maxSurge": "int-or-string"}},
        "template": {"metadata": _META, "spec": _POD_SPEC}}},
    "PodDisruptionBudget": {"spec": {
        "selector": _SELECTOR, "maxUnavailable": "int-or-string",
        "minAvailable": "int-or-string",
        "unhealthyPodEvictionPolicy": "string"}},
    "HorizontalPodAutoscaler": {"spec": {
        "scaleTargetRef": {"apiVersion": "string", "kind": "string",
                           "name": "string"},
        "minReplicas": "integer", "maxReplicas": "integer",
        "metrics": [_HPA_METRIC],
        "behavior": {"scaleUp": _SCALING_RULES,
                     "scaleDown": _SCALING_RULES}}},
    "ServiceMonitor": {"spec": {
        "selector": _SELECTOR, "jobLabel": "string",
        "namespaceSelector": "any",
        "endpoints": [{
            "port": "string", "path": "string", "interval": "string",
            "scrapeTimeout": "string", "scheme": "string",
            "honorLabels": "boolean", "relabelings": ["any"],
            "metricRelabelings": ["any"], "bearerTokenSecret": _KEY_REF,
            "basicAuth": "any",
            "tlsConfig": {"serverName": "string",
                          "insecureSkipVerify": "boolean",
                          "ca": {"secret": _KEY_REF,
                                 "configMap": _KEY_REF},
                          "cert": "any", "keySecret": _KEY_REF}}]}},
    "ServingRuntime": {"spec": {
        "supportedModelFormats": [{"name": "string", "version": "string",
                                   "autoSelect": "boolean",
                                   "priority": "integer"}],
        "multiModel": "boolean", "disabled": "boolean",
        "protocolVersions": ["string"], "containers": [_CONTAINER],
        "volumes": [_VOLUME], "nodeSelector": _STRING_MAP,
        "tolerations": [_TOLERATION], "affinity": "any",
        "imagePullSecrets": [{"name": "string"}],
        "annotations": _STRING_MAP, "labels": _STRING_MAP}},
    "InferenceService": {"spec": {"predictor": {
        "minReplicas": "integer", "maxReplicas": "integer",
        "scaleMetric": "string", "scaleTarget": "integer",
        "model": {"modelFormat": {"name": "string", "version": "string"},
                  "runtime": "string", "storageUri": "string",
                  "args": ["string"], "env": ["any"],
                  "resources": "any"}}}},
}


def get(obj, path):
    """obj's value at a dotted path, or None."""
    for key in path.split("."):
        if not isinstance(obj, dict) or key not in obj:
            return None
        obj = obj[key]
    return obj


def _schema_errors(value, spec, where):
    if isinstance(spec, list):
        if not isinstance(value, list):
            return [f"{where}: a list expected, got {value!r}"]
        return [e for i, item in enumerate(value)
                for e in _schema_errors(item, spec[0], f"{where}[{i}]")]
    if isinstance(spec, dict) and "*" in spec:
        if not isinstance(value, dict):
            return [f"{where}: a map expected, got {value!r}"]
        return [e for k, v in value.items()
                for e in _schema_errors(v, spec["*"], f"{where}.{k}")]
    if isinstance(spec, dict):
        if not isinstance(value, dict):
            return [f"{where}: an object expected, got {value!r}"]
        errors = [f"{where}: unknown field {k!r}" for k in value
                  if k not in spec]
        return errors + [e for k, v in value.items() if k in spec
                         for e in _schema_errors(v, spec[k], f"{where}.{k}")]
    if spec == "any":
        ok = True
    elif spec == "string":
        ok = isinstance(value, str)
    elif spec == "boolean":
        ok = isinstance(value, bool)
    elif spec == "integer":
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif spec == "int-or-string":
        ok = isinstance(value, (str, int)) and not isinstance(value, bool)
    elif spec == "quantity":
        try:
            ok = not isinstance(value, bool) and quantity(value) >= 0
        except ValueError:
            ok = False
    else:
        raise ValueError(f"unknown schema type {spec!r}")
    return [] if ok else [f"{where}: {spec} expected, got {value!r}"]


def schema_errors(doc):
    """The fields of one rendered object that its kind's schema
    (SCHEMAS) does not have, or has with another type."""
    kind = doc.get("kind")
    spec = {"apiVersion": "string", "kind": "string", "metadata": _META,
            **SCHEMAS.get(kind, {})}
    return _schema_errors(doc, spec, f"{kind}/{get(doc, 'metadata.name')}")


def quantity(value):
    """A Kubernetes quantity ('100m', '2', '4Gi', 64) as a number."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    units = {"m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12,
             "Ki": 2 ** 10, "Mi": 2 ** 20, "Gi": 2 ** 30, "Ti": 2 ** 40}
    match = re.fullmatch(r"(\d+(?:\.\d+)?)(m|k|M|G|T|Ki|Mi|Gi|Ti)?",
                         str(value))
    if not match:
        raise ValueError(f"not a quantity: {value!r}")
    return float(match.group(1)) * units.get(match.group(2), 1)


def kustomize(tool, directory):
    """The objects `kubectl kustomize` or `kustomize build` renders."""
    command = ([tool, "build", directory]
               if os.path.basename(tool) == "kustomize"
               else [tool, "kustomize", directory])
    run = subprocess.run(command, capture_output=True, text=True, timeout=60)
    if run.returncode != 0:
        raise CheckFailed(f"{' '.join(command)} failed "
                          f"({run.returncode}): {run.stderr}")
    return [d for d in yaml.safe_load_all(run.stdout) if d]


def server_metric_names(src):
    """Metric families registered in prometheus_metrics.cc."""
    path = os.path.join(src, "server", "metrics", "prometheus_metrics.cc")
    with open(path) as f:
        text = f.read()
    return set(re.findall(r'\.Name\("(encoder_[a-z0-9_]+)"\)', text)) | set(
        re.findall(r'name = "(encoder_[a-z0-9_]+)"', text))


def exported_series(src):
    """Series names encoder-server's /metrics can carry: the families, and
    each histogram's _bucket, _sum and _count."""
    path = os.path.join(src, "server", "metrics", "prometheus_metrics.cc")
    with open(path) as f:
        text = f.read()
    histograms = set(re.findall(
        r'BuildHistogram\(\)\s*\.Name\("(encoder_[a-z0-9_]+)"\)', text))
    names = server_metric_names(src)
    return names | {h + suffix for h in histograms
                    for suffix in ("_bucket", "_sum", "_count")}


def selects(selector, labels):
    return bool(selector) and selector.items() <= (labels or {}).items()


def check_objects(where, docs, checks):
    """apiVersion per kind, required fields, names, and the schema of every
    rendered object; no object twice."""
    for doc in docs:
        kind = doc.get("kind")
        name = get(doc, "metadata.name")
        label = f"{where}: {kind}/{name}"
        checks.check(kind in API_VERSIONS, f"{label}: unexpected kind")
        checks.equal(doc.get("apiVersion"), API_VERSIONS.get(kind),
                     f"{label}: apiVersion")
        checks.check(isinstance(name, str) and NAME_RE.match(name)
                     and len(name) <= 63, f"{label}: bad metadata.name")
        for path in REQUIRED.get(kind, []):
            checks.check(get(doc, path) not in (None, {}, []),
                         f"{label}: no {path}")
        for error in schema_errors(doc):
            checks.check(False, f"{where}: {error}")
    names = [(d.get("kind"), get(d, "metadata.name")) for d in docs]
    checks.equal(len(names), len(set(names)), f"{where}: duplicate objects")


def flag_value(args, name):
    """The value of --name=VALUE in args, else None."""
    for arg in args:
        if arg.startswith(f"--{name}="):
            return arg.split("=", 1)[1]
    return None


def check_references(where, docs, served_metrics, checks,
                     expected_kinds=None):
    """Cross references of a render: selectors against pod labels,
    Service and ServiceMonitor ports against container ports, the
    ServiceMonitor's scheme against the server's TLS, volumes against
    rendered ConfigMaps and PersistentVolumeClaims, the HPA's target and
    its Pods metrics against `served_metrics` (the adapter rules' names:
    every one of them, and only those). Returns (deployments, config
    maps by name)."""
    by_kind = {}
    for doc in docs:
        by_kind.setdefault(doc["kind"], []).append(doc)
    if expected_kinds is not None:
        checks.equal(set(by_kind), set(expected_kinds),
                     f"{where}: kinds rendered")
    deployments = by_kind.get("Deployment", [])
    config_maps = {get(c, "metadata.name"): c
                   for c in by_kind.get("ConfigMap", [])}
    claims = {get(c, "metadata.name") for c in
              by_kind.get("PersistentVolumeClaim", [])}
    pod_labels = {}
    container_ports = {}
    pod_tls = {}
    for deployment in deployments:
        name = get(deployment, "metadata.name")
        labels = get(deployment, "spec.template.metadata.labels")
        checks.check(selects(get(deployment, "spec.selector.matchLabels"),
                             labels),
                     f"{where}: Deployment {name} selector vs pod labels")
        pod_labels[name] = labels
        ports = {}
        for container in get(deployment, "spec.template.spec.containers"):
            checks.check(container.get("image"),
                         f"{where}: {name}: container without image")
            for port in container.get("ports", []):
                ports[port["name"]] = port["containerPort"]
            pod_tls[name] = flag_value(container.get("args", []),
                                       "tls-cert") is not None
        container_ports[name] = ports
        annotations = get(deployment, "spec.template.metadata.annotations") \
            or {}
        if "prometheus.io/scheme" in annotations:
            checks.equal(annotations["prometheus.io/scheme"],
                         "https" if pod_tls[name] else "http",
                         f"{where}: {name}: prometheus.io/scheme vs "
                         "--tls-cert")
        for volume in get(deployment, "spec.template.spec.volumes") or []:
            if "configMap" in volume:
                checks.check(volume["configMap"]["name"] in config_maps,
                             f"{where}: {name}: volume {volume['name']} "
                             f"names a ConfigMap that is not rendered")
            claim = get(volume, "persistentVolumeClaim.claimName")
            if claim is not None and claims:
                checks.check(claim in claims,
                             f"{where}: {name}: volume {volume['name']} "
                             f"names a claim that is not rendered")
        for constraint in get(deployment, "spec.template.spec."
                                          "topologySpreadConstraints") or []:
            checks.check(selects(get(constraint, "labelSelector.matchLabels"),
                                 labels),
                         f"{where}: {name}: topology spread constraint "
                         f"{constraint.get('topologyKey')} does not select "
                         "its own pods")

    def selected_deployments(selector):
        return [d for d, labels in pod_labels.items()
                if selects(selector, labels)]

    services = {}
    for service in by_kind.get("Service", []):
        name = get(service, "metadata.name")
        services[name] = service
        chosen = selected_deployments(get(service, "spec.selector"))
        checks.check(chosen, f"{where}: Service {name} selects no pods")
        for port in get(service, "spec.ports"):
            target = port.get("targetPort", port["port"])
            for deployment in chosen:
                ok = (target in container_ports[deployment]
                      if isinstance(target, str)
                      else target in container_ports[deployment].values())
                checks.check(ok, f"{where}: Service {name} port "
                             f"{port.get('name')} -> {target!r}: no such "
                             f"container port in {deployment}")
    for pdb in by_kind.get("PodDisruptionBudget", []):
        name = get(pdb, "metadata.name")
        checks.check(selected_deployments(get(pdb, "spec.selector.matchLabels")),
                     f"{where}: PodDisruptionBudget {name} selects no pods")
        spec = pdb["spec"]
        checks.equal(("minAvailable" in spec) + ("maxUnavailable" in spec), 1,
                     f"{where}: PodDisruptionBudget {name} needs exactly one "
                     "of minAvailable and maxUnavailable")

    for hpa in by_kind.get("HorizontalPodAutoscaler", []):
        name = get(hpa, "metadata.name")
        target = hpa["spec"]["scaleTargetRef"]
        checks.check(target.get("kind") == "Deployment"
                     and target.get("apiVersion") == "apps/v1"
                     and target.get("name") in pod_labels,
                     f"{where}: HPA {name} targets {target}, not a rendered "
                     "Deployment")
        checks.check(1 <= hpa["spec"].get("minReplicas", 1)
                     <= hpa["spec"]["maxReplicas"],
                     f"{where}: HPA {name} replica bounds")
        for deployment in deployments:
            if get(deployment, "metadata.name") == target.get("name"):
                checks.check("replicas" not in deployment["spec"],
                             f"{where}: HPA {name}'s Deployment sets "
                             "replicas (each apply would reset the HPA's "
                             "count)")
        metrics = hpa["spec"]["metrics"]
        checks.check(all(m.get("type") == "Pods" for m in metrics),
                     f"{where}: HPA {name} scales on other than Pods "
                     f"metrics: {[m.get('type') for m in metrics]}")
        names = [get(m, "pods.metric.name") for m in metrics]
        checks.equal(sorted(names), sorted(served_metrics),
                     f"{where}: HPA {name} metrics vs the metrics the "
                     "adapter rules serve")
        for metric in metrics:
            metric_name = get(metric, "pods.metric.name")
            value = get(metric, "pods.target.averageValue")
            try:
                positive = value is not None and quantity(value) > 0
            except ValueError:
                positive = False
            checks.check(get(metric, "pods.target.type") == "AverageValue"
                         and positive,
                         f"{where}: HPA {name} {metric_name} target {value!r}")

    for monitor in by_kind.get("ServiceMonitor", []):
        name = get(monitor, "metadata.name")
        selector = get(monitor, "spec.selector.matchLabels")
        chosen = [s for s in services.values()
                  if selects(selector, get(s, "metadata.labels"))]
        checks.check(chosen, f"{where}: ServiceMonitor {name} selects no "
                     "Service")
        for endpoint in monitor["spec"]["endpoints"]:
            checks.equal(endpoint.get("path", "/metrics"), "/metrics",
                         f"{where}: ServiceMonitor {name} path")
            scraped = [s for s in chosen
                       if endpoint.get("port") in
                       {p.get("name") for p in s["spec"]["ports"]}]
            checks.check(scraped, f"{where}: ServiceMonitor {name} port "
                         f"{endpoint.get('port')!r} is on no selected Service")
            for service in scraped:
                port = [p for p in service["spec"]["ports"]
                        if p.get("name") == endpoint.get("port")][0]
                checks.equal(port["port"], METRICS_PORT,
                             f"{where}: ServiceMonitor {name} scrapes port "
                             f"{port['port']}")
                for deployment in selected_deployments(
                        get(service, "spec.selector")):
                    checks.equal(endpoint.get("scheme", "http"),
                                 "https" if pod_tls[deployment] else "http",
                                 f"{where}: ServiceMonitor {name} scheme vs "
                                 f"{deployment}'s --tls-cert")
    return deployments, config_maps


def adapter_metrics(docs, series_names, checks):
    """{custom metric name: series read} of the Prometheus adapter rules;
    each rule must read series encoder-server exports (`series_names`, its
    seriesQuery and every series its metricsQuery names) and key on
    namespace and pod."""
    maps = [d for d in docs if d.get("kind") == "ConfigMap"]
    check_objects("prometheus-adapter", docs, checks)
    checks.check(len(maps) == 1 and "config.yaml" in maps[0].get("data", {}),
                 "prometheus-adapter: one ConfigMap with config.yaml")
    if not maps:
        return {}
    config = yaml.safe_load(maps[0]["data"]["config.yaml"])
    served = {}
    for rule in config.get("rules", []):
        series = re.match(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)", rule["seriesQuery"])
        series = series.group(1) if series else None
        checks.check(series in series_names,
                     f"adapter rule reads {series}, which encoder-server "
                     "does not export")
        overrides = get(rule, "resources.overrides") or {}
        checks.equal({k: v.get("resource") for k, v in overrides.items()},
                     {"namespace": "namespace", "pod": "pod"},
                     f"adapter rule {series}: resource overrides")
        name = rule.get("name", {})
        checks.check(re.search(name.get("matches", "^$"), series or ""),
                     f"adapter rule {series}: name.matches does not match")
        query = rule.get("metricsQuery", "")
        for part in ("<<.Series>>", "<<.LabelMatchers>>", "<<.GroupBy>>"):
            checks.check(part in query,
                         f"adapter rule {series}: metricsQuery lacks {part}")
        for other in re.findall(r"\bencoder_[a-z0-9_]+", query):
            checks.check(other in series_names,
                         f"adapter rule {series}: metricsQuery reads "
                         f"{other}, which encoder-server does not export")
        served[name.get("as", series)] = rule
    return served


def documented_flags(src):
    """({flag names}, {ENCODER_ variables}) of docs/configuration.md's
    tables, which the configuration_doc test keeps equal to the server's
    option table."""
    flags, variables = set(), set()
    with open(os.path.join(src, "docs", "configuration.md")) as f:
        for line in f:
            cells = line.split(" | ")
            if not line.startswith("| `-") or len(cells) < 2:
                continue
            flags |= set(re.findall(r"`--([a-z0-9-]+)`", cells[0]))
            variables |= set(re.findall(r"`(ENCODER_[A-Z0-9_]+)`", cells[1]))
    return flags, variables


def check_container_flags(where, container, documented, checks):
    """Every flag in a container's args and every ENCODER_ variable of its
    environment is one the server has."""
    flags, variables = documented
    for arg in container.get("args", []):
        match = re.match(r"^--([a-z0-9-]+)", arg)
        checks.check(match and match.group(1) in flags,
                     f"{where}: {arg!r} is not a flag of encoder-server "
                     "(docs/configuration.md)")
    for env in container.get("env", []):
        if env["name"].startswith("ENCODER_"):
            checks.check(env["name"] in variables,
                         f"{where}: {env['name']} is not a variable of "
                         "encoder-server (docs/configuration.md)")
