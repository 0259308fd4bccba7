#!/usr/bin/python3
"""The Helm chart deploy/helm/encoder-server, linted, rendered and checked.

`helm lint --strict` and `helm template` run over the default values and
each values file of the chart's ci/ (GPU, TLS with auth, plaintext without
HPA, KServe), and values.schema.json must refuse bad values. Every rendered
object passes the checks kubernetes_test.py applies to the Kustomize
render (deploy_util: apiVersion per kind, required fields, the fields and
types of each kind's schema, selectors, ports, the HPA's metrics equal to
those the Prometheus adapter rules of deploy/k8s/prometheus-adapter serve,
the ServiceMonitor's port and scheme, every flag and ENCODER_ variable one
the server has), plus manifests_test.check_deployment (probes, drain,
resources, security). The values of each file must show up where they
belong: model ids and dtype in the container's flags, the model cache
volume, the GPU limit, tolerations and node selector, the TLS Secret's
mount and flags, the token Secret and API key, the ServiceMonitor's TLS,
the dashboard ConfigMap (valid JSON equal to
deploy/grafana/dashboards/encoder.json), the KServe runtime's HTTP probes
on routes the server has. The adapter rules' queries must parse (promtool
check rules). The chart's default render must equal the Kustomize overlay
deploy/k8s/overlays/cpu, and values-gpu.yaml's the gpu overlay, once
Helm's own labels and annotations are dropped, so the two cannot drift.
"""

import copy
import difflib
import json
import os
import re
import subprocess

import yaml

import deploy_util as du
import manifests_test as mt

CHART = os.path.join("deploy", "helm", "encoder-server")
NAMESPACE = "encoder"
# Labels and annotations only Helm's render has: the chart version, the
# release (its instance label, selectors included), the pods' roll-on-change
# checksums.
HELM_ONLY_LABELS = {"helm.sh/chart", "app.kubernetes.io/managed-by",
                    "app.kubernetes.io/instance", "app.kubernetes.io/version"}
HELM_ONLY_ANNOTATION_PREFIXES = ("checksum/",)
# Objects the chart renders in Deployment form, by values file.
DEPLOYMENT_KINDS = {"ConfigMap", "Service", "Deployment",
                    "PodDisruptionBudget", "HorizontalPodAutoscaler",
                    "ServiceMonitor"}


class Variant:
    """One `helm template`: a release name and values files (in the
    chart's directory), and the kinds it must render."""

    def __init__(self, name, release, files, kinds, overlay=None):
        self.name = name
        self.release = release
        self.files = files
        self.kinds = kinds
        # The Kustomize overlay whose render it must equal.
        self.overlay = overlay


VARIANTS = [
    Variant("default", "encoder-server", [], DEPLOYMENT_KINDS, "cpu"),
    Variant("gpu-overlay", "encoder-server-gpu", ["values-gpu.yaml"],
            DEPLOYMENT_KINDS, "gpu"),
    Variant("gpu", "encoder-server-gpu",
            ["values-gpu.yaml", "ci/gpu-values.yaml"],
            DEPLOYMENT_KINDS - {"ConfigMap"} | {"PersistentVolumeClaim"}),
    Variant("tls-auth", "encoder-server", ["ci/tls-auth-values.yaml"],
            DEPLOYMENT_KINDS),
    Variant("plain", "encoder-server", ["ci/plain-values.yaml"],
            {"ConfigMap", "Service", "Deployment"}),
    Variant("kserve", "encoder-server", ["ci/kserve-values.yaml"],
            {"ServingRuntime", "InferenceService"}),
]


def helm(tool, *args, check=True):
    run = subprocess.run([tool, *args], capture_output=True, text=True,
                         timeout=120)
    if check and run.returncode != 0:
        raise du.CheckFailed(f"helm {' '.join(args)} failed "
                             f"({run.returncode}): {run.stderr}")
    return run


def merge_values(base, override):
    """Helm's merge of a values file into the defaults: maps merge key by
    key, anything else (lists included) is replaced; null deletes."""
    result = copy.deepcopy(base)
    for key, value in override.items():
        if value is None:
            result.pop(key, None)
        elif isinstance(value, dict) and isinstance(result.get(key), dict):
            result[key] = merge_values(result[key], value)
        else:
            result[key] = copy.deepcopy(value)
    return result


