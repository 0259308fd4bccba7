#!/usr/bin/python3
"""Static checks of the deployment files, with the real parsers.

docker-compose validates and resolves docker-compose.yml (also with the
host ports overridden from the environment); the resolved services must
agree with deploy/prometheus.yml, deploy/nginx/nginx.conf, the Grafana
provisioning and deploy/Dockerfile. promtool checks deploy/prometheus.yml.
The Kubernetes manifests are checked by kubernetes_test.py, which reuses
check_deployment from here.
"""

import json
import os
import re
import subprocess

import yaml

import deploy_util as du

REPLICA_SERVICES = ("replica1", "replica2")
GRPC_PORT = du.GRPC_PORT
METRICS_PORT = du.METRICS_PORT
HEALTH_PORT = du.HEALTH_PORT


def seconds(duration):
    """'30s', '1m30s', '45' -> seconds."""
    if isinstance(duration, (int, float)):
        return float(duration)
    parts = re.fullmatch(r"(?:(\d+)h)?(?:(\d+)m)?(?:(\d+(?:\.\d+)?)s?)?",
                         str(duration))
    if not parts:
        raise ValueError(f"bad duration {duration!r}")
    h, m, s = parts.groups()
    return int(h or 0) * 3600 + int(m or 0) * 60 + float(s or 0)


flag_value = du.flag_value


def mounts(service):
    """{container path: (host path, read_only)} of a resolved service."""
    result = {}
    for volume in service.get("volumes", []):
        if isinstance(volume, dict):
            result[volume["target"]] = (volume.get("source"),
                                        volume.get("read_only", False))
        else:
            parts = volume.split(":")
            result[parts[1]] = (parts[0], len(parts) > 2 and "ro" in parts[2])
    return result


def published(service):
    ports = {}
    for port in service.get("ports", []):
        if isinstance(port, dict):
            ports[int(port["target"])] = int(port["published"])
        else:
            host, _, container = str(port).rpartition(":")
            ports[int(container)] = int(host.rpartition(":")[2])
    return ports


def compose_config(compose, source_dir, env):
    run = subprocess.run([compose, "-f", "docker-compose.yml", "config"],
                         cwd=source_dir, env=env, capture_output=True,
                         text=True, timeout=60)
    if run.returncode != 0:
        raise du.CheckFailed(f"docker-compose config failed "
                             f"({run.returncode}): {run.stderr}")
    return yaml.safe_load(run.stdout)


def check_compose(compose, src, checks):
    env = {k: v for k, v in os.environ.items()
           if k not in ("ENCODER_GRPC_PORT", "PROMETHEUS_PORT",
                        "GRAFANA_PORT")}
    config = compose_config(compose, src, env)
    services = config["services"]
    checks.check(set(services) >= {*REPLICA_SERVICES, "nginx", "prometheus",
                                   "grafana"},
                 f"compose services {sorted(services)}")
    deploy = os.path.join(src, "deploy")

    for name in REPLICA_SERVICES:
        service = services[name]
        command = service.get("command") or []
        # The image's HTTP port is 80 (TEI's); the replicas' is 9090,
        # where Prometheus scrapes.
        checks.equal(flag_value(command, "port"), str(METRICS_PORT),
                     f"{name} --port")
        checks.equal(flag_value(command, "models"), "/models/repository.json",
                     f"{name} --models")
        checks.equal(mounts(service).get("/models"),
                     (os.path.join(deploy, "models"), True),
                     f"{name} model repository volume")
        drain = seconds(flag_value(command, "drain-grace") or "20s")
        checks.check(seconds(service.get("stop_grace_period", 10)) > drain,
                     f"{name} stop_grace_period "
                     f"{service.get('stop_grace_period')} <= drain {drain}")
        checks.equal(service.get("build", {}).get("dockerfile"),
                     "deploy/Dockerfile", f"{name} Dockerfile")
        checks.equal(sorted(str(p) for p in service.get("expose", [])),
                     [str(GRPC_PORT), str(METRICS_PORT)], f"{name} expose")

    checks.equal(mounts(services["nginx"]).get("/etc/nginx/nginx.conf"),
                 (os.path.join(deploy, "nginx", "nginx.conf"), True),
                 "nginx config volume")
    checks.equal(published(services["nginx"]), {GRPC_PORT: GRPC_PORT},
                 "nginx published ports")
    prometheus_config = next(
        (p for p in (services["prometheus"].get("command") or [])
         if p.startswith("--config.file=")), "").split("=", 1)[-1]
    checks.equal(mounts(services["prometheus"]).get(prometheus_config),
                 (os.path.join(deploy, "prometheus.yml"), True),
                 "Prometheus config volume")
    grafana = mounts(services["grafana"])
    checks.equal(grafana.get("/etc/grafana/provisioning"),
                 (os.path.join(deploy, "grafana", "provisioning"), True),
                 "Grafana provisioning volume")

    overridden = dict(env, ENCODER_GRPC_PORT="15051", PROMETHEUS_PORT="19091",
                      GRAFANA_PORT="13000")
    services2 = compose_config(compose, src, overridden)["services"]
    checks.equal(published(services2["nginx"]), {GRPC_PORT: 15051},
                 "nginx port from ENCODER_GRPC_PORT")
    checks.equal(published(services2["prometheus"]), {9090: 19091},
                 "Prometheus port from PROMETHEUS_PORT")
    checks.equal(published(services2["grafana"]), {3000: 13000},
                 "Grafana port from GRAFANA_PORT")
    return services, grafana


