#!/usr/bin/python3
"""The Kubernetes manifests under deploy/k8s, rendered with kustomize and
checked object by object.

Every overlay (deploy/k8s/overlays/*) and the Prometheus adapter
configuration are rendered with `kubectl kustomize` (or a standalone
`kustomize build`). Each rendered object must have the apiVersion its kind
is served under, the fields that kind requires, and consistent cross
references: Deployment selectors match their pod labels, Services and the
PodDisruptionBudget select the Deployment's pods and name container ports
that exist, the HPA targets a rendered Deployment and scales on Pods
metrics that the adapter rules serve and that encoder-server exports
(names read from server/metrics/prometheus_metrics.cc), the ServiceMonitor
selects a Service and scrapes its metrics port, volumes name rendered
ConfigMaps. The Deployments also pass manifests_test.check_deployment
(probes, drain grace, resources, security).
"""

import json
import os
import re
import subprocess

import yaml

import deploy_util as du
import manifests_test as mt

# apiVersion each kind must use (the stable API of current Kubernetes).
API_VERSIONS = {
    "ConfigMap": "v1",
    "Service": "v1",
    "Deployment": "apps/v1",
    "PodDisruptionBudget": "policy/v1",
    "HorizontalPodAutoscaler": "autoscaling/v2",
    "ServiceMonitor": "monitoring.coreos.com/v1",
}
# Dotted paths each kind must have.
REQUIRED = {
    "ConfigMap": ["data"],
    "Service": ["spec.selector", "spec.ports"],
    "Deployment": ["spec.selector.matchLabels", "spec.template.metadata.labels",
                   "spec.template.spec.containers"],
    "PodDisruptionBudget": ["spec.selector.matchLabels"],
    "HorizontalPodAutoscaler": ["spec.scaleTargetRef", "spec.minReplicas",
                                "spec.maxReplicas", "spec.metrics"],
    "ServiceMonitor": ["spec.selector.matchLabels", "spec.endpoints"],
}
EXPECTED_KINDS = {"ConfigMap", "Service", "Deployment", "PodDisruptionBudget",
                  "HorizontalPodAutoscaler", "ServiceMonitor"}
NAME_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def get(obj, path):
    for key in path.split("."):
        if not isinstance(obj, dict) or key not in obj:
            return None
        obj = obj[key]
    return obj


def render(tool, directory):
    command = ([tool, "build", directory]
               if os.path.basename(tool) == "kustomize"
               else [tool, "kustomize", directory])
    run = subprocess.run(command, capture_output=True, text=True, timeout=60)
    if run.returncode != 0:
        raise du.CheckFailed(f"{' '.join(command)} failed "
                             f"({run.returncode}): {run.stderr}")
    return [d for d in yaml.safe_load_all(run.stdout) if d]


def server_metric_names(src):
    """Metric families registered in prometheus_metrics.cc."""
    path = os.path.join(src, "server", "metrics", "prometheus_metrics.cc")
    with open(path) as f:
        text = f.read()
    return set(re.findall(r'\.Name\("(encoder_[a-z0-9_]+)"\)', text)) | set(
        re.findall(r'name = "(encoder_[a-z0-9_]+)"', text))


def selects(selector, labels):
    return bool(selector) and selector.items() <= (labels or {}).items()


def check_objects(where, docs, checks):
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
    names = [(d.get("kind"), get(d, "metadata.name")) for d in docs]
    checks.equal(len(names), len(set(names)), f"{where}: duplicate objects")