def load_values(chart, files):
    with open(os.path.join(chart, "values.yaml")) as f:
        values = yaml.safe_load(f)
    for name in files:
        with open(os.path.join(chart, name)) as f:
            values = merge_values(values, yaml.safe_load(f) or {})
    return values


def render(tool, chart, variant):
    command = ["template", variant.release, chart, "--namespace", NAMESPACE]
    for name in variant.files:
        command += ["-f", os.path.join(chart, name)]
    return [d for d in yaml.safe_load_all(helm(tool, *command).stdout) if d]


def normalize(obj):
    """An object without Helm's own labels and annotations, its lists of
    named items (ports, volumes, mounts) in name order and its JSON
    ConfigMap values parsed."""
    if isinstance(obj, dict):
        out = {}
        for key, value in obj.items():
            if key in HELM_ONLY_LABELS or key.startswith(
                    HELM_ONLY_ANNOTATION_PREFIXES):
                continue
            if isinstance(value, str) and key.endswith(".json"):
                value = json.loads(value)
            out[key] = normalize(value)
        return out
    if isinstance(obj, list):
        items = [normalize(v) for v in obj]
        if items and all(isinstance(v, dict) and "name" in v for v in items):
            items.sort(key=lambda v: v["name"])
        return items
    return obj


def canonical_names(docs, suffix):
    """Every object name (and every string equal to one, as in references)
    with `suffix` removed: kustomize appends the GPU overlay's suffix to a
    name, Helm's release name carries it in front of the chart's."""
    names = {du.get(d, "metadata.name") for d in docs}

    def rename(value):
        if isinstance(value, dict):
            return {k: rename(v) for k, v in value.items()}
        if isinstance(value, list):
            return [rename(v) for v in value]
        if isinstance(value, str) and value in names and suffix:
            return value.replace(suffix, "", 1)
        return value

    return [rename(d) for d in docs]


def compare_with_overlay(where, chart_docs, overlay_docs, suffix, checks):
    def keyed(docs):
        docs = canonical_names([normalize(d) for d in docs], suffix)
        return {(d["kind"], d["metadata"]["name"]): d for d in docs}

    ours, theirs = keyed(chart_docs), keyed(overlay_docs)
    checks.equal(sorted(ours), sorted(theirs),
                 f"{where}: objects of the chart vs the Kustomize overlay")
    for key in sorted(set(ours) & set(theirs)):
        if ours[key] == theirs[key]:
            continue
        diff = difflib.unified_diff(
            yaml.safe_dump(theirs[key], sort_keys=True).splitlines(),
            yaml.safe_dump(ours[key], sort_keys=True).splitlines(),
            "kustomize", "helm", lineterm="", n=2)
        checks.check(False, f"{where}: {key[0]}/{key[1]} differs from the "
                     "Kustomize overlay's:\n" + "\n".join(diff))


def proto_service(src):
    """The full name of the gRPC service (the readiness probe's)."""
    with open(os.path.join(src, "proto", "encoder", "v1",
                           "encoder.proto")) as f:
        text = f.read()
    package = re.search(r"^package\s+([\w.]+);", text, re.MULTILINE)
    service = re.search(r"^service\s+(\w+)", text, re.MULTILINE)
    return f"{package.group(1)}.{service.group(1)}"


def http_get_routes(src):
    """The paths the HTTP port answers GET on."""
    with open(os.path.join(src, "server", "http", "http_front.cc")) as f:
        return set(re.findall(r'http\.Add\("GET",\s*"([^"*]+)"', f.read()))


def check_probes(where, container, health_service, get_routes, checks):
    """gRPC probes on the port --health-listen opens (a container port)
    and the readiness probe on the service the server reports; HTTP probes
    on GET routes of the port --port opens."""
    args = container.get("args", [])
    ports = {p["containerPort"] for p in container.get("ports", [])}
    for kind in ("startupProbe", "readinessProbe", "livenessProbe"):
        probe = container.get(kind)
        if probe is None:
            continue
        if "grpc" in probe:
            listen = du.flag_value(args, "health-listen") or ""
            checks.equal(str(probe["grpc"]["port"]), listen.rpartition(":")[2],
                         f"{where}: {kind} port vs --health-listen")
            checks.check(probe["grpc"]["port"] in ports,
                         f"{where}: {kind} port is not a container port")
            if kind == "readinessProbe":
                checks.equal(probe["grpc"].get("service"), health_service,
                             f"{where}: readiness probe's health service")
        elif checks.check("httpGet" in probe,
                          f"{where}: {kind} neither gRPC nor HTTP"):
            get = probe["httpGet"]
            checks.check(get["path"] in get_routes,
                         f"{where}: {kind} path {get['path']} is not a GET "
                         f"route of the server ({sorted(get_routes)})")
            checks.equal(str(get["port"]), du.flag_value(args, "port"),
                         f"{where}: {kind} port vs --port")
            checks.check(get["port"] in ports,
                         f"{where}: {kind} port is not a container port")
    if "readinessProbe" in container:
        probe = container["readinessProbe"]
        checks.check(du.get(probe, "httpGet.path") in (None, "/ready"),
                     f"{where}: the readiness probe must wait for the models "
                     "(/ready), not the process (/health)")