def check_scrape_and_balance(src, checks):
    deploy = os.path.join(src, "deploy")
    with open(os.path.join(deploy, "prometheus.yml")) as f:
        prometheus = yaml.safe_load(f)
    jobs = {j["job_name"]: j for j in prometheus["scrape_configs"]}
    targets = sorted(t for sc in jobs.get("encoder", {}).get(
        "static_configs", []) for t in sc["targets"])
    checks.equal(targets, sorted(f"{r}:{METRICS_PORT}"
                                 for r in REPLICA_SERVICES),
                 "Prometheus encoder targets (every replica)")
    with open(os.path.join(deploy, "nginx", "nginx.conf")) as f:
        nginx = f.read()
    upstream = sorted(re.findall(r"^\s*server\s+([\w.-]+:\d+)", nginx,
                                 re.MULTILINE))
    checks.equal(upstream, sorted(f"{r}:{GRPC_PORT}"
                                  for r in REPLICA_SERVICES),
                 "nginx upstream servers (every replica)")
    checks.check(re.search(r"grpc_pass\s+grpc://", nginx),
                 "nginx.conf has no grpc_pass")
    checks.check(re.search(r"grpc_next_upstream\s+[^;]*\berror\b", nginx),
                 "nginx.conf does not retry on error")
    checks.check(re.search(rf"listen\s+{GRPC_PORT}\s+http2", nginx),
                 "nginx.conf does not listen with HTTP/2")


def check_grafana(src, grafana_mounts, checks):
    base = os.path.join(src, "deploy", "grafana")
    with open(os.path.join(base, "provisioning", "datasources",
                           "prometheus.yml")) as f:
        datasources = yaml.safe_load(f)["datasources"]
    uids = {d["uid"] for d in datasources if d["type"] == "prometheus"}
    checks.check(any(d.get("url") == f"http://prometheus:{METRICS_PORT}"
                     for d in datasources),
                 f"datasource URLs {[d.get('url') for d in datasources]}")
    with open(os.path.join(base, "provisioning", "dashboards",
                           "dashboards.yml")) as f:
        providers = yaml.safe_load(f)["providers"]
    for provider in providers:
        path = provider["options"]["path"]
        checks.equal(grafana_mounts.get(path),
                     (os.path.join(base, "dashboards"), True),
                     f"compose mount of the dashboard path {path}")
    with open(os.path.join(base, "dashboards", "encoder.json")) as f:
        dashboard = json.load(f)
    for panel in dashboard["panels"]:
        checks.check(panel.get("datasource", {}).get("uid") in uids,
                     f"panel {panel.get('title')} datasource "
                     f"{panel.get('datasource')} not provisioned {uids}")
        checks.check(panel.get("targets") and all(
            t.get("expr") for t in panel["targets"]),
            f"panel {panel.get('title')} has a target without expr")