def check_references(where, docs, metric_names, served_metrics, checks):
    by_kind = {}
    for doc in docs:
        by_kind.setdefault(doc["kind"], []).append(doc)
    checks.equal(set(by_kind), EXPECTED_KINDS, f"{where}: kinds rendered")
    deployments = by_kind.get("Deployment", [])
    config_maps = {get(c, "metadata.name"): c
                   for c in by_kind.get("ConfigMap", [])}
    pod_labels = {}
    container_ports = {}
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
        container_ports[name] = ports
        for volume in get(deployment, "spec.template.spec.volumes") or []:
            if "configMap" in volume:
                checks.check(volume["configMap"]["name"] in config_maps,
                             f"{where}: {name}: volume {volume['name']} "
                             f"names a ConfigMap that is not rendered")

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
        checks.check(1 <= hpa["spec"]["minReplicas"]
                     <= hpa["spec"]["maxReplicas"],
                     f"{where}: HPA {name} replica bounds")
        metrics = hpa["spec"]["metrics"]
        checks.check(all(m.get("type") == "Pods" for m in metrics),
                     f"{where}: HPA {name} scales on other than Pods "
                     f"metrics: {[m.get('type') for m in metrics]}")
        for metric in metrics:
            metric_name = get(metric, "pods.metric.name")
            checks.check(metric_name in metric_names,
                         f"{where}: HPA {name} metric {metric_name} is not "
                         "exported by encoder-server")
            checks.check(metric_name in served_metrics,
                         f"{where}: HPA {name} metric {metric_name} is not "
                         "served by the adapter rules")
            value = get(metric, "pods.target.averageValue")
            checks.check(get(metric, "pods.target.type") == "AverageValue"
                         and value is not None and float(value) > 0,
                         f"{where}: HPA {name} {metric_name} target")

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
                checks.equal(port["port"], mt.METRICS_PORT,
                             f"{where}: ServiceMonitor {name} scrapes port "
                             f"{port['port']}")
    return deployments, config_maps


def adapter_metrics(docs, metric_names, checks):
    """Custom metric names the adapter rules serve; each rule must read a
    series encoder-server exports and key on namespace and pod."""
    maps = [d for d in docs if d.get("kind") == "ConfigMap"]
    check_objects("prometheus-adapter", docs, checks)
    checks.check(len(maps) == 1 and "config.yaml" in maps[0].get("data", {}),
                 "prometheus-adapter: one ConfigMap with config.yaml")
    if not maps:
        return set()
    config = yaml.safe_load(maps[0]["data"]["config.yaml"])
    served = set()
    for rule in config.get("rules", []):
        series = re.match(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)", rule["seriesQuery"])
        series = series.group(1) if series else None
        checks.check(series in metric_names,
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
        served.add(name.get("as", series))
    return served


def main():
    parser = du.common_args(__doc__)
    parser.add_argument("--kustomize", required=True,
                        help="kubectl (runs `kubectl kustomize`) or "
                             "kustomize (runs `kustomize build`)")
    args = parser.parse_args()
    du.require_executable(args.kustomize, "kubectl or kustomize")
    src = args.source_dir
    k8s = os.path.join(src, "deploy", "k8s")
    with du.Harness(args, "kubernetes"):
        checks = du.Checks()
        metric_names = server_metric_names(src)
        checks.check({"encoder_queue_depth", "encoder_in_flight_requests"}
                     <= metric_names,
                     f"metric names not found in prometheus_metrics.cc: "
                     f"{sorted(metric_names)}")
        served = adapter_metrics(
            render(args.kustomize, os.path.join(k8s, "prometheus-adapter")),
            metric_names, checks)
        with open(os.path.join(src, "deploy", "models",
                               "repository.json")) as f:
            repository = json.load(f)
        overlays_dir = os.path.join(k8s, "overlays")
        overlays = sorted(os.listdir(overlays_dir))
        checks.equal(overlays, ["cpu", "gpu"], "overlays")
        selectors = []
        for overlay in overlays:
            docs = render(args.kustomize, os.path.join(overlays_dir, overlay))
            check_objects(overlay, docs, checks)
            deployments, config_maps = check_references(
                overlay, docs, metric_names, served, checks)
            for deployment in deployments:
                mt.check_deployment(deployment, config_maps, repository,
                                    checks, gpu=(overlay == "gpu"))
                selectors.append(deployment["spec"]["selector"]["matchLabels"])
            print(f"{overlay}: {len(docs)} objects checked")
        checks.check(len(selectors) == 2 and selectors[0] != selectors[1],
                     "the CPU and GPU Deployments share a selector")
        checks.raise_if_failed()
    print("PASSED")


if __name__ == "__main__":
    du.run(main)