def volume_at(pod, container, path):
    """(mount, volume) of the volume mounted at path."""
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    for mount in container.get("volumeMounts", []):
        if mount["mountPath"] == path:
            return mount, volumes.get(mount["name"], {})
    return None, {}


def check_secret_file(where, pod, container, flag, path, secret, checks):
    args = container.get("args", [])
    checks.equal(du.flag_value(args, flag), path, f"{where}: --{flag}")
    mount, volume = volume_at(pod, container, os.path.dirname(path))
    checks.check(mount is not None and mount.get("readOnly") is True,
                 f"{where}: {os.path.dirname(path)} is not a read-only mount")
    checks.equal(du.get(volume, "secret.secretName"), secret,
                 f"{where}: the Secret behind --{flag}")


def check_server_values(where, pod, container, values, by_kind, checks):
    """The values that become the server's flags, mounts and environment,
    for the Deployment's container and the KServe runtime's alike."""
    args = container.get("args", [])
    kserve = values["kserve"]["enabled"]
    ids = values["models"]["ids"]
    if kserve:
        checks.equal(du.flag_value(args, "model-dir"),
                     "{{.Name}}=/mnt/models",
                     f"{where}: the model KServe's storage initializer "
                     "writes, served under the InferenceService's name")
    elif ids:
        checks.equal([a.split("=", 1)[1] for a in args
                      if a.startswith("--model-id=")], ids,
                     f"{where}: --model-id flags vs models.ids")
        checks.equal(du.flag_value(args, "models"), None,
                     f"{where}: --models beside --model-id")
        checks.equal(du.flag_value(args, "huggingface-hub-cache"), "/data",
                     f"{where}: --huggingface-hub-cache")
        mount, volume = volume_at(pod, container, "/data")
        checks.check(mount is not None and not mount.get("readOnly"),
                     f"{where}: no writable cache volume at /data")
        cache = values["models"]["cache"]
        claims = by_kind.get("PersistentVolumeClaim", [])
        if cache["existingClaim"] or cache["create"]:
            claim = du.get(volume, "persistentVolumeClaim.claimName")
            if cache["existingClaim"]:
                checks.equal(claim, cache["existingClaim"],
                             f"{where}: cache claim")
            else:
                checks.equal([du.get(c, "metadata.name") for c in claims],
                             [claim], f"{where}: the created cache claim")
                for c in claims:
                    checks.equal(du.get(c, "spec.resources.requests.storage"),
                                 cache["size"], f"{where}: cache size")
                    checks.equal(du.get(c, "spec.storageClassName"),
                                 cache["storageClassName"] or None,
                                 f"{where}: cache storage class")
                    checks.equal(du.get(c, "spec.accessModes"),
                                 cache["accessModes"],
                                 f"{where}: cache access modes")
        else:
            checks.equal(du.get(volume, "emptyDir.sizeLimit"),
                         cache["sizeLimit"], f"{where}: cache emptyDir size")
        checks.equal(du.flag_value(args, "revision"),
                     values["models"]["revision"] or None,
                     f"{where}: --revision")
        token = values["models"]["hfTokenSecret"]
        if token["name"]:
            check_secret_file(where, pod, container, "hf-token-file",
                              f"/hf-token/{token['key']}", token["name"],
                              checks)
    checks.equal(du.flag_value(args, "dtype"), values["dtype"] or None,
                 f"{where}: --dtype vs dtype")
    drain = values["drain"]
    checks.equal(du.flag_value(args, "drain-grace"),
                 f"{drain['graceSeconds']}s", f"{where}: --drain-grace")
    unready = drain.get("unreadySeconds")
    checks.equal(du.flag_value(args, "drain-unready"),
                 None if unready is None else f"{unready}s",
                 f"{where}: --drain-unready")
    auth = values["auth"]
    if auth["enabled"]:
        check_secret_file(where, pod, container, "auth-token-file",
                          f"/auth/{auth['tokenKey']}", auth["secretName"],
                          checks)
    else:
        checks.equal(du.flag_value(args, "auth-token-file"), None,
                     f"{where}: --auth-token-file with auth off")
    env = {e["name"]: e for e in container.get("env", [])}
    if auth["apiKeySecret"]["name"]:
        checks.equal(du.get(env.get("ENCODER_API_KEY", {}),
                            "valueFrom.secretKeyRef"),
                     {"name": auth["apiKeySecret"]["name"],
                      "key": auth["apiKeySecret"]["key"]},
                     f"{where}: ENCODER_API_KEY from the API key Secret")
    else:
        checks.check("ENCODER_API_KEY" not in env,
                     f"{where}: ENCODER_API_KEY without a Secret")
    extra = values["extraArgs"]
    checks.equal(args[len(args) - len(extra):] if extra else [], extra,
                 f"{where}: extraArgs at the end of the flags")
    image = values["image"]
    checks.equal(container.get("image"),
                 f"{image['repository']}:{image['tag']}", f"{where}: image")

    # GPU: the count in requests and limits, the GPU nodes' taint
    # tolerated, the node selector.
    resources = container.get("resources", {})
    gpu = values["gpu"]
    for part in ("requests", "limits"):
        checks.equal(resources.get(part, {}).get("nvidia.com/gpu"),
                     gpu["count"] if gpu["enabled"] else None,
                     f"{where}: nvidia.com/gpu {part}")
    tolerations = pod.get("tolerations", [])
    gpu_toleration = {"key": "nvidia.com/gpu", "operator": "Exists",
                      "effect": "NoSchedule"}
    checks.equal(gpu_toleration in tolerations,
                 gpu["enabled"] and gpu["tolerate"],
                 f"{where}: the nvidia.com/gpu taint tolerated")
    for toleration in values["tolerations"]:
        checks.check(toleration in tolerations,
                     f"{where}: toleration {toleration} missing")
    checks.equal(pod.get("nodeSelector", {}), values["nodeSelector"],
                 f"{where}: nodeSelector")