def check_dockerfiles(src, checks):
    with open(os.path.join(src, "deploy", "Dockerfile")) as f:
        cpu = f.read()
    with open(os.path.join(src, "deploy", "Dockerfile.cuda")) as f:
        cuda = f.read()
    for name, text in (("Dockerfile", cpu), ("Dockerfile.cuda", cuda)):
        joined = re.sub(r"\\\n", " ", text)
        checks.check(re.search(r"^EXPOSE\s+50051\s+80\s*$", joined,
                               re.MULTILINE), f"{name}: EXPOSE 50051 80")
        # HTTP as text-embeddings-inference's images have it: port 80 on
        # every interface, from the environment so that TEI's PORT, our
        # ENCODER_PORT or a --port after the image name replaces it.
        checks.check(re.search(r"^ENV ENCODER_HTTP_ADDRESS=0\.0\.0\.0 "
                               r"PORT=80\s*$", joined, re.MULTILINE),
                     f"{name}: ENV ENCODER_HTTP_ADDRESS=0.0.0.0 PORT=80")
        # Health on the loopback health-only port, plaintext whatever the
        # gRPC port's TLS, from an environment default a flag replaces.
        checks.check(re.search(r'^HEALTHCHECK .*CMD \["encoder-client", '
                               r'"health", "--target", "127.0.0.1:50052"\]',
                               joined, re.MULTILINE),
                     f"{name}: HEALTHCHECK with encoder-client health on "
                     "the health port")
        checks.check(re.search(r"^ENV ENCODER_HEALTH_LISTEN=127\.0\.0\.1:50052"
                               r"\s*$", joined, re.MULTILINE),
                     f"{name}: no ENCODER_HEALTH_LISTEN default for the "
                     "health check")
        users = re.findall(r"^USER\s+(\S+)", joined, re.MULTILINE)
        checks.check(users and not users[-1].startswith(("root", "0")),
                     f"{name}: runs as {users}")
        entry = re.search(r"^ENTRYPOINT\s+(\[.*\])\s*$", joined,
                          re.MULTILINE)
        argv = json.loads(entry.group(1)) if entry else []
        checks.check(argv[:2] == ["encoder-server", "--listen=0.0.0.0:50051"]
                     and not any(a.startswith(("--http-listen",
                                               "--metrics-listen", "--port"))
                                 for a in argv),
                     f"{name}: ENTRYPOINT {argv} (the HTTP port comes from "
                     "the environment)")
        checks.check("install_deps.sh build" in joined and
                     "install_deps.sh runtime" in joined,
                     f"{name}: dependencies not from scripts/install_deps.sh")
    # One LibTorch: the pinned wheel of scripts/libtorch-requirements.txt
    # (the CPU image through scripts/libtorch.sh, the CUDA one installs the
    # same pins with their CUDA dependencies), never a system LibTorch.
    for name, text in (("Dockerfile", cpu), ("Dockerfile.cuda", cuda)):
        checks.check("libtorch-requirements.txt" in text,
                     f"{name}: LibTorch not from the pinned wheel")
        checks.check(not re.search(r"libtorch-dev|libtorch\d|pytorch/pytorch",
                                   text),
                     f"{name}: names a LibTorch other than the pinned wheel")
    joined = re.sub(r"\\\n", " ", cpu)
    checks.check(re.search(
        r'ENCODER_TORCH_WHEEL="\$\(bash \S*scripts/libtorch\.sh\)"', joined),
                 "Dockerfile: the build does not take scripts/libtorch.sh's "
                 "LibTorch")
    checks.check(re.search(r"^COPY --from=build /opt/libtorch /opt/libtorch",
                           cpu, re.MULTILINE),
                 "Dockerfile: the runtime stage lacks LibTorch's libraries")
    checks.check("CUDA_PYTHON=/opt/torch-venv/bin/python" in cuda and
                 "scripts/cuda_build.sh" in cuda,
                 "Dockerfile.cuda: not built by scripts/cuda_build.sh on the "
                 "wheel's venv")
    # BuildKit's per-Dockerfile ignore files: build trees, environments and
    # secrets stay out of both contexts.
    ignores = {}
    for name in ("Dockerfile", "Dockerfile.cuda"):
        path = os.path.join(src, "deploy", name + ".dockerignore")
        if not os.path.exists(path):
            checks.check(False, f"no deploy/{name}.dockerignore")
            continue
        with open(path) as f:
            ignores[name] = {line.strip() for line in f
                             if line.strip() and not line.startswith("#")}
        for pattern in ("build", "build-*", ".git", ".venv", ".cuda-toolkit",
                        ".gpu-bundle", "deploy/secrets", "**/*.key",
                        "**/*.pem"):
            checks.check(pattern in ignores[name],
                         f"{name}.dockerignore lacks {pattern}")
    if len(ignores) == 2:
        checks.equal(ignores["Dockerfile.cuda"], ignores["Dockerfile"],
                     "the two .dockerignore files")


