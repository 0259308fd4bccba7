#!/usr/bin/python3
"""The Kubernetes manifests under deploy/k8s, rendered with kustomize and
checked object by object.

Every overlay (deploy/k8s/overlays/*) and the Prometheus adapter
configuration are rendered with `kubectl kustomize` (or a standalone
`kustomize build`). Each rendered object must have the apiVersion its kind
is served under, the fields that kind requires, only fields of its schema
with their types (deploy_util.SCHEMAS), and consistent cross references:
Deployment selectors and topology spread constraints match their pod
labels, Services and the PodDisruptionBudget select the Deployment's pods
and name container ports that exist, the HPA targets a rendered Deployment
and scales on exactly the Pods metrics that the adapter rules serve, whose
series encoder-server exports (names read from
server/metrics/prometheus_metrics.cc), the ServiceMonitor selects a Service,
scrapes its metrics port with the scheme the server's TLS flags give, and
volumes name rendered ConfigMaps. Every container flag and ENCODER_
variable is one of docs/configuration.md. The Deployments also pass
manifests_test.check_deployment (probes, drain grace, resources,
security). helm_test.py checks that the Helm chart renders the same
objects.
"""

import json
import os

import deploy_util as du
import manifests_test as mt

EXPECTED_KINDS = {"ConfigMap", "Service", "Deployment", "PodDisruptionBudget",
                  "HorizontalPodAutoscaler", "ServiceMonitor"}


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
        metric_names = du.server_metric_names(src)
        checks.check({"encoder_queue_depth", "encoder_in_flight_requests",
                      "encoder_queue_duration_seconds"} <= metric_names,
                     f"metric names not found in prometheus_metrics.cc: "
                     f"{sorted(metric_names)}")
        served = du.adapter_metrics(
            du.kustomize(args.kustomize,
                         os.path.join(k8s, "prometheus-adapter")),
            du.exported_series(src), checks)
        documented = du.documented_flags(src)
        with open(os.path.join(src, "deploy", "models",
                               "repository.json")) as f:
            repository = json.load(f)
        overlays_dir = os.path.join(k8s, "overlays")
        overlays = sorted(os.listdir(overlays_dir))
        checks.equal(overlays, ["cpu", "gpu"], "overlays")
        selectors = []
        for overlay in overlays:
            docs = du.kustomize(args.kustomize,
                                os.path.join(overlays_dir, overlay))
            du.check_objects(overlay, docs, checks)
            deployments, config_maps = du.check_references(
                overlay, docs, served, checks, EXPECTED_KINDS)
            for deployment in deployments:
                mt.check_deployment(deployment, config_maps, repository,
                                    checks, gpu=(overlay == "gpu"))
                for container in du.get(deployment,
                                        "spec.template.spec.containers"):
                    du.check_container_flags(overlay, container, documented,
                                             checks)
                selectors.append(deployment["spec"]["selector"]["matchLabels"])
            print(f"{overlay}: {len(docs)} objects checked")
        checks.check(len(selectors) == 2 and selectors[0] != selectors[1],
                     "the CPU and GPU Deployments share a selector")
        checks.raise_if_failed()
    print("PASSED")


if __name__ == "__main__":
    du.run(main)