def check_deployment_values(where, docs, values, repository, checks):
    by_kind = {}
    for doc in docs:
        by_kind.setdefault(doc["kind"], []).append(doc)
    deployments = by_kind["Deployment"]
    checks.equal(len(deployments), 1, f"{where}: Deployments")
    deployment = deployments[0]
    name = deployment["metadata"]["name"]
    pod = deployment["spec"]["template"]["spec"]
    container = pod["containers"][0]
    args = container.get("args", [])
    tls = values["tls"]
    config_maps = {du.get(c, "metadata.name"): c
                   for c in by_kind.get("ConfigMap", [])}
    uses_repository = not values["models"]["ids"]
    mt.check_deployment(deployment, config_maps,
                        repository if uses_repository else None, checks,
                        gpu=values["gpu"]["enabled"], tls=tls["enabled"],
                        auth=values["auth"]["enabled"])
    check_server_values(where, pod, container, values, by_kind, checks)
    checks.equal(du.get(deployment, "spec.template.metadata.labels").get(
        "app.kubernetes.io/component"),
        "gpu" if values["gpu"]["enabled"] else "cpu",
        f"{where}: component label")
    drain = values["drain"]
    checks.equal(pod.get("terminationGracePeriodSeconds"),
                 drain["preStopSeconds"] + drain["graceSeconds"] + 15,
                 f"{where}: terminationGracePeriodSeconds")
    checks.equal(du.get(container, "lifecycle.preStop.exec.command"),
                 ["sleep", str(drain["preStopSeconds"])], f"{where}: preStop")
    if tls["enabled"]:
        check_secret_file(where, pod, container, "tls-cert", "/tls/tls.crt",
                          tls["secretName"], checks)
        checks.equal(du.flag_value(args, "tls-key"), "/tls/tls.key",
                     f"{where}: --tls-key")
    checks.equal(du.flag_value(args, "tls-client-ca"),
                 f"/tls/{tls['clientCAKey']}"
                 if tls["enabled"] and tls["clientCAKey"] else None,
                 f"{where}: --tls-client-ca")
    checks.equal(volume_at(pod, container, "/tls")[0] is not None,
                 tls["enabled"], f"{where}: /tls mounted iff TLS")
    checks.equal(volume_at(pod, container, "/models")[0] is not None,
                 uses_repository, f"{where}: /models mounted iff no ids")
    # The Deployment's strategy and spread.
    checks.equal(deployment["spec"].get("strategy"),
                 merge_values({}, values["strategy"]), f"{where}: strategy")
    checks.equal([{k: v for k, v in c.items() if k != "labelSelector"}
                  for c in pod.get("topologySpreadConstraints", [])],
                 [{k: v for k, v in c.items() if k != "labelSelector"}
                  for c in values["topologySpreadConstraints"]],
                 f"{where}: topology spread constraints")

    autoscaling = values["autoscaling"]
    hpas = by_kind.get("HorizontalPodAutoscaler", [])
    if autoscaling["enabled"]:
        for hpa in hpas:
            spec = hpa["spec"]
            checks.equal((spec.get("minReplicas"), spec["maxReplicas"]),
                         (autoscaling["minReplicas"],
                          autoscaling["maxReplicas"]),
                         f"{where}: HPA replica bounds")
            checks.equal([(du.get(m, "pods.metric.name"),
                           du.quantity(du.get(m, "pods.target.averageValue")))
                          for m in spec["metrics"]],
                         [(m["name"], du.quantity(m["averageValue"]))
                          for m in autoscaling["metrics"]],
                         f"{where}: HPA metrics and targets vs values")
    else:
        checks.equal(deployment["spec"].get("replicas"),
                     values["replicaCount"], f"{where}: replicas")
    services = {du.get(s, "metadata.name"): s
                for s in by_kind.get("Service", [])}
    checks.equal(f"{name}-headless" in services,
                 values["service"]["headless"], f"{where}: headless Service")
    for service in services.values():
        for port in service["spec"]["ports"]:
            want = ("https" if tls["enabled"] else
                    {"grpc": "kubernetes.io/h2c", "metrics": "http"}.get(
                        port["name"]))
            checks.equal(port.get("appProtocol"), want,
                         f"{where}: Service port {port['name']} appProtocol")
    monitor = values["serviceMonitor"]
    for sm in by_kind.get("ServiceMonitor", []):
        labels = du.get(sm, "metadata.labels")
        checks.check(monitor["labels"].items() <= labels.items(),
                     f"{where}: ServiceMonitor labels {labels} lack "
                     f"{monitor['labels']}")
        for endpoint in sm["spec"]["endpoints"]:
            checks.equal(endpoint.get("interval"), monitor["interval"],
                         f"{where}: scrape interval")
            if tls["enabled"]:
                checks.equal(du.get(endpoint, "tlsConfig.ca.secret"),
                             {"name": tls["secretName"],
                              "key": monitor["caKey"]},
                             f"{where}: ServiceMonitor CA Secret")
                checks.equal(du.get(endpoint, "tlsConfig.serverName"),
                             monitor["tlsServerName"] or name,
                             f"{where}: ServiceMonitor serverName")
            else:
                checks.check("tlsConfig" not in endpoint,
                             f"{where}: ServiceMonitor tlsConfig without TLS")