def cpu_quantity(value):
    value = str(value)
    return float(value[:-1]) / 1000 if value.endswith("m") else float(value)


def memory_quantity(value):
    units = {"Ki": 2 ** 10, "Mi": 2 ** 20, "Gi": 2 ** 30, "Ti": 2 ** 40,
             "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}
    match = re.fullmatch(r"(\d+(?:\.\d+)?)([KMGT]i?)?", str(value))
    return float(match.group(1)) * units.get(match.group(2), 1)


def check_deployment(deployment, config_maps, repository, checks, gpu,
                     tls=True, auth=True):
    """gRPC probes on the health port, a preStop hook, a termination grace
    longer than preStop plus the server's drain grace, resources, security
    settings (TLS and bearer tokens from Secrets when `tls`, `auth`) and,
    when `repository` is given, the model ConfigMap (from `config_maps`, by
    name) of one rendered Deployment."""
    name = deployment["metadata"]["name"]
    spec = deployment["spec"]
    template = spec["template"]
    selector = spec["selector"]["matchLabels"]
    labels = template["metadata"]["labels"]
    checks.check(selector.items() <= labels.items(),
                 f"{name}: selector {selector} vs labels {labels}")
    pod = template["spec"]
    container = pod["containers"][0]
    args = container.get("args", [])

    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    checks.equal(flag_value(args, "port"), str(METRICS_PORT),
                 f"{name}: --port (the container's HTTP port)")
    if repository is not None:
        model_mounts = [m for m in container.get("volumeMounts", [])
                        if m["mountPath"] == "/models"]
        checks.equal(flag_value(args, "models"), "/models/repository.json",
                     f"{name}: --models")
        if checks.check(model_mounts, f"{name}: nothing mounted at /models"):
            volume = volumes.get(model_mounts[0]["name"], {})
            map_name = volume.get("configMap", {}).get("name")
            config_map = config_maps.get(map_name)
            checks.check(config_map is not None,
                         f"{name}: /models volume's ConfigMap {map_name!r} "
                         "is not among the rendered objects")
            if config_map:
                checks.equal(json.loads(config_map["data"]["repository.json"]),
                             repository, f"{name}: ConfigMap repository.json "
                             "vs deploy/models/repository.json")

    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    checks.equal(ports, {"grpc": GRPC_PORT, "metrics": METRICS_PORT,
                         "health": HEALTH_PORT}, f"{name}: container ports")
    checks.equal(flag_value(args, "health-listen"), f"0.0.0.0:{HEALTH_PORT}",
                 f"{name}: --health-listen")
    # The kubelet's gRPC probe speaks plaintext: it must use the
    # health-only port, not the TLS one.
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        grpc_probe = container.get(probe, {}).get("grpc", {})
        checks.equal(grpc_probe.get("port"), HEALTH_PORT,
                     f"{name}: {probe} gRPC port")
    check_pod_security(name, pod, container, args, checks, tls, auth)
    pre_stop = container.get("lifecycle", {}).get("preStop", {})
    command = pre_stop.get("exec", {}).get("command", [])
    checks.check(command[:1] == ["sleep"], f"{name}: preStop {pre_stop}")
    pre_stop_seconds = float(command[1]) if len(command) > 1 else 0.0
    drain = flag_value(args, "drain-grace")
    checks.check(drain is not None, f"{name}: no --drain-grace")
    grace = pod.get("terminationGracePeriodSeconds", 30)
    checks.check(grace > pre_stop_seconds + seconds(drain or "20s"),
                 f"{name}: terminationGracePeriodSeconds {grace} <= preStop "
                 f"{pre_stop_seconds} + drain grace {drain}")

    resources = container.get("resources", {})
    requests = resources.get("requests", {})
    limits = resources.get("limits", {})
    for key, parse in (("cpu", cpu_quantity), ("memory", memory_quantity)):
        if checks.check(key in requests and key in limits,
                        f"{name}: {key} request and limit"):
            checks.check(parse(requests[key]) <= parse(limits[key]),
                         f"{name}: {key} request over its limit")
    if gpu:
        checks.check(int(limits.get("nvidia.com/gpu", 0)) >= 1,
                     f"{name}: no nvidia.com/gpu limit")
    checks.check(pod.get("securityContext", {}).get("runAsNonRoot"),
                 f"{name}: not runAsNonRoot")
    return deployment


def check_pod_security(name, pod, container, args, checks, tls=True,
                       auth=True):
    """Non-root, read-only root filesystem, no privilege escalation, and
    TLS (`tls`) and tokens (`auth`) read from Secret volumes, or no such
    flags when off."""
    context = container.get("securityContext", {})
    checks.check(context.get("readOnlyRootFilesystem") is True,
                 f"{name}: root filesystem not read-only")
    checks.check(context.get("allowPrivilegeEscalation") is False,
                 f"{name}: privilege escalation allowed")
    checks.equal(context.get("capabilities", {}).get("drop"), ["ALL"],
                 f"{name}: capabilities not dropped")
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    mounts = {m["mountPath"]: m for m in container.get("volumeMounts", [])}
    wanted = (("tls-cert", tls), ("tls-key", tls), ("auth-token-file", auth))
    for flag, on in wanted:
        path = flag_value(args, flag)
        if not on:
            checks.check(path is None, f"{name}: --{flag} without TLS/auth")
            continue
        if not checks.check(path, f"{name}: no --{flag}"):
            continue
        mount = mounts.get(os.path.dirname(path), {})
        volume = volumes.get(mount.get("name"), {})
        checks.check("secret" in volume and mount.get("readOnly"),
                     f"{name}: --{flag}={path} is not on a read-only "
                     f"Secret volume")
    checks.equal(flag_value(args, "reflection"), "false",
                 f"{name}: --reflection")


def main():
    parser = du.common_args(__doc__)
    parser.add_argument("--docker-compose", required=True)
    parser.add_argument("--promtool", default="")
    args = parser.parse_args()
    du.require_executable(args.docker_compose, "docker-compose")
    with du.Harness(args, "manifests"):
        checks = du.Checks()
        _, grafana_mounts = check_compose(args.docker_compose,
                                          args.source_dir, checks)
        check_scrape_and_balance(args.source_dir, checks)
        check_grafana(args.source_dir, grafana_mounts, checks)
        check_dockerfiles(args.source_dir, checks)
        if args.promtool and os.access(args.promtool, os.X_OK):
            run = subprocess.run(
                [args.promtool, "check", "config",
                 os.path.join(args.source_dir, "deploy", "prometheus.yml")],
                capture_output=True, text=True, timeout=60)
            checks.equal(run.returncode, 0,
                         f"promtool check config: {run.stdout}{run.stderr}")
        checks.raise_if_failed()
    print("PASSED")


if __name__ == "__main__":
    du.run(main)