def check_dashboard(where, docs, values, src, checks):
    with open(os.path.join(src, "deploy", "grafana", "dashboards",
                           "encoder.json")) as f:
        original = json.load(f)
    dashboard = values["dashboard"]
    maps = [d for d in docs if d["kind"] == "ConfigMap"
            and "encoder.json" in d.get("data", {})]
    checks.equal(len(maps), 1 if dashboard["enabled"] else 0,
                 f"{where}: dashboard ConfigMaps")
    for config_map in maps:
        try:
            rendered = json.loads(config_map["data"]["encoder.json"])
        except json.JSONDecodeError as e:
            checks.check(False, f"{where}: dashboard is not JSON: {e}")
            continue
        checks.check(rendered == original, f"{where}: the dashboard "
                     "ConfigMap differs from deploy/grafana/dashboards/"
                     "encoder.json")
        labels = du.get(config_map, "metadata.labels")
        checks.check(dashboard["labels"].items() <= labels.items(),
                     f"{where}: dashboard labels {labels} lack "
                     f"{dashboard['labels']} (Grafana's sidecar)")
        checks.equal(du.get(config_map, "metadata.namespace"),
                     dashboard["namespace"] or None,
                     f"{where}: dashboard namespace")


def check_kserve(where, docs, values, health_service, get_routes,
                 documented, checks):
    runtimes = [d for d in docs if d["kind"] == "ServingRuntime"]
    services = [d for d in docs if d["kind"] == "InferenceService"]
    checks.equal((len(runtimes), len(services)), (1, 1),
                 f"{where}: ServingRuntimes and InferenceServices")
    if not runtimes or not services:
        return
    runtime, isvc = runtimes[0], services[0]
    spec = runtime["spec"]
    containers = spec["containers"]
    checks.equal([c["name"] for c in containers], ["kserve-container"],
                 f"{where}: KServe's container name")
    container = containers[0]
    args = container.get("args", [])
    du.check_container_flags(where, container, documented, checks)
    check_probes(where, container, health_service, get_routes, checks)
    checks.check("readinessProbe" in container and "livenessProbe"
                 in container, f"{where}: readiness and liveness probes")
    checks.equal([p["containerPort"] for p in container.get("ports", [])],
                 [int(du.flag_value(args, "port") or 0)],
                 f"{where}: one container port, --port's")
    check_server_values(where, spec, container, values, {}, checks)
    mt.check_pod_security(where, spec, container, args, checks, tls=False,
                          auth=values["auth"]["enabled"])
    model = isvc["spec"]["predictor"]["model"]
    checks.equal(model.get("runtime"), runtime["metadata"]["name"],
                 f"{where}: InferenceService runtime")
    checks.check(model["modelFormat"]["name"] in
                 [f["name"] for f in spec["supportedModelFormats"]],
                 f"{where}: model format {model['modelFormat']} is not one "
                 "the runtime supports")
    wanted = values["kserve"]["inferenceService"]
    checks.equal(model.get("storageUri"), wanted["storageUri"],
                 f"{where}: storageUri")
    checks.equal((isvc["spec"]["predictor"].get("minReplicas"),
                  isvc["spec"]["predictor"].get("maxReplicas")),
                 (wanted["minReplicas"], wanted["maxReplicas"]),
                 f"{where}: InferenceService replica bounds")


def check_adapter_queries(promtool, served, tmp, checks):
    """Every adapter rule's metricsQuery, its templates filled in as the
    adapter fills them, is PromQL that Prometheus' parser accepts."""
    rules = []
    for name, rule in sorted(served.items()):
        series = re.match(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)",
                          rule["seriesQuery"]).group(1)
        query = (rule["metricsQuery"].replace("<<.Series>>", series)
                 .replace("<<.LabelMatchers>>",
                          f'namespace="{NAMESPACE}",pod=~"encoder-server-.*"')
                 .replace("<<.GroupBy>>", "namespace,pod"))
        checks.check("<<" not in query,
                     f"adapter rule {name}: unknown template in {query}")
        rules.append({"record": f"adapter:{name}", "expr": query})
    path = os.path.join(tmp, "adapter-rules.yml")
    with open(path, "w") as f:
        yaml.safe_dump({"groups": [{"name": "adapter", "rules": rules}]}, f)
    run = subprocess.run([promtool, "check", "rules", path],
                         capture_output=True, text=True, timeout=60)
    checks.equal(run.returncode, 0, f"promtool check rules on the adapter "
                 f"queries: {run.stdout}{run.stderr}")


def check_schema_refusals(tool, chart, checks):
    """values.schema.json refuses values the server or the chart cannot
    take."""
    for setting, why in (
            (["--set", "dtype=float64"], "a dtype the server lacks"),
            (["--set", "modelIds[0]=BAAI/bge-small-en-v1.5"],
             "an unknown top-level value"),
            (["--set-json", 'models.ids=["a/b,c/d"]'],
             "two model ids in one (one --model-id each)"),
            (["--set", "gpu.count=0"], "a GPU count of 0")):
        run = helm(tool, "template", "refused", chart, *setting, check=False)
        checks.check(run.returncode != 0 and "schema" in run.stderr,
                     f"values.schema.json accepted {why} ({setting}): "
                     f"rc {run.returncode} {run.stderr.strip()[:300]}")


def check_chart_files(src, chart, checks):
    with open(os.path.join(chart, "Chart.yaml")) as f:
        meta = yaml.safe_load(f)
    with open(os.path.join(src, "CMakeLists.txt")) as f:
        version = re.search(r"project\([^)]*VERSION\s+([\d.]+)", f.read())
    checks.equal(meta.get("appVersion"), version and version.group(1),
                 "Chart.yaml appVersion vs CMakeLists.txt's project VERSION")
    checks.equal(meta.get("name"), "encoder-server", "chart name")
    original = os.path.join(src, "deploy", "grafana", "dashboards",
                            "encoder.json")
    copy_path = os.path.join(chart, "dashboards", "encoder.json")
    with open(original, "rb") as a, open(copy_path, "rb") as b:
        checks.check(a.read() == b.read(),
                     f"{copy_path} differs from {original}")


def main():
    parser = du.common_args(__doc__)
    parser.add_argument("--helm", required=True)
    parser.add_argument("--kustomize", required=True,
                        help="kubectl (runs `kubectl kustomize`) or "
                             "kustomize (runs `kustomize build`)")
    parser.add_argument("--promtool", required=True)
    args = parser.parse_args()
    du.require_executable(args.helm, "helm")
    du.require_executable(args.kustomize, "kubectl or kustomize")
    du.require_executable(args.promtool, "promtool")
    src = args.source_dir
    chart = os.path.join(src, CHART)
    k8s = os.path.join(src, "deploy", "k8s")
    with du.Harness(args, "helm") as h:
        checks = du.Checks()
        print(helm(args.helm, "version", "--short").stdout.strip())
        served = du.adapter_metrics(
            du.kustomize(args.kustomize,
                         os.path.join(k8s, "prometheus-adapter")),
            du.exported_series(src), checks)
        checks.check("encoder_queue_seconds_per_sequence" in served and
                     "encoder_queue_depth" in served,
                     f"the adapter serves no queue time or queue depth: "
                     f"{sorted(served)}")
        check_adapter_queries(args.promtool, served, h.tmp, checks)
        documented = du.documented_flags(src)
        health_service = proto_service(src)
        get_routes = http_get_routes(src)
        checks.check({"/health", "/ready"} <= get_routes,
                     f"GET routes read from http_front.cc: {get_routes}")
        with open(os.path.join(src, "deploy", "models",
                               "repository.json")) as f:
            repository = json.load(f)
        check_chart_files(src, chart, checks)
        check_schema_refusals(args.helm, chart, checks)

        for variant in VARIANTS:
            where = variant.name
            files = []
            for name in variant.files:
                files += ["-f", os.path.join(chart, name)]
            lint = helm(args.helm, "lint", "--strict", chart, *files,
                        check=False)
            checks.check(lint.returncode == 0 and
                         "0 chart(s) failed" in lint.stdout,
                         f"{where}: helm lint --strict: {lint.stdout}"
                         f"{lint.stderr}")
            values = load_values(chart, variant.files)
            docs = render(args.helm, chart, variant)
            du.check_objects(where, docs, checks)
            kinds = {d["kind"] for d in docs}
            checks.equal(kinds, variant.kinds, f"{where}: kinds rendered")
            for doc in docs:
                namespace = du.get(doc, "metadata.namespace")
                checks.check(namespace in (None, values["dashboard"]
                                           ["namespace"] or None),
                             f"{where}: {doc['kind']} in namespace "
                             f"{namespace}")
            check_dashboard(where, docs, values, src, checks)
            if values["kserve"]["enabled"]:
                check_kserve(where, docs, values, health_service, get_routes,
                             documented, checks)
            else:
                du.check_references(where, docs, served, checks)
                for deployment in (d for d in docs
                                   if d["kind"] == "Deployment"):
                    for container in du.get(deployment,
                                            "spec.template.spec.containers"):
                        du.check_container_flags(where, container,
                                                 documented, checks)
                        check_probes(where, container, health_service,
                                     get_routes, checks)
                check_deployment_values(where, docs, values, repository,
                                        checks)
            if variant.overlay:
                overlay = du.kustomize(args.kustomize, os.path.join(
                    k8s, "overlays", variant.overlay))
                suffix = "-gpu" if variant.overlay == "gpu" else ""
                compare_with_overlay(where, docs, overlay, suffix, checks)
            print(f"{where}: {len(docs)} objects checked "
                  f"({', '.join(sorted(kinds))})", flush=True)
        checks.raise_if_failed()
    print("PASSED")


if __name__ == "__main__":
    du.run(main)
